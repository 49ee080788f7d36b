//! Strata: an embedded, persistent, ordered key-value store built as an LSM tree.
//!
//! This crate holds the storage formats (write-ahead log, block-based tables,
//! bloom filters, compression), the file-system abstraction every file goes
//! through, and the engine built on them. Byte layouts are specified in
//! `docs/format/`.
//!
//! The API follows the `rocksdb` crate's names: [`DB`], [`Options`],
//! [`WriteBatch`], [`ReadOptions`], [`WriteOptions`], iterators
//! ([`DBIterator`], [`DBRawIterator`]) and [`Snapshot`]s.
//!
//! ```
//! use strata_kv::{IteratorMode, Options, WriteBatch, DB};
//! # let path = std::env::temp_dir().join(format!("strata-doc-crate-{}", std::process::id()));
//! let mut opts = Options::default();
//! opts.create_if_missing(true);
//! let db = DB::open(&opts, &path)?;
//! db.put(b"hello", b"world")?;
//! let mut batch = WriteBatch::default();
//! batch.put(b"a", b"1");
//! batch.put(b"b", b"2");
//! db.write(batch)?;
//! for item in db.iterator(IteratorMode::Start) {
//!     let (key, value) = item?;
//!     println!("{:?} = {:?}", key, value);
//! }
//! drop(db);
//! DB::destroy(&Options::default(), &path)?;
//! # Ok::<(), strata_kv::Error>(())
//! ```

#![warn(missing_docs)]

pub mod cache;
/// Checkpoints: consistent, openable copies of a live database
/// ([`checkpoint::Checkpoint`], the `rocksdb` crate's module and names).
pub mod checkpoint {
    pub use crate::db::checkpoint::Checkpoint;
}
/// Backups (the `rocksdb` crate's module and names): see
/// [`backup::BackupEngine`].
pub mod backup {
    pub use crate::db::backup::{
        BackupEngine, BackupEngineInfo, BackupEngineOptions, RestoreOptions,
    };
}
pub use db::backup::Env;
pub(crate) mod compression;
pub(crate) mod db;
pub mod dump;
pub mod env;
pub(crate) mod error;
pub mod iter;
pub mod key;
pub mod limits;
pub(crate) mod memtable;
pub(crate) mod range_del;
pub mod sst;
pub(crate) mod util;
pub(crate) mod version;
pub(crate) mod wal;

pub use db::{
    AsColumnFamilyRef, BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor,
    DBCompressionType, DBIterator, DBPinnableSlice, DBRawIterator, DBRecoveryMode, Direction,
    IngestExternalFileOptions, IteratorMode, LiveFile, Options, PackedTableOptions, ReadOptions,
    Snapshot, SstFileWriter, SstPartitioner, SstPartitionerFactory, TableFileCheck, WriteBatch,
    WriteOptions, DB,
};
pub use error::{Error, Result};
/// Merge operators (the `rocksdb` crate's module and names): see
/// [`Options::set_merge_operator_associative`] and
/// [`Options::set_merge_operator`].
pub mod merge_operator {
    pub use crate::db::{MergeFn, MergeOperands, MergeOperandsIter};
}
pub use db::{MergeFn, MergeOperands};
pub use key::{
    BytewiseComparator, Comparator, InDomainFn, ReverseBytewiseComparator, SliceTransform,
    TransformFn,
};
pub use sst::{BlockPropertyCollector, BlockPropertyFilter, DataBlockIndexType};

/// Internals the crate's own benchmarks (`benches/`) measure. Not part of
/// the API: no stability promise, no documentation.
#[doc(hidden)]
pub mod bench_internals {
    pub use crate::key::internal_key::InternalKeyComparator;
    pub use crate::sst::block::hash_index::{BUCKET_COLLISION, BUCKET_EMPTY};
    pub use crate::sst::block::{Block, BlockBuilder};
    pub use crate::version::{Version, VersionBuilder, VersionEdit};

    use crate::key::{SequenceNumber, ValueKind};

    /// A memtable driven from `benches/memtable.rs`: runs of inserts under
    /// one writer (as a write batch is applied) and point lookups.
    #[derive(Debug)]
    pub struct BenchMemTable(crate::memtable::MemTable);

    impl BenchMemTable {
        /// An empty memtable in bytewise order, its arena sized for
        /// `write_buffer_size`.
        pub fn new(write_buffer_size: usize) -> BenchMemTable {
            let cmp = InternalKeyComparator::new(std::sync::Arc::new(crate::BytewiseComparator));
            BenchMemTable(crate::memtable::MemTable::new(cmp, write_buffer_size))
        }

        /// Inserts `(key, value)` pairs as puts, the i-th at sequence
        /// `first_seq + i`, under one writer lock.
        pub fn insert_run<K: AsRef<[u8]>, V: AsRef<[u8]>>(
            &self,
            first_seq: SequenceNumber,
            entries: &[(K, V)],
        ) {
            let mut w = self.0.writer();
            for (i, (k, v)) in entries.iter().enumerate() {
                w.add(
                    first_seq + i as u64,
                    ValueKind::Value,
                    k.as_ref(),
                    v.as_ref(),
                );
            }
        }

        /// The length of the newest value of `key` visible at `seq`, if it
        /// is a put.
        pub fn get_len(&self, key: &[u8], seq: SequenceNumber) -> Option<usize> {
            match self.0.get_with_sequence(key, seq)?.0 {
                crate::memtable::MemTableGet::Value(v) => Some(v.len()),
                _ => None,
            }
        }
    }
}

/// Entry points for the fuzz targets in `fuzz/`. Not part of the API.
#[doc(hidden)]
pub mod fuzzing;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
