//! Options, named and shaped as in the `rocksdb` crate so that code moves
//! over with few changes: [`Options`], [`BlockBasedOptions`], [`Cache`],
//! [`WriteOptions`], [`ReadOptions`].

use std::cmp::Ordering;
use std::sync::Arc;

use crate::cache::BlockCache;
use crate::compression::CompressionType;
use crate::env::{FileSystem, PosixFileSystem};
use crate::error::{Error, Result};
use crate::key::{BytewiseComparator, Comparator, SequenceNumber, SliceTransform};
use crate::limits::{WRITE_BUFFER_SIZE_BYTES_MAX, WRITE_BUFFER_SIZE_BYTES_MIN};
use crate::sst::{BlockPropertyCollectorFactory, BlockPropertyFilter, TableOptions};
use crate::wal::WalRecoveryMode;

use super::merge_operator::{MergeFn, MergeOperator};
use super::sst_partitioner::SstPartitionerFactory;

/// Compression types, as `rocksdb::DBCompressionType` (the subset Strata
/// implements).
pub type DBCompressionType = CompressionType;
/// Log recovery policies, as `rocksdb::DBRecoveryMode`.
pub type DBRecoveryMode = WalRecoveryMode;

/// A block cache shared by any number of databases, as `rocksdb::Cache`.
#[derive(Clone, Debug)]
pub struct Cache {
    pub(crate) inner: Arc<BlockCache>,
}

impl Cache {
    /// An LRU cache holding up to `capacity` bytes of blocks.
    pub fn new_lru_cache(capacity: usize) -> Cache {
        Cache {
            inner: Arc::new(BlockCache::new(capacity, None)),
        }
    }

    /// Bytes of blocks held.
    pub fn get_usage(&self) -> usize {
        self.inner.usage()
    }

    /// Changes the capacity, evicting as needed.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.inner.set_capacity(capacity);
    }
}

/// Table-format options, as `rocksdb::BlockBasedOptions`.
#[derive(Clone, Debug)]
pub struct BlockBasedOptions {
    pub(crate) block_size: usize,
    pub(crate) block_size_deviation: i32,
    pub(crate) block_restart_interval: usize,
    pub(crate) index_block_restart_interval: usize,
    pub(crate) bloom_bits_per_key: f64,
    pub(crate) cache: Option<Cache>,
    pub(crate) no_block_cache: bool,
    pub(crate) data_block_index_type: crate::sst::DataBlockIndexType,
    pub(crate) data_block_hash_ratio: f64,
    pub(crate) cache_index_and_filter_blocks: bool,
    pub(crate) pin_l0_filter_and_index_blocks_in_cache: bool,
    pub(crate) whole_key_filtering: bool,
    pub(crate) cache_compressed_under_direct_reads: bool,
}

impl Default for BlockBasedOptions {
    fn default() -> Self {
        BlockBasedOptions {
            block_size: 4096,
            block_size_deviation: 10,
            block_restart_interval: 16,
            index_block_restart_interval: 1,
            bloom_bits_per_key: 0.0,
            cache: None,
            no_block_cache: false,
            data_block_index_type: crate::sst::DataBlockIndexType::BinarySearch,
            data_block_hash_ratio: 0.75,
            cache_index_and_filter_blocks: false,
            pin_l0_filter_and_index_blocks_in_cache: false,
            whole_key_filtering: true,
            cache_compressed_under_direct_reads: true,
        }
    }
}

impl BlockBasedOptions {
    /// Target uncompressed size of a data block (default 4096).
    pub fn set_block_size(&mut self, size: usize) {
        self.block_size = size;
    }

    /// Closes a data block before an entry that would take it past the
    /// block size, once the block is more than `100 - deviation` percent
    /// full (RocksDB's `block_size_deviation`, default 10, so most blocks
    /// stay within the block size); 0 closes a block only once it has
    /// reached the block size. Outside 0..=100, opening the database fails
    /// with an invalid-argument error.
    pub fn set_block_size_deviation(&mut self, deviation: i32) {
        self.block_size_deviation = deviation;
    }

    /// With `Options::set_use_direct_reads`, keeps data blocks in the block
    /// cache as the table stores them, compressed, and decompresses a
    /// block on every hit (default true; ours). Direct reads bypass the
    /// page cache, so the block cache is the only memory that spares a
    /// device read: holding blocks compressed, it holds about as many more
    /// of them as the compression saves. Turn it off when the hot data
    /// fits in the cache decompressed. No effect on tables stored without
    /// compression or read without direct I/O.
    pub fn set_cache_compressed_under_direct_reads(&mut self, v: bool) {
        self.cache_compressed_under_direct_reads = v;
    }

    /// Entries between restart points in data blocks (default 16).
    pub fn set_block_restart_interval(&mut self, interval: i32) {
        self.block_restart_interval = interval.max(0) as usize;
    }

    /// Entries between restart points in index blocks (default 1).
    pub fn set_index_block_restart_interval(&mut self, interval: i32) {
        self.index_block_restart_interval = interval.max(0) as usize;
    }

    /// A bloom filter per table with `bits_per_key`. Strata always builds
    /// whole-table, cache-local filters, so `block_based` is ignored.
    pub fn set_bloom_filter(&mut self, bits_per_key: f64, _block_based: bool) {
        self.bloom_bits_per_key = bits_per_key;
    }

    /// Uses `cache` for data blocks (default: a private 32 MiB cache).
    pub fn set_block_cache(&mut self, cache: &Cache) {
        self.cache = Some(cache.clone());
        self.no_block_cache = false;
    }

    /// Reads every data block from its file.
    pub fn disable_cache(&mut self) {
        self.no_block_cache = true;
        self.cache = None;
    }

