//! The table files of the current version, as `rocksdb::DB::live_files`
//! reports them.

use std::path::Path;

use crate::error::Result;
use crate::version::NUM_LEVELS;

use super::filename::table_file_name;
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
        let version = self.inner.state.lock().versions.current();
        let mut out = Vec::with_capacity(version.all_files().count());
        for level in 0..NUM_LEVELS {
            for f in version.files(level) {
                let table = self.inner.table_cache.get_for(f, level)?;
                let props = table.properties();
                out.push(LiveFile {
                    column_family_name: "default".into(),
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
        // Through the release path: if the version stopped being current
        // meanwhile, this may be its last holder.
        self.inner.release_version(version);
        Ok(out)
    }
}
