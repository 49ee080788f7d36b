//! Readable listings of the engine's own logs, for tools (`strata
//! manifest`, `strata wal dump`): every version edit of a manifest, every
//! write batch of a write-ahead log. Both only read.

use std::path::{Path, PathBuf};

use crate::db::write_batch::{BatchRecord, WriteBatch};
use crate::env::FileSystem;
use crate::error::Result;
use crate::version::VersionEdit;
use crate::wal::{LogReader, WalRecoveryMode};

/// A table file a version edit adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedFile {
    /// Level it goes to.
    pub level: usize,
    /// File number (`NNNNNN.sst`).
    pub number: u64,
    /// Bytes.
    pub size: u64,
    /// Smallest user key and its sequence number.
    pub smallest: (Vec<u8>, u64),
    /// Largest user key and its sequence number.
    pub largest: (Vec<u8>, u64),
}

/// One version edit of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ManifestRecord {
    /// Offset of the record in the manifest.
    pub offset: u64,
    /// The column family the edit changes (0: the default).
    pub column_family: u32,
    /// The edit creates its column family, with this name.
    pub column_family_add: Option<String>,
    /// The edit drops its column family.
    pub column_family_drop: bool,
    /// The comparator's name, when the edit records it.
    pub comparator: Option<String>,
    /// The oldest log the edit's column family still needs.
    pub log_number: Option<u64>,
    /// The next file number.
    pub next_file_number: Option<u64>,
    /// The last sequence number.
    pub last_sequence: Option<u64>,
    /// (level, file number) of every file removed.
    pub deleted: Vec<(usize, u64)>,
    /// Every file added.
    pub added: Vec<AddedFile>,
}

/// A reader of the log-format file at `path` (a manifest or a write-ahead
/// log), tolerating a torn tail as recovery does, and its name.
fn open_log(fs: &dyn FileSystem, path: &Path) -> Result<(LogReader, String)> {
    let name = path.display().to_string();
    let reader = LogReader::new(
        fs.open_sequential(path)?,
        name.clone(),
        WalRecoveryMode::TolerateCorruptedTailRecords,
    );
    Ok((reader, name))
}

/// The manifest the `CURRENT` file of database `dir` names.
pub fn current_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<PathBuf> {
    let number = crate::version::read_current(fs, dir)?;
    Ok(crate::db::filename::manifest_file_name(dir, number))
}

/// Every version edit in the manifest at `path`. A torn last record (what a
/// crash leaves) ends the list; damage elsewhere is `Corruption`.
pub fn manifest_records(fs: &dyn FileSystem, path: &Path) -> Result<Vec<ManifestRecord>> {
    let (mut reader, name) = open_log(fs, path)?;
    let mut record = Vec::new();
    let mut out = Vec::new();
    while reader.read_record(&mut record)? {
        let offset = reader.last_record_offset();
        let edit = VersionEdit::decode(&record, &name, offset)?;
        out.push(ManifestRecord {
            offset,
            column_family: edit.column_family(),
            column_family_add: edit.column_family_add().map(str::to_string),
            column_family_drop: edit.is_column_family_drop(),
            comparator: edit.comparator_name().map(str::to_string),
            log_number: edit.log_number(),
            next_file_number: edit.next_file_number(),
            last_sequence: edit.last_sequence(),
            deleted: edit.deleted_files().iter().copied().collect(),
            added: edit
                .new_files()
                .iter()
                .map(|(level, f)| AddedFile {
                    level: *level,
                    number: f.number,
                    size: f.file_size,
                    smallest: (f.smallest.user_key().to_vec(), f.smallest_seqno),
                    largest: (f.largest.user_key().to_vec(), f.largest_seqno),
                })
                .collect(),
        });
    }
    Ok(out)
}

/// One operation of a logged write batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalEntry {
    /// Set a key to a value.
    Put(Vec<u8>, Vec<u8>),
    /// Remove a key.
    Delete(Vec<u8>),
    /// Merge an operand into a key.
    Merge(Vec<u8>, Vec<u8>),
    /// Remove every key in `[from, to)`.
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// One record (write batch) of a write-ahead log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// Offset of the record in the log.
    pub offset: u64,
    /// Sequence number of the batch's first entry.
    pub sequence: u64,
    /// The batch's operations, in order.
    pub entries: Vec<WalEntry>,
}

/// What a write-ahead log records about the log before it: its number and
/// its size in bytes when this one was started (`docs/format/wal.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalPredecessor {
    /// The older log's file number.
    pub number: u64,
    /// Its size in bytes when this log was started.
    pub size: u64,
}

/// The predecessor the write-ahead log at `path` names, if it starts with
/// one (a log started by a memtable switch does; the first log and one
/// started by recovery do not).
pub fn wal_predecessor(fs: &dyn FileSystem, path: &Path) -> Result<Option<WalPredecessor>> {
    let (mut reader, _) = open_log(fs, path)?;
    reader.read_record(&mut Vec::new())?;
    Ok(reader.predecessor().map(|p| WalPredecessor {
        number: p.number,
        size: p.size,
    }))
}

/// Every record of the write-ahead log at `path`. A torn last record ends
/// the list; damage elsewhere is `Corruption`.
pub fn wal_records(fs: &dyn FileSystem, path: &Path) -> Result<Vec<WalRecord>> {
    let (mut reader, name) = open_log(fs, path)?;
    let mut record = Vec::new();
    let mut out = Vec::new();
    while reader.read_record(&mut record)? {
        let offset = reader.last_record_offset();
        let batch = WriteBatch::from_record(&record, &name, offset)?;
        let mut entries = Vec::with_capacity(batch.len());
        for r in batch.iter() {
            // from_record validated every record.
            match r {
                Ok(BatchRecord::Put(k, v)) => entries.push(WalEntry::Put(k.to_vec(), v.to_vec())),
                Ok(BatchRecord::Delete(k)) => entries.push(WalEntry::Delete(k.to_vec())),
                Ok(BatchRecord::Merge(k, v)) => {
                    entries.push(WalEntry::Merge(k.to_vec(), v.to_vec()))
                }
                Ok(BatchRecord::DeleteRange(from, to)) => {
                    entries.push(WalEntry::DeleteRange(from.to_vec(), to.to_vec()))
                }
                Err(what) => {
                    return Err(crate::Error::corruption(&*name, offset, what.to_string()));
                }
            }
        }
        out.push(WalRecord {
            offset,
            sequence: batch.sequence(),
            entries,
        });
    }
    Ok(out)
}