    /// How point lookups search data blocks (default binary search).
    /// `BinaryAndHash` adds a hash index to each data block written from
    /// now on; tables of both kinds read side by side. Ignored (binary
    /// search) for comparators that may equate byte-different keys.
    pub fn set_data_block_index_type(&mut self, index_type: crate::sst::DataBlockIndexType) {
        self.data_block_index_type = index_type;
    }

    /// Keeps each table's index and filter in the block cache, charged by
    /// the memory they take and evicted like data blocks (read from the file
    /// again when needed), instead of in the open table for its lifetime
    /// (default false, as RocksDB). Bounds their memory by the cache
    /// capacity; costs a cache lookup per table a read visits. Without a
    /// block cache it has no effect.
    pub fn set_cache_index_and_filter_blocks(&mut self, v: bool) {
        self.cache_index_and_filter_blocks = v;
    }

    /// With `cache_index_and_filter_blocks`, tables opened while in level 0
    /// also keep their index and filter themselves, so lookups in the
    /// newest tables never wait for them to be read again (default false).
    /// Unlike RocksDB, the cache may still evict its copy: the memory then
    /// stays with the table, uncharged, bounded by the number of L0 files.
    pub fn set_pin_l0_filter_and_index_blocks_in_cache(&mut self, v: bool) {
        self.pin_l0_filter_and_index_blocks_in_cache = v;
    }

    /// Whether bloom filters hold whole keys, for point lookups (default
    /// true), as `rocksdb::BlockBasedOptions::set_whole_key_filtering`.
    /// With a prefix extractor the filters also hold every key's prefix,
    /// for prefix seeks; `false` keeps the prefixes only (smaller filters;
    /// a point lookup then probes its key's prefix).
    pub fn set_whole_key_filtering(&mut self, v: bool) {
        self.whole_key_filtering = v;
    }
    /// Distinct user keys per hash bucket for `BinaryAndHash` (default
    /// 0.75; must be above 0, checked on open).
    pub fn set_data_block_hash_ratio(&mut self, ratio: f64) {
        self.data_block_hash_ratio = ratio;
    }
}

/// Options of packed tables ([`Options::set_packed_table_factory`]): a
/// table format for data that fits in memory. A packed table is mapped
/// (or read whole) when opened; a point lookup is arithmetic for dense
/// integer keys and a search over fixed-width integers for others, then
/// one slice of the mapping: no block cache, no block decoding, no
/// decompression. The format is in `docs/format/packed_table.md`.
///
/// ```
/// use strata_kv::{Options, PackedTableOptions, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// let mut packed = PackedTableOptions::default();
/// packed.set_from_level(1); // L0 stays block-based
/// let mut opts = Options::default();
/// opts.create_if_missing(true);
/// opts.set_packed_table_factory(&packed);
/// let db = DB::open(&opts, &dir)?;
/// db.put(1u64.to_be_bytes(), b"one")?;
/// assert_eq!(db.get(1u64.to_be_bytes())?.as_deref(), Some(&b"one"[..]));
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct PackedTableOptions {
    pub(crate) from_level: usize,
    pub(crate) lazy_checksums: bool,
}

impl PackedTableOptions {
    /// Tables written to `level` and below are packed; those above stay
    /// block-based (default 0: every table). Tables of both formats are
    /// read wherever they are: changing this never rewrites a table.
    pub fn set_from_level(&mut self, level: i32) {
        self.from_level = level.max(0) as usize;
    }

    /// Check each section's checksum the first time a read needs it
    /// instead of when the table is opened (default false: at open, which
    /// reads the whole file once).
    pub fn set_lazy_checksums(&mut self, lazy: bool) {
        self.lazy_checksums = lazy;
    }
}

