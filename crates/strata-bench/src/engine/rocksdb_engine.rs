//! RocksDB through the `rocksdb` crate (feature `rocksdb`), configured from
//! [`EngineConfig`] as db_bench configures RocksDB from the same flags.
//! Options the flags do not set keep RocksDB's defaults, as in db_bench,
//! except `level_compaction_dynamic_level_bytes`, which is always set from
//! the flag (db_bench's default is false; RocksDB's own default is true).

use std::path::Path;
use std::time::{Duration, Instant};

use rocksdb::perf::PerfStatsLevel;
use rocksdb::{
    BlockBasedOptions, BottommostLevelCompaction, Cache, ColumnFamilyDescriptor, CompactOptions,
    DBCompressionType, DataBlockIndexType, Options, ReadOptions, WaitForCompactOptions, WriteBatch,
    WriteOptions, DB,
};

use super::{
    batch_capacity, report_found, Batch, BatchEntry, CacheType, Compression, Engine, EngineConfig,
    EngineIterator, TableFormat, WriteMode,
};
use crate::error::{Error, Result};

const NAME: &str = "rocksdb";

/// The RocksDB release `librocksdb-sys` 0.19.0 builds (the `rocksdb` crate
/// 0.25 pins it); the C API has no version call.
const ROCKSDB_VERSION: &str = "11.8.1";

/// `RocksDB:    version X`, as db_bench prints it.
pub fn version_line() -> String {
    format!("RocksDB:    version {ROCKSDB_VERSION} (rocksdb crate)")
}

