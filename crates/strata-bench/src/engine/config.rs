//! Engine options taken from the flags, the same for every engine. Each
//! engine maps them to its own options type; a value an engine cannot
//! honour is an error when it opens, never silently ignored.

use crate::error::{Error, Result};
use crate::flags::Flags;

/// Block compression (`--compression_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `none`.
    None,
    /// `snappy`.
    Snappy,
    /// `lz4`.
    Lz4,
    /// `zstd`.
    Zstd,
}

impl Compression {
    /// Parses db_bench's names; zlib, bzip2, lz4hc and xpress are db_bench
    /// names too, but neither engine of this build has them.
    pub fn parse(name: &str) -> Result<Compression> {
        match name.to_ascii_lowercase().as_str() {
            "none" => Ok(Compression::None),
            "snappy" => Ok(Compression::Snappy),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            "zlib" | "bzip2" | "lz4hc" | "xpress" => Err(Error::Unsupported(format!(
                "--compression_type={name}: this build supports none, snappy, lz4 and zstd"
            ))),
            _ => Err(Error::Usage(format!(
                "unknown --compression_type={name}: expected none, snappy, lz4 or zstd"
            ))),
        }
    }

    /// The name db_bench's header prints (`CompressionTypeToString`).
    pub fn header_name(self) -> &'static str {
        match self {
            Compression::None => "NoCompression",
            Compression::Snappy => "Snappy",
            Compression::Lz4 => "LZ4",
            Compression::Zstd => "ZSTD",
        }
    }
}

/// The table format (`--table_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableFormat {
    /// Block-based tables (both engines).
    Block,
    /// Strata's packed tables, from `--packed_from_level` down.
    Packed,
    /// RocksDB's PlainTable (memory-mapped reads), as db_bench's
    /// `--use_plain_table`.
    Plain,
}

impl TableFormat {
    /// Parses `block`, `packed` or `plain`.
    pub fn parse(name: &str) -> Result<TableFormat> {
        match name {
            "block" => Ok(TableFormat::Block),
            "packed" => Ok(TableFormat::Packed),
            "plain" => Ok(TableFormat::Plain),
            other => Err(Error::Usage(format!(
                "--table_format={other:?}: expected block, packed (Strata) or plain (RocksDB)"
            ))),
        }
    }
}

/// RocksDB's block cache implementation (`--cache_type`), as db_bench
/// builds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheType {
    /// `hyper_clock_cache` or `auto_hyper_clock_cache` (db_bench's default):
    /// the lock-free clock cache sizing its table as it goes (estimated
    /// entry charge 0).
    HyperClock,
    /// `fixed_hyper_clock_cache`: the clock cache with a table sized for
    /// entries of `--block_size` bytes.
    FixedHyperClock,
    /// `lru_cache`: the sharded, mutex-protected LRU cache.
    Lru,
}

impl CacheType {
    /// Parses db_bench's names. `clock_cache` is gone from RocksDB 11, as
    /// db_bench says.
    pub fn parse(name: &str) -> Result<CacheType> {
        match name {
            "hyper_clock_cache" | "auto_hyper_clock_cache" => Ok(CacheType::HyperClock),
            "fixed_hyper_clock_cache" => Ok(CacheType::FixedHyperClock),
            "lru_cache" => Ok(CacheType::Lru),
            "clock_cache" => Err(Error::Usage(
                "--cache_type=clock_cache: the old clock cache was removed from RocksDB; \
                 use hyper_clock_cache"
                    .into(),
            )),
            _ => Err(Error::Usage(format!(
                "unknown --cache_type={name}: expected hyper_clock_cache, \
                 auto_hyper_clock_cache, fixed_hyper_clock_cache or lru_cache"
            ))),
        }
    }

    /// The name the header prints.
    pub fn name(self) -> &'static str {
        match self {
            CacheType::HyperClock => "hyper_clock_cache",
            CacheType::FixedHyperClock => "fixed_hyper_clock_cache",
            CacheType::Lru => "lru_cache",
        }
    }
}

/// RocksDB's `PerfLevel` values (`--perf_level`): kDisable.
pub const PERF_LEVEL_DISABLE: i32 = 1;
/// One past RocksDB's highest `PerfLevel` (kEnableTime = 6).
pub const PERF_LEVEL_OUT_OF_BOUNDS: i32 = 7;

/// Per-write options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteMode {
    /// Sync the log before the write returns.
    pub sync: bool,
    /// Skip the log.
    pub disable_wal: bool,
}

