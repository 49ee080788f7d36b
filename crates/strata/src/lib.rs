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
}

/// Entry points for the fuzz targets in `fuzz/`. Not part of the API.
#[doc(hidden)]
pub mod fuzzing;

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