fn options(cfg: &EngineConfig, create: bool) -> Options {
    let mut o = Options::default();
    o.create_if_missing(create);
    o.set_error_if_exists(create);
    o.set_write_buffer_size(cfg.write_buffer_size);
    o.set_max_write_buffer_number(cfg.max_write_buffer_number);
    o.set_target_file_size_base(cfg.target_file_size_base);
    o.set_target_file_size_multiplier(cfg.target_file_size_multiplier);
    o.set_max_bytes_for_level_base(cfg.max_bytes_for_level_base);
    o.set_max_bytes_for_level_multiplier(cfg.max_bytes_for_level_multiplier);
    o.set_level_compaction_dynamic_level_bytes(cfg.level_compaction_dynamic_level_bytes);
    o.set_level_zero_file_num_compaction_trigger(cfg.level0_file_num_compaction_trigger);
    o.set_level_zero_slowdown_writes_trigger(cfg.level0_slowdown_writes_trigger);
    o.set_level_zero_stop_writes_trigger(cfg.level0_stop_writes_trigger);
    o.set_disable_auto_compactions(cfg.disable_auto_compactions);
    o.set_paranoid_checks(cfg.paranoid_checks);
    o.set_max_subcompactions(cfg.subcompactions);
    o.set_use_direct_reads(cfg.use_direct_reads);
    if let Some(bytes) = cfg.compaction_readahead_size {
        o.set_compaction_readahead_size(bytes);
    }
    o.set_use_direct_io_for_flush_and_compaction(cfg.use_direct_io_for_flush_and_compaction);
    o.set_max_background_jobs(cfg.max_background_jobs);
    if cfg.rate_limiter.0 > 0 {
        // db_bench's fairness: 10.
        o.set_ratelimiter(cfg.rate_limiter.0, cfg.rate_limiter.1, 10);
    }
    o.set_enable_pipelined_write(cfg.enable_pipelined_write);
    o.set_allow_concurrent_memtable_write(cfg.allow_concurrent_memtable_write);
    o.set_max_open_files(cfg.open_files);
    // db_bench 11.8's defaults that differ from RocksDB's own
    // (docs/db_bench_flags.md): --table_cache_numshardbits=4,
    // --hard_pending_compaction_bytes_limit=128 GiB, --dump_malloc_stats,
    // and a fixed-prefix extractor for a nonzero --prefix_size.
    o.set_table_cache_num_shard_bits(4);
    o.set_hard_pending_compaction_bytes_limit(128 << 30);
    o.set_dump_malloc_stats(true);
    // db_bench's operators are C++ classes; through the crate the same
    // functions run as Rust callbacks (see docs/benchmarks.md).
    if let Some(kind) = cfg.merge_operator {
        o.set_merge_operator_associative(
            kind.name(),
            move |_: &[u8], base: Option<&[u8]>, operands: &rocksdb::MergeOperands| {
                Some(kind.merge(base, operands.iter()))
            },
        );
    }
    if cfg.prefix_size > 0 {
        o.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(
            cfg.prefix_size,
        ));
    }
    o.set_compression_type(match cfg.compression {
        Compression::None => DBCompressionType::None,
        Compression::Snappy => DBCompressionType::Snappy,
        Compression::Lz4 => DBCompressionType::Lz4,
        Compression::Zstd => DBCompressionType::Zstd,
    });
    let mut t = BlockBasedOptions::default();
    t.set_block_size(cfg.block_size);
    t.set_block_restart_interval(cfg.block_restart_interval);
    t.set_index_block_restart_interval(cfg.index_block_restart_interval);
    if cfg.bloom_bits > 0 {
        // `false`: a full (whole-table) filter, as db_bench builds.
        t.set_bloom_filter(f64::from(cfg.bloom_bits), false);
    }
    if cfg.cache_size > 0 {
        t.set_block_cache(&block_cache(cfg));
    } else {
        t.disable_cache();
    }
    t.set_data_block_index_type(if cfg.use_data_block_hash_index {
        DataBlockIndexType::BinaryAndHash
    } else {
        DataBlockIndexType::BinarySearch
    });
    t.set_data_block_hash_ratio(cfg.data_block_hash_table_util_ratio);
    t.set_cache_index_and_filter_blocks(cfg.cache_index_and_filter_blocks);
    t.set_pin_l0_filter_and_index_blocks_in_cache(cfg.pin_l0_filter_and_index_blocks_in_cache);
    o.set_block_based_table_factory(&t);
    if cfg.table_format == TableFormat::Plain {
        // As db_bench's --use_plain_table (which also needs --mmap_read=1):
        // the key length fixed, bloom bits as --bloom_bits, hash ratio 0.75.
        // The hash index needs a prefix extractor: without --prefix_size
        // the whole key is the prefix (PlainTable's fastest point lookup).
        o.set_allow_mmap_reads(true);
        if cfg.prefix_size == 0 {
            o.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(cfg.key_size));
        }
        o.set_plain_table_factory(&rocksdb::PlainTableFactoryOptions {
            user_key_length: cfg.key_size as u32,
            bloom_bits_per_key: cfg.bloom_bits as i32,
            hash_table_ratio: 0.75,
            index_sparseness: 16,
            huge_page_tlb_size: 0,
            encoding_type: rocksdb::KeyEncodingType::Plain,
            full_scan_mode: false,
            store_index_in_file: false,
        });
    }
    o
}

/// The block cache db_bench builds for `--cache_type` (its `NewCache`).
/// db_bench passes `--cache_numshardbits` (default -1: RocksDB picks) and
/// for the LRU cache a high-priority pool ratio of 0; the crate's
/// constructors take RocksDB's defaults for both (-1 and 0.5). With index
/// and filter blocks outside the cache (db_bench's default) nothing is
/// inserted at high priority, so the ratio changes nothing.
fn block_cache(cfg: &EngineConfig) -> Cache {
    match cfg.cache_type {
        CacheType::HyperClock => Cache::new_hyper_clock_cache(cfg.cache_size, 0),
        CacheType::FixedHyperClock => Cache::new_hyper_clock_cache(cfg.cache_size, cfg.block_size),
        CacheType::Lru => Cache::new_lru_cache(cfg.cache_size),
    }
}