/// Options of an engine, from the flags.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub write_buffer_size: usize,
    pub max_write_buffer_number: i32,
    pub target_file_size_base: u64,
    pub target_file_size_multiplier: i32,
    pub max_bytes_for_level_base: u64,
    pub max_bytes_for_level_multiplier: f64,
    pub level_compaction_dynamic_level_bytes: bool,
    pub level0_file_num_compaction_trigger: i32,
    pub level0_slowdown_writes_trigger: i32,
    pub level0_stop_writes_trigger: i32,
    pub disable_auto_compactions: bool,
    pub max_background_jobs: i32,
    pub subcompactions: u32,
    pub use_direct_reads: bool,
    /// `--compaction_readahead_size`, when given (>= 0).
    pub compaction_readahead_size: Option<usize>,
    pub use_direct_io_for_flush_and_compaction: bool,
    /// `--rate_limiter_bytes_per_sec` (0: none) and its refill period.
    pub rate_limiter: (i64, i64),
    pub enable_pipelined_write: bool,
    pub allow_concurrent_memtable_write: bool,
    /// RocksDB's perf level in every benchmark thread (1..=6).
    pub perf_level: i32,
    pub open_files: i32,
    pub compression: Compression,
    /// Block cache bytes; 0: no block cache.
    pub cache_size: usize,
    /// RocksDB's block cache implementation.
    pub cache_type: CacheType,
    /// Bloom bits per key; 0: no filter.
    pub bloom_bits: u32,
    pub block_size: usize,
    pub block_restart_interval: i32,
    pub index_block_restart_interval: i32,
    pub use_data_block_hash_index: bool,
    pub data_block_hash_table_util_ratio: f64,
    pub cache_index_and_filter_blocks: bool,
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    pub verify_checksum: bool,
    pub paranoid_checks: bool,
    /// `--prefix_size`: db_bench gives RocksDB a fixed-prefix extractor of
    /// this length when it is not 0 (besides building keys with it).
    pub prefix_size: usize,
    /// The benchmarks include W5's (`fillmvcc`, `mvccscan`): Strata then
    /// sets an 8-byte prefix extractor for its prefix steps (ours).
    pub mvcc_rows: bool,
    /// `--sst_partitioner_fixed_prefix` (Strata only; 0: none).
    pub sst_partitioner_fixed_prefix: usize,
    /// `--stream_aware_cutting` (Strata only).
    pub stream_aware_cutting: bool,
    /// `--read_triggered_compactions` (Strata only).
    pub read_triggered_compactions: bool,
    /// `--cache_compressed_under_direct_reads` (Strata only).
    pub cache_compressed_under_direct_reads: bool,
    /// `--table_format`.
    pub table_format: TableFormat,
    /// `--packed_from_level` (Strata's packed tables).
    pub packed_from_level: i32,
    /// `--key_size`: RocksDB's PlainTable is told the fixed key length.
    pub key_size: usize,
    /// `--options_file` (Strata only; empty: none).
    pub options_file: String,
    /// `--merge_operator` (none when empty).
    pub merge_operator: Option<super::merge_ops::MergeOperatorKind>,
}

fn positive<T: TryFrom<i64>>(name: &str, v: i64) -> Result<T> {
    if v <= 0 {
        return Err(Error::Usage(format!("--{name} must be positive, got {v}")));
    }
    T::try_from(v).map_err(|_| Error::Usage(format!("--{name}={v} is out of range")))
}