/// Database options, as `rocksdb::Options`.
///
/// Every setter has the `rocksdb` crate's name; table options go through
/// [`BlockBasedOptions`]. Invalid combinations are refused when the
/// database opens, with [`Error::InvalidArgument`].
///
/// ```
/// use strata_kv::{BlockBasedOptions, Cache, DBCompressionType, Options, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// let mut opts = Options::default();
/// opts.create_if_missing(true);
/// opts.set_write_buffer_size(64 << 20);
/// opts.set_compression_type(DBCompressionType::Lz4);
/// let mut table = BlockBasedOptions::default();
/// table.set_bloom_filter(10.0, false);
/// table.set_block_cache(&Cache::new_lru_cache(256 << 20));
/// opts.set_block_based_table_factory(&table);
/// let db = DB::open(&opts, &dir)?;
/// // A bad value is an error at open, not a panic.
/// let mut bad = opts.clone();
/// bad.set_level_zero_file_num_compaction_trigger(0);
/// assert!(DB::open(&bad, std::env::temp_dir().join("never-made")).is_err());
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
#[derive(Clone)]
pub struct Options {
    pub(crate) create_if_missing: bool,
    pub(crate) create_missing_column_families: bool,
    pub(crate) max_bgerror_resume_count: i32,
    pub(crate) max_total_wal_size: u64,
    pub(crate) bgerror_resume_retry_interval_us: u64,
    pub(crate) error_if_exists: bool,
    pub(crate) write_buffer_size: usize,
    pub(crate) max_write_buffer_number: usize,
    pub(crate) target_file_size_base: u64,
    pub(crate) target_file_size_multiplier: u64,
    pub(crate) max_bytes_for_level_base: u64,
    pub(crate) max_bytes_for_level_multiplier: f64,
    pub(crate) level0_file_num_compaction_trigger: usize,
    pub(crate) level0_slowdown_writes_trigger: usize,
    pub(crate) level0_stop_writes_trigger: usize,
    pub(crate) max_background_jobs: usize,
    pub(crate) max_subcompactions: u32,
    pub(crate) compaction_readahead_size: u64,
    pub(crate) use_direct_reads: bool,
    pub(crate) use_direct_io_for_flush_and_compaction: bool,
    pub(crate) max_open_files: i32,
    pub(crate) skip_checking_sst_file_sizes_on_db_open: bool,
    pub(crate) paranoid_checks: bool,
    pub(crate) allow_concurrent_memtable_write: bool,
    pub(crate) enable_pipelined_write: bool,
    pub(crate) compression: CompressionType,
    pub(crate) disable_auto_compactions: bool,
    pub(crate) read_triggered_compactions: bool,
    pub(crate) level_compaction_dynamic_level_bytes: bool,
    pub(crate) max_compaction_bytes: u64,
    pub(crate) wal_recovery_mode: WalRecoveryMode,
    pub(crate) comparator: Arc<dyn Comparator>,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) table: BlockBasedOptions,
    pub(crate) prefix_extractor: Option<Arc<SliceTransform>>,
    pub(crate) block_property_collectors: Vec<BlockPropertyCollectorFactory>,
    pub(crate) sst_partitioner: Option<SstPartitionerFactory>,
    pub(crate) merge_operator: Option<Arc<MergeOperator>>,
    pub(crate) stream_aware_cutting: bool,
    pub(crate) packed: Option<PackedTableOptions>,
    pub(crate) rate_limiter: Option<Arc<crate::env::rate_limiter::RateLimiter>>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("create_if_missing", &self.create_if_missing)
            .field(
                "create_missing_column_families",
                &self.create_missing_column_families,
            )
            .field("max_bgerror_resume_count", &self.max_bgerror_resume_count)
            .field("max_total_wal_size", &self.max_total_wal_size)
            .field(
                "bgerror_resume_retry_interval_us",
                &self.bgerror_resume_retry_interval_us,
            )
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_write_buffer_number", &self.max_write_buffer_number)
            .field("target_file_size_base", &self.target_file_size_base)
            .field("max_bytes_for_level_base", &self.max_bytes_for_level_base)
            .field("compression", &self.compression)
            .field("comparator", &self.comparator.name())
            .field("table", &self.table)
            .field(
                "merge_operator",
                &self.merge_operator.as_ref().map(|m| m.name()),
            )
            .finish_non_exhaustive()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: false,
            create_missing_column_families: false,
            max_bgerror_resume_count: i32::MAX,
            max_total_wal_size: 0,
            bgerror_resume_retry_interval_us: 1_000_000,
            error_if_exists: false,
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
            target_file_size_base: 64 << 20,
            target_file_size_multiplier: 1,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10.0,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_background_jobs: 2,
            max_subcompactions: 1,
            compaction_readahead_size: 0,
            use_direct_reads: false,
            use_direct_io_for_flush_and_compaction: false,
            max_open_files: -1,
            skip_checking_sst_file_sizes_on_db_open: false,
            paranoid_checks: true,
            allow_concurrent_memtable_write: true,
            enable_pipelined_write: false,
            compression: CompressionType::Snappy,
            disable_auto_compactions: false,
            read_triggered_compactions: true,
            level_compaction_dynamic_level_bytes: false,
            max_compaction_bytes: 0,
            wal_recovery_mode: WalRecoveryMode::TolerateCorruptedTailRecords,
            comparator: Arc::new(BytewiseComparator),
            fs: Arc::new(PosixFileSystem::new()),
            table: BlockBasedOptions::default(),
            prefix_extractor: None,
            block_property_collectors: Vec::new(),
            sst_partitioner: None,
            merge_operator: None,
            stream_aware_cutting: true,
            packed: None,
            rate_limiter: None,
        }
    }
}

/// A comparison function, as the `rocksdb` crate's `CompareFn`.
pub type CompareFn = dyn Fn(&[u8], &[u8]) -> Ordering + Send + Sync;

struct FnComparator {
    name: String,
    f: Box<CompareFn>,
}

impl std::fmt::Debug for FnComparator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FnComparator({})", self.name)
    }
}

impl Comparator for FnComparator {
    fn name(&self) -> &str {
        &self.name
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        (self.f)(a, b)
    }
}

impl Options {
    /// Sets the merge operator, whose one function serves as both the full
    /// and the partial merge (for associative operations: counters,
    /// appends, set unions). `name` is stored with the tables that hold
    /// operands; a table written under another name is refused at read.
    ///
    /// ```
    /// use strata_kv::{MergeOperands, Options, DB};
    /// fn add(_key: &[u8], existing: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    ///     let mut sum = existing.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
    ///     for op in operands {
    ///         sum += u64::from_le_bytes(op.try_into().ok()?);
    ///     }
    ///     Some(sum.to_le_bytes().to_vec())
    /// }
    /// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
    /// let mut opts = Options::default();
    /// opts.create_if_missing(true);
    /// opts.set_merge_operator_associative("add", add);
    /// let db = DB::open(&opts, &dir)?;
    /// db.merge(b"hits", 2u64.to_le_bytes())?;
    /// db.merge(b"hits", 3u64.to_le_bytes())?;
    /// assert_eq!(db.get(b"hits")?, Some(5u64.to_le_bytes().to_vec()));
    /// # drop(db);
    /// # DB::destroy(&Options::default(), &dir)?;
    /// # Ok::<(), strata_kv::Error>(())
    /// ```
    pub fn set_merge_operator_associative<F: MergeFn + Clone>(
        &mut self,
        name: impl AsRef<str>,
        full_merge_fn: F,
    ) {
        let partial = Box::new(full_merge_fn.clone());
        self.merge_operator = Some(MergeOperator::new(
            name.as_ref(),
            Box::new(full_merge_fn),
            Some(partial),
        ));
    }

