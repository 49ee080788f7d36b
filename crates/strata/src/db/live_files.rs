//! The table files of the current version, as `rocksdb::DB::live_files`
//! reports them.

use std::path::Path;

use crate::error::{Error, Result};
use crate::version::NUM_LEVELS;

use super::filename::table_file_name;
use super::inner::DbInner;
use super::DB;

/// One table file of the current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// Always `"default"`: Strata has one column family so far.
    pub column_family_name: String,
    /// The file name, `/NNNNNN.sst` (relative to the database directory,
    /// with a leading slash, as RocksDB reports it).
    pub name: String,
    /// Size in bytes.
    pub size: usize,
    /// The level the file is in.
    pub level: i32,
    /// Smallest user key in the file.
    pub start_key: Option<Vec<u8>>,
    /// Largest user key in the file.
    pub end_key: Option<Vec<u8>>,
    /// Smallest sequence number of any entry.
    pub smallest_seqno: u64,
    /// Largest sequence number of any entry.
    pub largest_seqno: u64,
    /// Entries in the file (puts and deletions), from its properties.
    pub num_entries: u64,
    /// Deletion entries in the file, from its properties.
    pub num_deletions: u64,
}

impl DB {
    /// The table files the current version is made of, level by level
    /// (the order of each level's files: by key from level 1 on, newest
    /// first in level 0). Opens each table to read its entry counts.
    pub fn live_files(&self) -> Result<Vec<LiveFile>> {
        let mut out = Vec::new();
        for (cf, version) in self.inner.current_versions() {
            let listed = Self::cf_live_files(&cf, &version, &mut out);
            // Through the release path: if the version stopped being
            // current meanwhile, this may be its last holder.
            cf.release_version(version);
            listed?;
        }
        Ok(out)
    }

    fn cf_live_files(
        cf: &DbInner,
        version: &crate::version::Version,
        out: &mut Vec<LiveFile>,
    ) -> Result<()> {
        for level in 0..NUM_LEVELS {
            for f in version.files(level) {
                let table = cf.table_cache.get_for(f, level)?;
                let props = table.properties();
                out.push(LiveFile {
                    column_family_name: cf.name.clone(),
                    // The name below the database directory, as RocksDB.
                    name: table_file_name(Path::new("/"), f.number)
                        .display()
                        .to_string(),
                    size: f.file_size as usize,
                    level: level as i32,
                    start_key: Some(f.smallest.user_key().to_vec()),
                    end_key: Some(f.largest.user_key().to_vec()),
                    smallest_seqno: f.smallest_seqno,
                    largest_seqno: f.largest_seqno,
                    num_entries: props.num_entries,
                    num_deletions: props.num_deletions,
                });
            }
        }
        Ok(())
    }

    /// Reads every live table file whole and checks every checksum in it
    /// (each block or section) and its size and entry count against what
    /// the manifest and its properties record. One result per file, in the
    /// order of [`DB::live_files`]: `Ok(entries)` or the error (a
    /// `Corruption` names the file and offset). Tables are opened apart
    /// from the table cache, so a damaged one is reported rather than
    /// failing the whole check.
    pub fn verify_table_files(&self) -> Vec<TableFileCheck> {
        let mut out = Vec::new();
        for (cf, version) in self.inner.current_versions() {
            Self::verify_cf_table_files(&cf, &version, &mut out);
            cf.release_version(version);
        }
        out
    }

    fn verify_cf_table_files(
        cf: &DbInner,
        version: &crate::version::Version,
        out: &mut Vec<TableFileCheck>,
    ) {
        for level in 0..NUM_LEVELS {
            for f in version.files(level) {
                let path = table_file_name(&cf.dir, f.number);
                let name = path.display().to_string();
                let result = cf.fs.open_random_access(&path).and_then(|file| {
                    if file.size() != f.file_size {
                        return Err(Error::corruption(
                            &name,
                            file.size().min(f.file_size),
                            format!(
                                "file is {} bytes, the manifest says {}",
                                file.size(),
                                f.file_size
                            ),
                        ));
                    }
                    crate::sst::verify_table(file, &name, cf.user_cmp.clone())
                });
                out.push(TableFileCheck {
                    name: table_file_name(Path::new("/"), f.number)
                        .display()
                        .to_string(),
                    level: level as i32,
                    result,
                });
            }
        }
    }

    /// Checks every live table file ([`DB::verify_table_files`]) and
    /// returns the first failure (RocksDB's `DB::VerifyChecksum`).
    pub fn verify_checksum(&self) -> Result<()> {
        match self
            .verify_table_files()
            .into_iter()
            .find_map(|c| c.result.err())
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What [`DB::verify_table_files`] found in one table file.
#[derive(Debug, Clone)]
pub struct TableFileCheck {
    /// The file name, `/NNNNNN.sst`, as in [`LiveFile::name`].
    pub name: String,
    /// The level the file is in.
    pub level: i32,
    /// Entries read, or what is wrong with the file.
    pub result: Result<u64>,
}