impl EngineConfig {
    /// The options the flags describe.
    pub fn from_flags(f: &Flags) -> Result<EngineConfig> {
        Ok(EngineConfig {
            write_buffer_size: positive("write_buffer_size", f.write_buffer_size)?,
            max_write_buffer_number: f.max_write_buffer_number,
            target_file_size_base: positive("target_file_size_base", f.target_file_size_base)?,
            target_file_size_multiplier: f.target_file_size_multiplier,
            max_bytes_for_level_base: f.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: f.max_bytes_for_level_multiplier,
            level_compaction_dynamic_level_bytes: f.level_compaction_dynamic_level_bytes,
            level0_file_num_compaction_trigger: f.level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger: f.level0_slowdown_writes_trigger,
            level0_stop_writes_trigger: f.level0_stop_writes_trigger,
            disable_auto_compactions: f.disable_auto_compactions,
            max_background_jobs: f.max_background_jobs,
            subcompactions: f.subcompactions.max(1) as u32,
            use_direct_reads: f.use_direct_reads,
            compaction_readahead_size: usize::try_from(f.compaction_readahead_size).ok(),
            use_direct_io_for_flush_and_compaction: f.use_direct_io_for_flush_and_compaction,
            rate_limiter: (
                f.rate_limiter_bytes_per_sec,
                f.rate_limiter_refill_period_us,
            ),
            enable_pipelined_write: f.enable_pipelined_write,
            allow_concurrent_memtable_write: f.allow_concurrent_memtable_write,
            perf_level: if (PERF_LEVEL_DISABLE..PERF_LEVEL_OUT_OF_BOUNDS).contains(&f.perf_level) {
                f.perf_level
            } else {
                return Err(Error::Usage(format!(
                    "--perf_level={}: expected {PERF_LEVEL_DISABLE} (disabled) to {} \
                     (RocksDB's kEnableTime)",
                    f.perf_level,
                    PERF_LEVEL_OUT_OF_BOUNDS - 1
                )));
            },
            open_files: f.open_files,
            compression: Compression::parse(&f.compression_type)?,
            // db_bench: a cache size <= 0 means no block cache.
            cache_size: usize::try_from(f.cache_size.max(0)).unwrap_or(usize::MAX),
            cache_type: CacheType::parse(&f.cache_type)?,
            // db_bench: negative means RocksDB's default, which is no filter.
            bloom_bits: u32::try_from(f.bloom_bits.max(0)).unwrap_or(0),
            block_size: positive("block_size", i64::from(f.block_size))?,
            block_restart_interval: f.block_restart_interval,
            index_block_restart_interval: f.index_block_restart_interval,
            use_data_block_hash_index: f.use_data_block_hash_index,
            data_block_hash_table_util_ratio: f.data_block_hash_table_util_ratio,
            cache_index_and_filter_blocks: f.cache_index_and_filter_blocks,
            pin_l0_filter_and_index_blocks_in_cache: f.pin_l0_filter_and_index_blocks_in_cache,
            verify_checksum: f.verify_checksum,
            paranoid_checks: f.paranoid_checks,
            prefix_size: f.prefix_size.max(0) as usize,
            mvcc_rows: f
                .benchmarks
                .split(',')
                .any(|b| b == "fillmvcc" || b == "mvccscan"),
            sst_partitioner_fixed_prefix: f.sst_partitioner_fixed_prefix.max(0) as usize,
            stream_aware_cutting: f.stream_aware_cutting,
            read_triggered_compactions: f.read_triggered_compactions,
            cache_compressed_under_direct_reads: f.cache_compressed_under_direct_reads,
            table_format: TableFormat::parse(&f.table_format)?,
            packed_from_level: if (0..7).contains(&f.packed_from_level) {
                f.packed_from_level
            } else {
                return Err(Error::Usage(format!(
                    "--packed_from_level={}: expected a level from 0 to 6",
                    f.packed_from_level
                )));
            },
            key_size: positive("key_size", i64::from(f.key_size))?,
            options_file: f.options_file.clone(),
            merge_operator: super::merge_ops::MergeOperatorKind::parse(&f.merge_operator)?,
        })
    }

    /// Small options for tests: small memtables and files, so that a few
    /// thousand keys make several levels.
    pub fn small_for_tests() -> EngineConfig {
        let f = Flags {
            write_buffer_size: 64 << 10,
            target_file_size_base: 32 << 10,
            max_bytes_for_level_base: 128 << 10,
            cache_size: 1 << 20,
            bloom_bits: 10,
            compression_type: "none".into(),
            ..Flags::default()
        };
        EngineConfig::from_flags(&f).expect("valid test options")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Result<EngineConfig> {
        match crate::flags::parse(args)? {
            crate::flags::Command::Run(f) => EngineConfig::from_flags(&f),
            crate::flags::Command::Help => panic!("help"),
        }
    }

    #[test]
    fn db_bench_defaults_for_rocksdb() {
        let c = config(&[]).unwrap();
        assert_eq!(c.cache_type, CacheType::HyperClock);
        assert!(c.enable_pipelined_write);
        assert_eq!(c.perf_level, PERF_LEVEL_DISABLE);
    }

    #[test]
    fn cache_types_by_db_bench_name() {
        for (name, want) in [
            ("hyper_clock_cache", CacheType::HyperClock),
            ("auto_hyper_clock_cache", CacheType::HyperClock),
            ("fixed_hyper_clock_cache", CacheType::FixedHyperClock),
            ("lru_cache", CacheType::Lru),
        ] {
            let c = config(&[&format!("--cache_type={name}")]).unwrap();
            assert_eq!(c.cache_type, want, "{name}");
        }
        let e = config(&["--cache_type=clock_cache"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("removed"), "{e}");
        let e = config(&["--cache_type=lru"]).unwrap_err().to_string();
        assert!(e.contains("unknown --cache_type=lru"), "{e}");
    }

    #[test]
    fn perf_level_in_rocksdb_range() {
        assert_eq!(config(&["--perf_level=6"]).unwrap().perf_level, 6);
        for bad in ["0", "7", "-1"] {
            let e = config(&[&format!("--perf_level={bad}")])
                .unwrap_err()
                .to_string();
            assert!(e.contains("--perf_level"), "{e}");
        }
    }

    #[test]
    fn strata_refuses_perf_counting() {
        let c = config(&["--perf_level=2"]).unwrap();
        let e = crate::engine::check("strata", &c).unwrap_err().to_string();
        assert!(e.contains("perf context"), "{e}");
        assert!(crate::engine::check("strata", &config(&[]).unwrap()).is_ok());
    }
}