/// RocksDB's perf level `level` (1..=6). Only the integer reaches RocksDB
/// (`rocksdb_set_perf_level`); the crate's enum names lag RocksDB 11's
/// `PerfLevel` (which added kEnableWait = 3), so the variant is chosen by
/// its value, not its name.
fn perf_stats_level(level: i32) -> PerfStatsLevel {
    use PerfStatsLevel::*;
    [
        Uninitialized,
        Disable,
        EnableCount,
        EnableTimeExceptForMutex,
        EnableTimeAndCPUTimeExceptForMutex,
        EnableTime,
        OutOfBound,
    ]
    .into_iter()
    .find(|l| *l as i32 == level)
    .unwrap_or(Disable)
}

/// RocksDB, as an [`Engine`].
pub struct RocksDbEngine {
    db: DB,
    read_options: ReadOptions,
    perf_level: PerfStatsLevel,
    /// Kept for iterators: the crate's `ReadOptions` cannot be cloned.
    verify_checksum: bool,
    /// One per [`WriteMode`] (see [`mode_index`]), made once: db_bench
    /// reuses its write options, so the RocksDB column must not pay for
    /// creating and destroying them at every write.
    write_options: [WriteOptions; 4],
    /// The options it was opened with, for its table-file writer.
    options: Options,
}

/// Index of `mode` in `RocksDbEngine::write_options`.
fn mode_index(mode: WriteMode) -> usize {
    usize::from(mode.sync) << 1 | usize::from(mode.disable_wal)
}

impl std::fmt::Debug for RocksDbEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksDbEngine")
            .field("path", &self.db.path())
            .finish()
    }
}

fn err(e: rocksdb::Error) -> Error {
    Error::engine(NAME, e)
}

impl RocksDbEngine {
    /// Opens (or with `create`, creates) the database at `path`.
    pub fn open(cfg: &EngineConfig, path: &Path, create: bool) -> Result<RocksDbEngine> {
        // Opened with a descriptor of the default column family, so that its
        // handle exists for the batched MultiGet. The descriptor carries the
        // options: a column family opened by name alone would get RocksDB's
        // defaults (LZ4, dynamic level bytes, 64 MiB memtables, ...).
        let opts = options(cfg, create);
        let cf = ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, opts.clone());
        let db = DB::open_cf_descriptors(&opts, path, [cf])
            .map_err(|e| Error::engine(NAME, format!("open {}: {e}", path.display())))?;
        Ok(RocksDbEngine {
            db,
            read_options: read_options(cfg),
            perf_level: perf_stats_level(cfg.perf_level),
            verify_checksum: cfg.verify_checksum,
            write_options: std::array::from_fn(|i| {
                let mut wo = WriteOptions::default();
                wo.set_sync(i & 2 != 0);
                wo.disable_wal(i & 1 != 0);
                wo
            }),
            options: opts,
        })
    }
}

fn read_options(cfg: &EngineConfig) -> ReadOptions {
    let mut ro = ReadOptions::default();
    ro.set_verify_checksums(cfg.verify_checksum);
    // db_bench's ReadOptions keep RocksDB's C++ default (false); the
    // crate's constructor turns it on.
    ro.set_auto_readahead_size(false);
    ro
}

/// Deletes a RocksDB database.
pub fn destroy(cfg: &EngineConfig, path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    DB::destroy(&options(cfg, false), path)
        .map_err(|e| Error::engine(NAME, format!("destroy {}: {e}", path.display())))
}

