//! The Strata engine, configured from [`EngineConfig`] as the RocksDB engine
//! is, option for option.

use std::path::Path;
use std::time::{Duration, Instant};

use strata::{
    BlockBasedOptions, Cache, DBCompressionType, DataBlockIndexType, Options, ReadOptions,
    SliceTransform, SstPartitionerFactory, WriteBatch, WriteOptions, DB,
};

use crate::bench::ROW_BYTES;

use super::config::{TableFormat, PERF_LEVEL_DISABLE};
use super::{
    batch_capacity, report_found, Batch, BatchEntry, Compression, Engine, EngineConfig,
    EngineIterator, WriteMode,
};
use crate::error::{Error, Result};

thread_local! {
    /// Each thread's batched MultiGet answers, kept between batches.
    static ANSWERS: std::cell::RefCell<Vec<strata::Result<Option<strata::DBPinnableSlice>>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

const NAME: &str = "strata";

/// Refuses what Strata cannot do yet: each of these would otherwise be
/// silently ignored and the comparison with RocksDB would be wrong.
pub fn check(cfg: &EngineConfig) -> Result<()> {
    let refuse = |flag: &str, why: &str| {
        Err(Error::Unsupported(format!(
            "--{flag} with --engine=strata: {why}"
        )))
    };
    if cfg.perf_level != PERF_LEVEL_DISABLE {
        return refuse(
            &format!("perf_level={}", cfg.perf_level),
            "Strata has no perf context to count into",
        );
    }
    if !cfg.options_file.is_empty() {
        options(cfg, false)?;
    }
    if cfg.table_format == TableFormat::Plain {
        return refuse(
            "table_format=plain",
            "plain is RocksDB's PlainTable; Strata's in-memory format is --table_format=packed",
        );
    }
    Ok(())
}

/// `Strata:     version X` for the header (stderr, as db_bench's
/// `RocksDB:    version X`).
pub fn version_line() -> String {
    // The bench crate and the engine share the workspace version.
    format!("Strata:     version {}", env!("CARGO_PKG_VERSION"))
}

/// The options the flags (or `--options_file`, read each time it is
/// needed) describe; a bad options file is a usage error.
fn options(cfg: &EngineConfig, create: bool) -> Result<Options> {
    if !cfg.options_file.is_empty() {
        let mut o = Options::from_file(&cfg.options_file)
            .map_err(|e| Error::Usage(format!("--options_file={}: {e}", cfg.options_file)))?;
        o.create_if_missing(create);
        o.set_error_if_exists(create);
        return Ok(o);
    }
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
    o.set_allow_concurrent_memtable_write(cfg.allow_concurrent_memtable_write);
    o.set_enable_pipelined_write(cfg.enable_pipelined_write);
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
    o.set_max_open_files(cfg.open_files);
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
    t.set_data_block_index_type(if cfg.use_data_block_hash_index {
        DataBlockIndexType::BinaryAndHash
    } else {
        DataBlockIndexType::BinarySearch
    });
    t.set_data_block_hash_ratio(cfg.data_block_hash_table_util_ratio);
    if cfg.bloom_bits > 0 {
        t.set_bloom_filter(f64::from(cfg.bloom_bits), false);
    }
    if cfg.cache_size > 0 {
        t.set_block_cache(&Cache::new_lru_cache(cfg.cache_size));
    } else {
        t.disable_cache();
    }
    t.set_cache_index_and_filter_blocks(cfg.cache_index_and_filter_blocks);
    t.set_pin_l0_filter_and_index_blocks_in_cache(cfg.pin_l0_filter_and_index_blocks_in_cache);
    t.set_cache_compressed_under_direct_reads(cfg.cache_compressed_under_direct_reads);
    o.set_block_based_table_factory(&t);
    // As db_bench gives RocksDB a fixed-prefix extractor for --prefix_size;
    // W5's rows are 8 bytes (the RocksDB side does not need one: it has no
    // prefix steps, and W5's reference program sets none).
    if cfg.sst_partitioner_fixed_prefix > 0 {
        o.set_sst_partitioner_factory(SstPartitionerFactory::fixed_prefix(
            cfg.sst_partitioner_fixed_prefix,
        ));
    }
    o.set_stream_aware_cutting(cfg.stream_aware_cutting);
    o.set_read_triggered_compactions(cfg.read_triggered_compactions);
    if cfg.table_format == TableFormat::Packed {
        let mut p = strata::PackedTableOptions::default();
        p.set_from_level(cfg.packed_from_level);
        o.set_packed_table_factory(&p);
    }
    if let Some(kind) = cfg.merge_operator {
        o.set_merge_operator_associative(
            kind.name(),
            move |_: &[u8], base: Option<&[u8]>, operands: &strata::MergeOperands| {
                Some(kind.merge(base, operands.iter()))
            },
        );
    }
    if cfg.prefix_size > 0 {
        o.set_prefix_extractor(SliceTransform::create_fixed_prefix(cfg.prefix_size));
    } else if cfg.mvcc_rows {
        o.set_prefix_extractor(SliceTransform::create_fixed_prefix(ROW_BYTES));
    }
    Ok(o)
}

/// Strata's database, as an [`Engine`].
#[derive(Debug)]
pub struct StrataEngine {
    db: DB,
    read_options: ReadOptions,
    /// The options it was opened with, for its table-file writer.
    options: Options,
}

impl StrataEngine {
    /// Opens (or with `create`, creates) the database at `path`.
    pub fn open(cfg: &EngineConfig, path: &Path, create: bool) -> Result<StrataEngine> {
        check(cfg)?;
        let options = options(cfg, create)?;
        let db = DB::open(&options, path)
            .map_err(|e| Error::engine(NAME, format!("open {}: {e}", path.display())))?;
        let mut read_options = ReadOptions::default();
        read_options.set_verify_checksums(cfg.verify_checksum);
        Ok(StrataEngine {
            db,
            read_options,
            options,
        })
    }
}

/// Deletes a Strata database.
pub fn destroy(cfg: &EngineConfig, path: &Path) -> Result<()> {
    DB::destroy(&options(cfg, false)?, path)
        .map_err(|e| Error::engine(NAME, format!("destroy {}: {e}", path.display())))
}

fn write_options(mode: WriteMode) -> WriteOptions {
    let mut wo = WriteOptions::new();
    wo.set_sync(mode.sync);
    wo.disable_wal(mode.disable_wal);
    wo
}

fn err(e: strata::Error) -> Error {
    Error::engine(NAME, e)
}

impl Engine for StrataEngine {
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
                let mut w = strata::SstFileWriter::create(&self.options);
                w.open(path).map_err(err)?;
                Ok(w)
            },
            |w, k, v| w.put(k, v).map_err(err),
            |w| w.file_size(),
            |w| w.finish().map_err(err),
        )?;
        let wrote = start.elapsed();
        let start = Instant::now();
        let mut opts = strata::IngestExternalFileOptions::default();
        opts.set_move_files(true);
        self.db
            .ingest_external_file_opts(&opts, files)
            .map_err(err)?;
        Ok((wrote, start.elapsed()))
    }

    fn checkpoint(&self, dir: &Path) -> Result<()> {
        strata::checkpoint::Checkpoint::new(&self.db)
            .and_then(|c| c.create_checkpoint(dir))
            .map_err(err)
    }

    fn write(&self, batch: &Batch, mode: WriteMode) -> Result<()> {
        let mut b = WriteBatch::with_capacity_bytes(batch_capacity(batch));
        for e in batch.iter() {
            match e {
                BatchEntry::Put(k, v) => b.put(k, v),
                BatchEntry::Delete(k) => b.delete(k),
                BatchEntry::DeleteRange(from, to) => b.delete_range(from, to),
            }
        }
        self.db.write_opt(b, &write_options(mode)).map_err(err)
    }

    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        self.db
            .put_opt(key, value, &write_options(mode))
            .map_err(err)
    }

    fn merge(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        self.db
            .merge_opt(key, value, &write_options(mode))
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
        if batched {
            // Into a vector this thread keeps, as db_bench hands RocksDB's
            // C++ MultiGet its own arrays: a batch allocates no answer
            // vector, and a batch of one costs what a get costs.
            ANSWERS.with(|answers| {
                let mut answers = answers.borrow_mut();
                self.db
                    .batched_multi_get_into(keys, false, &self.read_options, &mut answers);
                let mut n = 0;
                let mut failed = None;
                for (i, r) in answers.iter().enumerate() {
                    match r {
                        Ok(Some(v)) => {
                            found(i, v);
                            n += 1;
                        }
                        Ok(None) => {}
                        Err(e) => {
                            failed = Some(e.clone());
                            break;
                        }
                    }
                }
                // The answers pin their blocks: let them go now, on error too.
                answers.clear();
                failed.map_or(Ok(n), |e| Err(err(e)))
            })
        } else {
            report_found(self.db.multi_get_opt(keys, &self.read_options), err, found)
        }
    }

    fn iterator(&self) -> Result<Box<dyn EngineIterator + '_>> {
        Ok(Box::new(StrataIterator(
            self.db.raw_iterator_opt(self.read_options.clone()),
        )))
    }

    fn has_prefix_steps(&self) -> bool {
        true
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(err)
    }

    fn compact_all(&self) -> Result<()> {
        self.db
            .compact_range::<&[u8], &[u8]>(None, None)
            .map_err(err)
    }

    fn wait_for_compaction(&self) -> Result<()> {
        self.db.wait_for_compact().map_err(err)
    }

    fn property(&self, name: &str) -> Result<Option<String>> {
        self.db
            .property_value(&format!("strata.{name}"))
            .map_err(err)
    }
}

struct StrataIterator<'a>(strata::DBRawIterator<'a>);

impl EngineIterator for StrataIterator<'_> {
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
    fn next_prefix(&mut self) -> Result<()> {
        self.0.next_prefix();
        Ok(())
    }
    fn prev_prefix(&mut self) -> Result<()> {
        self.0.prev_prefix();
        Ok(())
    }
}