    /// Sets the merge operator: `full_merge_fn` applies operands (oldest
    /// first) to the value below them, `partial_merge_fn` combines
    /// operands into one (its `existing` argument is always `None`; return
    /// `None` to keep them apart). See
    /// [`set_merge_operator_associative`](Self::set_merge_operator_associative).
    pub fn set_merge_operator<F: MergeFn, PF: MergeFn>(
        &mut self,
        name: impl AsRef<str>,
        full_merge_fn: F,
        partial_merge_fn: PF,
    ) {
        self.merge_operator = Some(MergeOperator::new(
            name.as_ref(),
            Box::new(full_merge_fn),
            Some(Box::new(partial_merge_fn)),
        ));
    }

    /// Cuts the outputs of flushes and compactions where the partitioner
    /// says (see [`SstPartitioner`](crate::SstPartitioner)), and refuses
    /// trivial moves of files it would cut.
    pub fn set_sst_partitioner_factory(&mut self, factory: SstPartitionerFactory) {
        self.sst_partitioner = Some(factory);
    }

    /// Stream-aware cutting (default on): a flush or compaction ends its
    /// current output file where the next key would make the file overlap
    /// data already in the levels below (or, in a compaction, where a long
    /// run of newer data ends among older data), as long as the file has
    /// reached a minimum size (1/128 of the target file size). Files then
    /// lie in the gaps between existing files and go down the tree by
    /// trivial moves, so several ascending insert streams are not
    /// rewritten at every level. Off: files are cut by size only.
    pub fn set_stream_aware_cutting(&mut self, on: bool) {
        self.stream_aware_cutting = on;
    }

    /// Creates the database if it does not exist.
    pub fn create_if_missing(&mut self, v: bool) {
        self.create_if_missing = v;
    }

    /// How many times the database clears a background error of a full
    /// disk by itself (RocksDB's automatic recovery): a flush, compaction
    /// or manifest write that failed with ENOSPC stops writes, and every
    /// [`set_bgerror_resume_retry_interval`](Self::set_bgerror_resume_retry_interval)
    /// the work is tried again, until it succeeds (writes then go on) or
    /// this many attempts fail. 0 leaves it to [`DB::resume`](crate::DB::resume).
    /// A failure of the write-ahead log is never cleared this way (only a
    /// reopen). Default: `i32::MAX`, as RocksDB.
    pub fn set_max_bgerror_resume_count(&mut self, count: i32) {
        self.max_bgerror_resume_count = count;
    }

    /// The size of the live write-ahead logs past which the next memtable
    /// switch also switches the column families whose writes hold the
    /// oldest log, so that their flush lets it go (a family written rarely
    /// would otherwise keep every later log alive). 0 (the default, as
    /// RocksDB): four times the sum of every family's `write_buffer_size`
    /// times `max_write_buffer_number`. Only databases with several column
    /// families are concerned.
    pub fn set_max_total_wal_size(&mut self, bytes: u64) {
        self.max_total_wal_size = bytes;
    }

    /// Microseconds between two attempts of
    /// [`set_max_bgerror_resume_count`](Self::set_max_bgerror_resume_count).
    /// Default: 1,000,000 (one second), as RocksDB.
    pub fn set_bgerror_resume_retry_interval(&mut self, micros: u64) {
        self.bgerror_resume_retry_interval_us = micros;
    }

    /// Creates the column families named at open that the database does
    /// not have yet (`DB::open_cf`), instead of failing.
    pub fn create_missing_column_families(&mut self, v: bool) {
        self.create_missing_column_families = v;
    }
    /// Fails the open if the database already exists.
    pub fn set_error_if_exists(&mut self, v: bool) {
        self.error_if_exists = v;
    }
    /// Bytes of a memtable before it is switched and flushed. Opening a
    /// database clips it to [`WRITE_BUFFER_SIZE_BYTES_MIN`] ..=
    /// [`WRITE_BUFFER_SIZE_BYTES_MAX`], as RocksDB's option sanitizing does
    /// (64 KiB to 64 GiB): an empty memtable already uses a few KiB, so a
    /// smaller buffer would be full before its first write.
    pub fn set_write_buffer_size(&mut self, size: usize) {
        self.write_buffer_size = size;
    }
    /// Memtables (active + immutable) before writes stop.
    pub fn set_max_write_buffer_number(&mut self, n: i32) {
        self.max_write_buffer_number = n.max(0) as usize;
    }
    /// Target size of table files in L1.
    pub fn set_target_file_size_base(&mut self, size: u64) {
        self.target_file_size_base = size;
    }
    /// Growth of the target file size per level.
    pub fn set_target_file_size_multiplier(&mut self, m: i32) {
        self.target_file_size_multiplier = m.max(0) as u64;
    }
    /// Target bytes of L1.
    pub fn set_max_bytes_for_level_base(&mut self, size: u64) {
        self.max_bytes_for_level_base = size;
    }
    /// Growth of the target bytes per level.
    pub fn set_max_bytes_for_level_multiplier(&mut self, m: f64) {
        self.max_bytes_for_level_multiplier = m;
    }
    /// L0 files that trigger a compaction.
    pub fn set_level_zero_file_num_compaction_trigger(&mut self, n: i32) {
        self.level0_file_num_compaction_trigger = n.max(0) as usize;
    }
    /// L0 files at which writes are slowed.
    pub fn set_level_zero_slowdown_writes_trigger(&mut self, n: i32) {
        self.level0_slowdown_writes_trigger = n.max(0) as usize;
    }
    /// L0 files at which writes stop until compaction catches up.
    pub fn set_level_zero_stop_writes_trigger(&mut self, n: i32) {
        self.level0_stop_writes_trigger = n.max(0) as usize;
    }
    /// Background threads for flushes and compactions.
    pub fn set_max_background_jobs(&mut self, n: i32) {
        self.max_background_jobs = n.max(0) as usize;
    }

