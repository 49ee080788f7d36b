//! What a version knows about one table file.

use std::sync::atomic::AtomicBool;
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
        }
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