impl Engine for RocksDbEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn write_and_ingest(
        &self,
        dir: &Path,
        file_bytes: u64,
        next: &mut dyn FnMut(&mut Vec<u8>, &mut Vec<u8>) -> bool,
    ) -> Result<(Duration, Duration)> {
        let start = Instant::now();
        let files = super::write_table_files(
            dir,
            file_bytes,
            next,
            |path| {
                let w = rocksdb::SstFileWriter::create(&self.options);
                w.open(path).map_err(err)?;
                Ok(w)
            },
            |w, k, v| w.put(k, v).map_err(err),
            |w| w.file_size(),
            |w| w.finish().map_err(err),
        )?;
        let wrote = start.elapsed();
        let start = Instant::now();
        let mut opts = rocksdb::IngestExternalFileOptions::default();
        opts.set_move_files(true);
        self.db
            .ingest_external_file_opts(&opts, files)
            .map_err(err)?;
        Ok((wrote, start.elapsed()))
    }

    fn checkpoint(&self, dir: &Path) -> Result<()> {
        rocksdb::checkpoint::Checkpoint::new(&self.db)
            .and_then(|c| c.create_checkpoint(dir))
            .map_err(err)
    }

    fn thread_start(&self) {
        // db_bench's ThreadBody: `SetPerfLevel(shared->perf_level)`. The
        // level is per thread and RocksDB's default (kEnableCount) counts
        // every key comparison and block read.
        rocksdb::perf::set_perf_stats(self.perf_level);
    }

    fn write(&self, batch: &Batch, mode: WriteMode) -> Result<()> {
        // Sized for the whole batch at once, as the Strata engine does.
        let mut b = WriteBatch::with_capacity_bytes(batch_capacity(batch));
        for e in batch.iter() {
            match e {
                BatchEntry::Put(k, v) => b.put(k, v),
                BatchEntry::Delete(k) => b.delete(k),
                BatchEntry::DeleteRange(from, to) => b.delete_range(from, to),
            }
        }
        self.db
            .write_opt(b, &self.write_options[mode_index(mode)])
            .map_err(err)
    }

    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        // db_bench's writers call Put directly.
        self.db
            .put_opt(key, value, &self.write_options[mode_index(mode)])
            .map_err(err)
    }

    fn merge(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        self.db
            .merge_opt(key, value, &self.write_options[mode_index(mode)])
            .map_err(err)
    }

    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool> {
        match self
            .db
            .get_pinned_opt(key, &self.read_options)
            .map_err(err)?
        {
            Some(v) => {
                found(&v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn multi_get(
        &self,
        keys: &[Vec<u8>],
        batched: bool,
        found: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<usize> {
        if !batched {
            // db_bench's `MultiGet(options, keys, &values)`: the vector
            // form, each value copied into a string.
            return report_found(self.db.multi_get_opt(keys, &self.read_options), err, found);
        }
        let cf = self
            .db
            .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .ok_or_else(|| Error::engine(NAME, "no default column family"))?;
        let results = self
            .db
            .batched_multi_get_cf_opt(cf, keys, false, &self.read_options);
        report_found(results, err, found)
    }

    fn iterator(&self) -> Result<Box<dyn EngineIterator + '_>> {
        let mut ro = ReadOptions::default();
        ro.set_verify_checksums(self.verify_checksum);
        ro.set_auto_readahead_size(false);
        Ok(Box::new(RocksDbIterator(self.db.raw_iterator_opt(ro))))
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(err)
    }

    fn compact_all(&self) -> Result<()> {
        // db_bench's `compact`: the whole range, bottommost level too.
        let mut co = CompactOptions::default();
        co.set_bottommost_level_compaction(BottommostLevelCompaction::ForceOptimized);
        self.db.compact_range_opt::<&[u8], &[u8]>(None, None, &co);
        Ok(())
    }

    fn wait_for_compaction(&self) -> Result<()> {
        self.db
            .wait_for_compact(&WaitForCompactOptions::default())
            .map_err(err)
    }

    fn property(&self, name: &str) -> Result<Option<String>> {
        self.db
            .property_value(format!("rocksdb.{name}").as_str())
            .map_err(err)
    }
}

struct RocksDbIterator<'a>(rocksdb::DBRawIterator<'a>);

impl EngineIterator for RocksDbIterator<'_> {
    fn seek_to_first(&mut self) {
        self.0.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.0.seek_to_last();
    }
    fn seek(&mut self, key: &[u8]) {
        self.0.seek(key);
    }
    fn next(&mut self) {
        self.0.next();
    }
    fn prev(&mut self) {
        self.0.prev();
    }
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn key(&self) -> &[u8] {
        self.0.key().unwrap_or_default()
    }
    fn value(&self) -> &[u8] {
        self.0.value().unwrap_or_default()
    }
    fn status(&self) -> Result<()> {
        self.0.status().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags reach the column family RocksDB writes with: its LOG lists
    /// the options in force.
    #[test]
    fn options_reach_the_default_column_family() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = EngineConfig::small_for_tests();
        cfg.compression = Compression::None;
        cfg.write_buffer_size = 1_234_567;
        cfg.level_compaction_dynamic_level_bytes = false;
        cfg.block_size = 8192;
        let path = dir.path().join("db");
        let e = RocksDbEngine::open(&cfg, &path, true).unwrap();
        e.put(b"k", b"v", WriteMode::default()).unwrap();
        drop(e);
        let log = std::fs::read_to_string(path.join("LOG")).unwrap();
        for want in [
            "Options.compression: NoCompression",
            "Options.write_buffer_size: 1234567",
            "Options.level_compaction_dynamic_level_bytes: 0",
            "block_size: 8192",
        ] {
            assert!(log.contains(want), "{want} not in RocksDB's LOG");
        }
        assert!(!log.contains("Options.compression: LZ4"));
    }

    /// db_bench's defaults reach RocksDB: the hyper clock cache and
    /// pipelined writes, and the alternatives when asked for.
    #[test]
    fn cache_type_and_pipelined_write_reach_rocksdb() {
        let dir = tempfile::tempdir().unwrap();
        for (cache_type, pipelined, want_cache) in [
            (
                CacheType::HyperClock,
                true,
                "block_cache_name: AutoHyperClockCache",
            ),
            (
                CacheType::FixedHyperClock,
                true,
                "block_cache_name: FixedHyperClockCache",
            ),
            (CacheType::Lru, false, "block_cache_name: LRUCache"),
        ] {
            let mut cfg = EngineConfig::small_for_tests();
            cfg.cache_type = cache_type;
            cfg.enable_pipelined_write = pipelined;
            let path = dir.path().join(cache_type.name());
            drop(RocksDbEngine::open(&cfg, &path, true).unwrap());
            let log = std::fs::read_to_string(path.join("LOG")).unwrap();
            assert!(
                log.contains(want_cache),
                "{want_cache} not in RocksDB's LOG"
            );
            let want = format!("Options.enable_pipelined_write: {}", u8::from(pipelined));
            assert!(log.contains(&want), "{want} not in RocksDB's LOG");
        }
    }

    /// `thread_start` sets the thread's perf level: at db_bench's default
    /// (disabled) a get counts nothing; at 2 (counts) it counts its key
    /// comparisons.
    #[test]
    fn thread_start_sets_the_perf_level() {
        use rocksdb::perf::{PerfContext, PerfMetric};
        let dir = tempfile::tempdir().unwrap();
        let comparisons_per_get = |level: i32| {
            let mut cfg = EngineConfig::small_for_tests();
            cfg.perf_level = level;
            let path = dir.path().join(format!("perf{level}"));
            let e = RocksDbEngine::open(&cfg, &path, true).unwrap();
            for i in 0..100u32 {
                e.put(&i.to_be_bytes(), b"v", WriteMode::default()).unwrap();
            }
            // A fresh thread: the level is per thread and starts at
            // RocksDB's default (counting).
            std::thread::scope(|s| {
                s.spawn(|| {
                    e.thread_start();
                    let mut ctx = PerfContext::default();
                    ctx.reset();
                    assert!(e.get(&7u32.to_be_bytes(), &mut |_| {}).unwrap());
                    ctx.metric(PerfMetric::UserKeyComparisonCount)
                })
                .join()
                .unwrap()
            })
        };
        assert_eq!(comparisons_per_get(1), 0, "perf level 1 counts nothing");
        assert!(
            comparisons_per_get(2) > 0,
            "perf level 2 counts comparisons"
        );
    }
}