    /// Threads one compaction may split into (default 1, RocksDB's name
    /// and default). A compaction from level 0 into a deeper level, or one
    /// that `compact_range` runs, is cut into up to `n` key ranges of at
    /// least an output file's target size each, merged in parallel (the
    /// compaction's own thread and `n - 1` more) and installed as one edit.
    /// 0 is taken as 1; more than [`SUBCOMPACTIONS_MAX`](crate::limits::SUBCOMPACTIONS_MAX)
    /// fails the open with `InvalidArgument`.
    pub fn set_max_subcompactions(&mut self, n: u32) {
        self.max_subcompactions = n.max(1);
    }

    /// Bytes a compaction reads ahead in each input table (RocksDB's
    /// name), from its first data block on: fewer, larger reads, which
    /// matters most with [`set_use_direct_reads`](Self::set_use_direct_reads)
    /// or on disks. 0 (the default) keeps the adaptive readahead every
    /// scan has: 256 KiB at a time once two blocks were read back to back.
    /// Each input holds one such buffer while the compaction runs.
    pub fn set_compaction_readahead_size(&mut self, bytes: usize) {
        self.compaction_readahead_size = bytes as u64;
    }

    /// Reads tables with direct I/O (`O_DIRECT`, default false, RocksDB's
    /// name): user reads and compaction inputs bypass the page cache, so
    /// the block cache is the only cache and memory stays what it is
    /// configured to be. Blocks are read in aligned 4 KiB units. Packed
    /// tables, which are memory-mapped, still read through the page
    /// cache. A file system without `O_DIRECT` fails the open with
    /// `NotSupported`; file systems other than the real one read as usual.
    pub fn set_use_direct_reads(&mut self, v: bool) {
        self.use_direct_reads = v;
    }

    /// Writes the tables of flushes and compactions with direct I/O
    /// (`O_DIRECT`, default false, RocksDB's name), so background writes do
    /// not fill the page cache. The log and the manifest are written as
    /// usual. As [`set_use_direct_reads`](Self::set_use_direct_reads), a
    /// file system without `O_DIRECT` fails the open with `NotSupported`.
    pub fn set_use_direct_io_for_flush_and_compaction(&mut self, v: bool) {
        self.use_direct_io_for_flush_and_compaction = v;
    }
    /// Skips comparing each table file's size with the size the manifest
    /// records when the database opens (default false: a truncated table is
    /// a `Corruption` at open naming the file and both sizes, as RocksDB).
    pub fn set_skip_checking_sst_file_sizes_on_db_open(&mut self, v: bool) {
        self.skip_checking_sst_file_sizes_on_db_open = v;
    }

    /// Checks at open what the database's files promise (default true, as
    /// RocksDB): every table the manifest names must exist (with its
    /// recorded size unless
    /// [`set_skip_checking_sst_file_sizes_on_db_open`](Self::set_skip_checking_sst_file_sizes_on_db_open)),
    /// and a log record whose checksum holds but whose batch is malformed
    /// or out of sequence stops the open with `Corruption`. With `false`
    /// the open skips the table check (a missing or damaged table is then
    /// an error for the reads and compactions that reach it, never a wrong
    /// answer) and skips such log records, as RocksDB does. Block checksums
    /// are verified either way; a failed write stops writes either way.
    pub fn set_paranoid_checks(&mut self, v: bool) {
        self.paranoid_checks = v;
    }

    /// Lets the writers of one write group insert their own batches into
    /// the memtable at the same time, once the group's log record is
    /// written (default true, as RocksDB): the group's leader writes the
    /// log, then every writer links its entries into the skiplist with
    /// compare-and-swap, and the group's writes become visible together
    /// when the last one is done. With `false` the leader inserts the whole
    /// group. Groups of one writer are the same either way.
    pub fn set_allow_concurrent_memtable_write(&mut self, v: bool) {
        self.allow_concurrent_memtable_write = v;
    }

    /// Pipelines the write path (default false, as RocksDB): once a write
    /// group's log record is written, the next group's leader may write
    /// its own record while the first group is still inserting into the
    /// memtable. Groups still become visible in sequence order, each
    /// whole. A group hands the log on early if writers came while its
    /// record was written, or if another writer is on its way (with up to
    /// twice as many writers in flight as cores); a lone writer's path is
    /// unchanged. While
    /// two groups insert at once both link their entries with
    /// compare-and-swap, whatever `set_allow_concurrent_memtable_write`
    /// says (RocksDB serializes them instead).
    pub fn set_enable_pipelined_write(&mut self, v: bool) {
        self.enable_pipelined_write = v;
    }

