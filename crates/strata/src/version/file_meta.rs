//! What a version knows about one table file.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use super::NewFile;
use crate::key::InternalKey;
use crate::sst::Table;

/// One table file of a version: its number, size, and the range of internal
/// keys and sequence numbers it holds. Shared (`Arc`) between every version
/// that contains the file.
#[derive(Debug)]
pub struct FileMetaData {
    /// File number: the table is `NNNNNN.sst`.
    pub number: u64,
    /// Size of the table file in bytes.
    pub file_size: u64,
    /// Smallest internal key in the file.
    pub smallest: InternalKey,
    /// Largest internal key in the file.
    pub largest: InternalKey,
    /// Smallest sequence number of any entry in the file.
    pub smallest_seqno: u64,
    /// Largest sequence number of any entry in the file.
    pub largest_seqno: u64,
    /// The table holds range deletions.
    pub has_range_deletions: bool,
    /// Those range deletions, read from the table once for the file's
    /// lifetime (every version holding the file shares them).
    pub(crate) range_dels: OnceLock<Arc<[crate::range_del::RangeTombstone]>>,
    /// Those range deletions fragmented (`None`: the table has none),
    /// built once for the file's lifetime by the first iterator that
    /// reads the file as a source of its own (level 0).
    pub(crate) fragmented_range_dels: super::LevelRangeDels,
    /// Set while a compaction has the file as an input, so no second
    /// compaction picks it. Not persisted.
    pub being_compacted: AtomicBool,
    /// The open reader, kept here when the table cache has no bound
    /// (`max_open_files = -1`), so point lookups skip the cache's lock and
    /// hash lookup (RocksDB keeps `FileDescriptor::table_reader` for the
    /// same reason). It closes when the last version holding the file goes.
    pub(crate) reader: OnceLock<Table>,
    /// Point lookups that may still search this file in vain before it is
    /// due for a read-triggered compaction (LevelDB's `allowed_seeks`):
    /// each `get` that reads a block of the file, misses, and goes on to
    /// an older file takes one. Not persisted: a reopen starts afresh.
    pub(crate) allowed_seeks: AtomicI64,
}

/// Bytes of a file that one wasted lookup is worth compacting (LevelDB's
/// and Pebble's figure: a block read from the device costs about as much
/// as compacting 16 KiB).
const BYTES_PER_SEEK: u64 = 16 << 10;
/// The fewest wasted lookups that make any file due (LevelDB's).
const MIN_ALLOWED_SEEKS: i64 = 100;

/// The wasted lookups a file of `file_size` bytes is allowed.
fn allowed_seeks(file_size: u64) -> i64 {
    i64::try_from(file_size / BYTES_PER_SEEK)
        .unwrap_or(i64::MAX)
        .max(MIN_ALLOWED_SEEKS)
}

impl FileMetaData {
    /// Describes a table file that no compaction holds.
    pub fn new(
        number: u64,
        file_size: u64,
        smallest: InternalKey,
        largest: InternalKey,
        smallest_seqno: u64,
        largest_seqno: u64,
    ) -> FileMetaData {
        FileMetaData {
            number,
            file_size,
            smallest,
            largest,
            smallest_seqno,
            largest_seqno,
            has_range_deletions: false,
            range_dels: OnceLock::new(),
            fragmented_range_dels: OnceLock::new(),
            being_compacted: AtomicBool::new(false),
            reader: OnceLock::new(),
            allowed_seeks: AtomicI64::new(allowed_seeks(file_size)),
        }
    }

    /// Takes one wasted lookup from the file's allowance; true if that
    /// leaves none (the file is due for a read-triggered compaction). A
    /// file already due takes no more (its counter is not written again).
    pub(crate) fn charge_seek(&self) -> bool {
        if self.allowed_seeks.load(Ordering::Relaxed) <= 0 {
            return true;
        }
        self.allowed_seeks.fetch_sub(1, Ordering::Relaxed) <= 1
    }

    /// The persisted fields, as a version edit records them.
    pub fn to_new_file(&self) -> NewFile {
        NewFile {
            number: self.number,
            file_size: self.file_size,
            smallest: self.smallest.clone(),
            largest: self.largest.clone(),
            smallest_seqno: self.smallest_seqno,
            largest_seqno: self.largest_seqno,
            has_range_deletions: self.has_range_deletions,
        }
    }
}

impl From<&NewFile> for FileMetaData {
    fn from(f: &NewFile) -> FileMetaData {
        let mut m = FileMetaData::new(
            f.number,
            f.file_size,
            f.smallest.clone(),
            f.largest.clone(),
            f.smallest_seqno,
            f.largest_seqno,
        );
        m.has_range_deletions = f.has_range_deletions;
        m
    }
}