    /// Table files kept open (-1: no limit).
    pub fn set_max_open_files(&mut self, n: i32) {
        self.max_open_files = n;
    }
    /// Compression of table data blocks.
    pub fn set_compression_type(&mut self, t: DBCompressionType) {
        self.compression = t;
    }
    /// Turns automatic compactions off.
    pub fn set_disable_auto_compactions(&mut self, v: bool) {
        self.disable_auto_compactions = v;
    }
    /// Compacts a file that point lookups keep searching in vain (they read
    /// a block of it, miss, and find the key in an older file), once they
    /// have wasted about one lookup per 16 KiB of it: LevelDB's seek
    /// compaction, Pebble's read-triggered compaction. Batched lookups
    /// (`multi_get`) count as point lookups do. Iterators count through
    /// read samples, as in LevelDB and Pebble: about once per MiB of keys
    /// and values returned, a returned key that two or more files may hold
    /// counts one wasted lookup against the newest. The lowest-priority
    /// compaction, never while memtables wait for a flush, and only once
    /// no write has come for a second (under a steady writer the
    /// score-driven compactions reshape level 0 anyway, and compacting
    /// every flush as readers make it due would multiply the writes). On
    /// by default (as in Pebble); RocksDB has none.
    pub fn set_read_triggered_compactions(&mut self, v: bool) {
        self.read_triggered_compactions = v;
    }
    /// Level targets computed from the last level upward.
    pub fn set_level_compaction_dynamic_level_bytes(&mut self, v: bool) {
        self.level_compaction_dynamic_level_bytes = v;
    }
    /// Bound on the bytes of one compaction (0: 25 × target file size).
    pub fn set_max_compaction_bytes(&mut self, n: u64) {
        self.max_compaction_bytes = n;
    }
    /// How much of a damaged log recovery accepts.
    pub fn set_wal_recovery_mode(&mut self, mode: DBRecoveryMode) {
        self.wal_recovery_mode = mode;
    }
    /// Orders keys with `compare_fn`, recorded under `name`.
    pub fn set_comparator(&mut self, name: impl Into<String>, compare_fn: Box<CompareFn>) {
        self.comparator = Arc::new(FnComparator {
            name: name.into(),
            f: compare_fn,
        });
    }
    /// Orders keys with a [`Comparator`] (bytewise by default; see also
    /// [`crate::key::ReverseBytewiseComparator`]).
    pub fn set_comparator_object(&mut self, cmp: Arc<dyn Comparator>) {
        self.comparator = cmp;
    }
    /// The prefix extractor, as `rocksdb::Options::set_prefix_extractor`:
    /// it defines the prefixes that [`DBRawIterator::next_prefix`] and
    /// [`DBRawIterator::prev_prefix`] step over.
    ///
    /// [`DBRawIterator::next_prefix`]: crate::DBRawIterator::next_prefix
    /// [`DBRawIterator::prev_prefix`]: crate::DBRawIterator::prev_prefix
    pub fn set_prefix_extractor(&mut self, prefix_extractor: SliceTransform) {
        self.prefix_extractor = Some(Arc::new(prefix_extractor));
    }
    /// Adds a collector of per-block properties: `make` builds one for
    /// every table written (by flushes and compactions). Its properties are
    /// stored in the table's index entries and read by the
    /// [`BlockPropertyFilter`]s of the same
    /// name set on `ReadOptions`. Pebble's block property collectors; at
    /// most 64 per database.
    pub fn add_block_property_collector<F>(&mut self, make: F)
    where
        F: Fn() -> Box<dyn crate::BlockPropertyCollector> + Send + Sync + 'static,
    {
        self.block_property_collectors.push(Arc::new(make));
    }
    /// Table format options.
    pub fn set_block_based_table_factory(&mut self, factory: &BlockBasedOptions) {
        self.table = factory.clone();
    }
    /// Writes packed tables ([`PackedTableOptions`]) to the levels it names,
    /// block-based tables ([`Options::set_block_based_table_factory`]) to
    /// the others, as `rocksdb::Options::set_plain_table_factory` chooses
    /// plain tables.
    pub fn set_packed_table_factory(&mut self, options: &PackedTableOptions) {
        self.packed = Some(options.clone());
    }
    /// Whether tables written to `level` are packed.
    pub(crate) fn packed_at(&self, level: usize) -> bool {
        self.packed.as_ref().is_some_and(|p| level >= p.from_level)
    }
    /// Whether levels `a` and `b` are written in one table format, so a
    /// file may move between them without being rewritten.
    pub(crate) fn same_table_format(&self, a: usize, b: usize) -> bool {
        self.packed_at(a) == self.packed_at(b)
    }
    /// Limits the bytes flushes and compactions write to
    /// `rate_bytes_per_sec` (the `rocksdb` crate's `set_ratelimiter`):
    /// their table writes take tokens from a bucket refilled every
    /// `refill_period_us` microseconds (RocksDB's default is 100,000)
    /// with that period's share of the rate; the log and the manifest are
    /// not limited. All limited writes are of one priority here, so
    /// `fairness` (RocksDB's share for low-priority requests) changes
    /// nothing. A rate of 0 or less removes the limit. Databases opened
    /// with clones of these options share one limiter, as in RocksDB.
    pub fn set_ratelimiter(
        &mut self,
        rate_bytes_per_sec: i64,
        refill_period_us: i64,
        fairness: i32,
    ) {
        let _ = fairness;
        self.rate_limiter = (rate_bytes_per_sec > 0).then(|| {
            let period = match refill_period_us {
                p if p > 0 => std::time::Duration::from_micros(p as u64),
                _ => std::time::Duration::from_millis(100),
            };
            Arc::new(crate::env::rate_limiter::RateLimiter::new(
                rate_bytes_per_sec as u64,
                period,
            ))
        });
    }

    /// The file system all files go through (default: the OS's).
    pub fn set_file_system(&mut self, fs: Arc<dyn FileSystem>) {
        self.fs = fs;
    }

    /// The options a database runs with: values RocksDB clips when it
    /// sanitizes options are clipped the same way. What cannot be clipped
    /// sensibly is left to [`validate`](Self::validate).
    pub(crate) fn sanitized(&self) -> Options {
        let mut opts = self.clone();
        opts.write_buffer_size = opts
            .write_buffer_size
            .clamp(WRITE_BUFFER_SIZE_BYTES_MIN, WRITE_BUFFER_SIZE_BYTES_MAX);
        opts
    }

    /// The options column family `self` runs with in a database opened
    /// with `db`: the family's own where an option is per family, the
    /// database's where it is database-wide (file system, log recovery,
    /// background jobs, open files, rate limiter, checks at open).
    pub(crate) fn for_column_family(&self, db: &Options) -> Options {
        let mut o = self.sanitized();
        o.create_if_missing = db.create_if_missing;
        o.create_missing_column_families = db.create_missing_column_families;
        o.error_if_exists = db.error_if_exists;
        o.max_background_jobs = db.max_background_jobs;
        o.max_subcompactions = db.max_subcompactions;
        o.compaction_readahead_size = db.compaction_readahead_size;
        o.use_direct_reads = db.use_direct_reads;
        o.use_direct_io_for_flush_and_compaction = db.use_direct_io_for_flush_and_compaction;
        o.max_open_files = db.max_open_files;
        o.skip_checking_sst_file_sizes_on_db_open = db.skip_checking_sst_file_sizes_on_db_open;
        o.paranoid_checks = db.paranoid_checks;
        o.allow_concurrent_memtable_write = db.allow_concurrent_memtable_write;
        o.enable_pipelined_write = db.enable_pipelined_write;
        o.wal_recovery_mode = db.wal_recovery_mode;
        o.fs = db.fs.clone();
        o.rate_limiter = db.rate_limiter.clone();
        o
    }

    /// Rejects options no database can run with.
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::invalid_argument(what));
        debug_assert!(self.write_buffer_size >= WRITE_BUFFER_SIZE_BYTES_MIN);
        if self.max_write_buffer_number < 2 {
            return bad(format!(
                "max_write_buffer_number {} must be at least 2",
                self.max_write_buffer_number
            ));
        }
        if self.target_file_size_base == 0 || self.max_bytes_for_level_base == 0 {
            return bad(
                "target_file_size_base and max_bytes_for_level_base must be positive".into(),
            );
        }
        if self.target_file_size_multiplier == 0 {
            return bad("target_file_size_multiplier must be positive".into());
        }
        if !(self.max_bytes_for_level_multiplier.is_finite()
            && self.max_bytes_for_level_multiplier >= 1.0)
        {
            return bad(format!(
                "max_bytes_for_level_multiplier {} must be >= 1",
                self.max_bytes_for_level_multiplier
            ));
        }
        if self.level0_file_num_compaction_trigger == 0 {
            return bad("level0_file_num_compaction_trigger must be positive".into());
        }
        if self.max_background_jobs == 0 {
            return bad("max_background_jobs must be positive".into());
        }
        if self.max_subcompactions > crate::limits::SUBCOMPACTIONS_MAX {
            return bad(format!(
                "max_subcompactions {} is over SUBCOMPACTIONS_MAX ({})",
                self.max_subcompactions,
                crate::limits::SUBCOMPACTIONS_MAX
            ));
        }
        if let Some(p) = &self.packed {
            if p.from_level >= crate::version::NUM_LEVELS {
                return bad(format!(
                    "packed table from_level {} must be below {}",
                    p.from_level,
                    crate::version::NUM_LEVELS
                ));
            }
        }
        if self.max_open_files >= 0 && self.max_open_files < 10 {
            return bad(format!(
                "max_open_files {} must be -1 or at least 10",
                self.max_open_files
            ));
        }
        self.table_options().validate()
    }

    pub(crate) fn table_options(&self) -> TableOptions {
        TableOptions {
            comparator: self.comparator.clone(),
            block_size: self.table.block_size,
            block_size_deviation: self.table.block_size_deviation,
            block_restart_interval: self.table.block_restart_interval,
            index_block_restart_interval: self.table.index_block_restart_interval,
            compression: self.compression,
            bloom_bits_per_key: self.table.bloom_bits_per_key,
            data_block_index_type: self.table.data_block_index_type,
            data_block_hash_table_util_ratio: self.table.data_block_hash_ratio,
            prefix_extractor: self.prefix_extractor.clone(),
            whole_key_filtering: self.table.whole_key_filtering,
            block_property_collectors: self.block_property_collectors.clone(),
        }
    }

    /// Target file size for outputs in `level` (1-based growth from L1).
    pub(crate) fn target_file_size(&self, level: usize) -> u64 {
        let mut size = self.target_file_size_base;
        for _ in 1..level {
            size = size.saturating_mul(self.target_file_size_multiplier);
        }
        size
    }

    /// Target bytes of `level` (>= 1) without dynamic level sizing.
    pub(crate) fn max_bytes_for_level(&self, level: usize) -> u64 {
        let mut bytes = self.max_bytes_for_level_base as f64;
        for _ in 1..level {
            bytes *= self.max_bytes_for_level_multiplier;
        }
        bytes.min(u64::MAX as f64) as u64
    }
}

/// Per-write options, as `rocksdb::WriteOptions`.
///
/// ```
/// use strata_kv::{Options, WriteOptions, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// # let mut opts = Options::default();
/// # opts.create_if_missing(true);
/// let db = DB::open(&opts, &dir)?;
/// // Durable when `put_opt` returns, even after a power loss.
/// let mut synced = WriteOptions::default();
/// synced.set_sync(true);
/// db.put_opt(b"order:7", b"paid", &synced)?;
/// // Bulk loading: no log; lost on a crash before the next flush.
/// let mut fast = WriteOptions::default();
/// fast.disable_wal(true);
/// db.put_opt(b"cache:1", b"x", &fast)?;
/// db.flush()?;
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    pub(crate) sync: bool,
    pub(crate) disable_wal: bool,
}

impl WriteOptions {
    /// Default options: no sync, with the log.
    pub fn new() -> WriteOptions {
        WriteOptions::default()
    }
    /// Syncs the log before the write returns, making it durable.
    pub fn set_sync(&mut self, sync: bool) {
        self.sync = sync;
    }
    /// Skips the log: the write is lost on a crash before the next flush.
    pub fn disable_wal(&mut self, disable: bool) {
        self.disable_wal = disable;
    }
}

/// Per-read options, as `rocksdb::ReadOptions`.
///
/// ```
/// use strata_kv::{IteratorMode, Options, ReadOptions, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// # let mut opts = Options::default();
/// # opts.create_if_missing(true);
/// let db = DB::open(&opts, &dir)?;
/// for k in ["a", "b", "c", "d"] {
///     db.put(k, k)?;
/// }
/// // Iterate over [b, d) only.
/// let mut ro = ReadOptions::default();
/// ro.set_iterate_lower_bound(b"b".to_vec());
/// ro.set_iterate_upper_bound(b"d".to_vec());
/// let keys: Vec<Box<[u8]>> = db
///     .iterator_opt(IteratorMode::Start, ro)
///     .map(|r| r.map(|(k, _)| k))
///     .collect::<Result<_, _>>()?;
/// assert_eq!(keys, vec![b"b".to_vec().into_boxed_slice(), b"c".to_vec().into_boxed_slice()]);
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ReadOptions {
    pub(crate) snapshot: Option<SequenceNumber>,
    pub(crate) lower_bound: Option<Vec<u8>>,
    pub(crate) upper_bound: Option<Vec<u8>>,
    pub(crate) fill_cache: bool,
    pub(crate) verify_checksums: bool,
    pub(crate) prefix_same_as_start: bool,
    pub(crate) total_order_seek: bool,
    pub(crate) block_property_filters: BlockPropertyFilters,
}

/// The block property filters of a read.
#[derive(Clone, Default)]
pub(crate) struct BlockPropertyFilters(pub(crate) Vec<Arc<dyn BlockPropertyFilter>>);

impl std::fmt::Debug for BlockPropertyFilters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|x| x.name()))
            .finish()
    }
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            lower_bound: None,
            upper_bound: None,
            fill_cache: true,
            verify_checksums: true,
            prefix_same_as_start: false,
            total_order_seek: false,
            block_property_filters: BlockPropertyFilters::default(),
        }
    }
}

impl ReadOptions {
    /// Reads as of `snapshot`. The snapshot must outlive the reads.
    pub fn set_snapshot(&mut self, snapshot: &super::Snapshot<'_>) {
        self.snapshot = Some(snapshot.sequence());
    }
    /// Iterators see no key below `key` (inclusive bound).
    pub fn set_iterate_lower_bound<K: Into<Vec<u8>>>(&mut self, key: K) {
        self.lower_bound = Some(key.into());
    }
    /// Iterators see no key at or above `key` (exclusive bound).
    pub fn set_iterate_upper_bound<K: Into<Vec<u8>>>(&mut self, key: K) {
        self.upper_bound = Some(key.into());
    }
    /// After a seek to a key in the prefix extractor's domain, the
    /// iterator yields only keys of that key's prefix (it becomes invalid
    /// at the first key of another prefix), and skips tables whose filter
    /// holds no such prefix. As RocksDB's `prefix_same_as_start`; no effect
    /// without a prefix extractor, with `set_total_order_seek(true)`, or
    /// after `seek_to_first`/`seek_to_last`.
    pub fn set_prefix_same_as_start(&mut self, v: bool) {
        self.prefix_same_as_start = v;
    }
    /// Iterates in total order whatever the prefix options say: prefix
    /// filters are not consulted and `prefix_same_as_start` is ignored, as
    /// RocksDB's `total_order_seek`.
    pub fn set_total_order_seek(&mut self, v: bool) {
        self.total_order_seek = v;
    }
    /// Adds a filter on the block properties a collector of the same name
    /// recorded: iterators skip the blocks and tables it rules out, without
    /// reading them, and so hide their entries (point lookups ignore block
    /// property filters). Tables written without that collector are read
    /// whole. Pebble's `BlockPropertyFilter`.
    pub fn add_block_property_filter(&mut self, filter: Arc<dyn BlockPropertyFilter>) {
        self.block_property_filters.0.push(filter);
    }
    /// Whether blocks read are added to the block cache (default true).
    pub fn fill_cache(&mut self, v: bool) {
        self.fill_cache = v;
    }
    /// Whether this read adds blocks to the cache: never blocks read
    /// without their checksum checked, which later readers and
    /// compactions would take as checked.
    pub(crate) fn cache_fill(&self) -> bool {
        self.fill_cache && self.verify_checksums
    }
    /// Whether the blocks this read takes from files have their checksums
    /// checked (default true, as RocksDB). With false, a damaged data block
    /// may give a wrong answer instead of `Corruption`: hardware CRC32C
    /// costs about 0.1 µs per 4 KiB block, so leave it on unless that
    /// matters. Blocks read unchecked are not added to the block cache
    /// (later reads and compactions take what is there as checked); a
    /// table's index, filter, properties and range
    /// deletions are always checked when it opens, and flushes and
    /// compactions always check what they read.
    pub fn set_verify_checksums(&mut self, v: bool) {
        self.verify_checksums = v;
    }
}
