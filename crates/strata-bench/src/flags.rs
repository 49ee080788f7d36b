//! db_bench's command-line flags, parsed as gflags parses them:
//! `--name=value` or `-name=value`, `--name value`, and for booleans also
//! `--name` (true) and `--noname` (false), with `true/false/1/0/yes/no`.
//! An unknown flag is an error naming the closest known flag.
//!
//! Flag names, meanings and defaults are db_bench's (RocksDB 11.x), except
//! the few marked "ours". A flag is listed here only if the tool acts on it;
//! whether an engine can honour a non-default value is checked when the
//! engine opens (see `engine::EngineConfig`).

use crate::error::{Error, Result};

/// A value a flag can hold.
trait FlagValue: Sized {
    /// Parses `text`; the error says what was expected.
    fn parse_flag(text: &str) -> std::result::Result<Self, String>;
    /// The value as `--help` shows it.
    fn show(&self) -> String;
    /// Whether `--name` alone (no value) is allowed: booleans only.
    const IS_BOOL: bool = false;
}

impl FlagValue for bool {
    fn parse_flag(text: &str) -> std::result::Result<Self, String> {
        match text.to_ascii_lowercase().as_str() {
            "1" | "true" | "t" | "yes" | "y" => Ok(true),
            "0" | "false" | "f" | "no" | "n" => Ok(false),
            _ => Err("a boolean (0, 1, true or false)".into()),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
    const IS_BOOL: bool = true;
}

macro_rules! number_flag {
    ($($t:ty),*) => {$(
        impl FlagValue for $t {
            fn parse_flag(text: &str) -> std::result::Result<Self, String> {
                text.trim().parse::<$t>().map_err(|_| format!("a number of type {}", stringify!($t)))
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
number_flag!(i32, i64, u64, f64);

impl FlagValue for String {
    fn parse_flag(text: &str) -> std::result::Result<Self, String> {
        Ok(text.to_string())
    }
    fn show(&self) -> String {
        format!("{self:?}")
    }
}

macro_rules! define_flags {
    ($( $(#[doc = $doc:literal])+ $name:ident : $ty:ty = $default:expr; )*) => {
        /// Every flag of the tool, with db_bench's defaults.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Flags {
            $( $(#[doc = $doc])+ pub $name: $ty, )*
        }

        impl Default for Flags {
            fn default() -> Self {
                Flags { $( $name: $default, )* }
            }
        }

        /// Names of all flags, in the order `--help` lists them.
        pub const FLAG_NAMES: &[&str] = &[$( stringify!($name), )*];

        impl Flags {
            /// Sets flag `name` from `text`. `Ok(false)`: no such flag.
            fn set(&mut self, name: &str, text: &str) -> Result<bool> {
                match name {
                    $( stringify!($name) => {
                        self.$name = <$ty as FlagValue>::parse_flag(text).map_err(|want| {
                            Error::Usage(format!("invalid value {text:?} for --{name}: expected {want}"))
                        })?;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }

            /// Whether `name` is a boolean flag (`None`: unknown flag).
            fn is_bool(name: &str) -> Option<bool> {
                match name {
                    $( stringify!($name) => Some(<$ty as FlagValue>::IS_BOOL), )*
                    _ => None,
                }
            }

            /// `--help`: every flag with its type, default and meaning.
            pub fn help() -> String {
                let d = Flags::default();
                let mut out = String::new();
                $(
                    out.push_str(&format!(
                        "  --{}  (default: {})\n     {}\n",
                        stringify!($name),
                        FlagValue::show(&d.$name),
                        [$($doc),+].join(" ").trim()
                    ));
                )*
                out
            }
        }
    };
}

define_flags! {
    /// Comma-separated list of benchmarks to run in order (see the crate docs).
    benchmarks: String = "fillseq,fillsync,fillrandom,overwrite,readrandom,readseq,readreverse,seekrandom,compact,readrandom,readwhilewriting".into();
    /// Engine to benchmark: strata, or rocksdb when built with the `rocksdb` feature (ours).
    engine: String = "strata".into();
    /// Number of key/values to place in the database.
    num: i64 = 1_000_000;
    /// Number of read operations to do; negative: --num reads.
    reads: i64 = -1;
    /// Number of write operations to do; negative: --num writes.
    writes: i64 = -1;
    /// Number of delete operations to do; negative: --num deletes.
    deletes: i64 = -1;
    /// Seconds for the random-op benchmarks to run; 0: --num/--reads decide.
    duration: i32 = 0;
    /// Number of concurrent threads (read benchmarks; readwhilewriting adds a writer).
    threads: i32 = 1;
    /// Size of each key in bytes.
    key_size: i32 = 16;
    /// Size of each value in bytes.
    value_size: i32 = 100;
    /// Entries per write batch (and per delete batch).
    batch_size: i64 = 1;
    /// Database directory; empty: a new temporary directory (under /dev/shm if it exists).
    db: String = String::new();
    /// Open the existing database; benchmarks that need a fresh one are skipped.
    use_existing_db: bool = false;
    /// Keep the temporary database made when --db is empty (ours).
    keep_db: bool = false;
    /// Write without the write-ahead log.
    disable_wal: bool = false;
    /// Sync every write to disk.
    sync: bool = false;
    /// Block compression: none, snappy, lz4, zstd.
    compression_type: String = "snappy".into();
    /// Values shrink to this fraction of their size when compressed.
    compression_ratio: f64 = 0.5;
    /// Block cache bytes; <= 0: no block cache.
    cache_size: i64 = 32 << 20;
    /// RocksDB's block cache: hyper_clock_cache (= auto_hyper_clock_cache), fixed_hyper_clock_cache or lru_cache. Strata has one block cache and accepts every name.
    cache_type: String = "hyper_clock_cache".into();
    /// Bloom filter bits per key; negative: the default (none); 0: none.
    bloom_bits: i32 = -1;
    /// Target bytes of a data block.
    block_size: i32 = 4096;
    /// Keys between restart points in data blocks.
    block_restart_interval: i32 = 16;
    /// Keys between restart points in index blocks.
    index_block_restart_interval: i32 = 1;
    /// Bytes of a memtable before it is flushed.
    write_buffer_size: i64 = 64 << 20;
    /// Memtables (active + immutable) before writes stop.
    max_write_buffer_number: i32 = 2;
    /// Target size of L1 table files.
    target_file_size_base: i64 = 64 << 20;
    /// Growth of the target file size per level.
    target_file_size_multiplier: i32 = 1;
    /// Target bytes of L1.
    max_bytes_for_level_base: u64 = 256 << 20;
    /// Growth of the target bytes per level.
    max_bytes_for_level_multiplier: f64 = 10.0;
    /// Size level targets from the last level up.
    level_compaction_dynamic_level_bytes: bool = false;
    /// L0 files that start a compaction.
    level0_file_num_compaction_trigger: i32 = 4;
    /// L0 files that slow writes down.
    level0_slowdown_writes_trigger: i32 = 20;
    /// L0 files that stop writes.
    level0_stop_writes_trigger: i32 = 36;
    /// Never start compactions by themselves.
    disable_auto_compactions: bool = false;
    /// Background threads for flushes and compactions.
    max_background_jobs: i32 = 2;
    /// Threads one compaction out of level 0 (or a manual one) may split into.
    subcompactions: i32 = 1;
    /// Bytes a compaction reads ahead per input; -1: each engine's default (RocksDB 2 MiB, Strata adaptive).
    compaction_readahead_size: i64 = -1;
    /// Read tables with O_DIRECT (no page cache).
    use_direct_reads: bool = false;
    /// Write the tables of flushes and compactions with O_DIRECT.
    use_direct_io_for_flush_and_compaction: bool = false;
    /// Bytes per second flushes and compactions may write; 0: no limit.
    rate_limiter_bytes_per_sec: i64 = 0;
    /// Refill period of the rate limiter, in microseconds.
    rate_limiter_refill_period_us: i64 = 100000;
    /// Bytes (keys and values) per second the benchmark's own writers may put, over all of them (fills and readwhilewriting's writer); 0: no limit.
    benchmark_write_rate_limit: u64 = 0;
    /// Write the log of the next write group while the previous one fills the memtable (both engines; db_bench's default).
    enable_pipelined_write: bool = true;
    /// Let the writers of a write group insert their own batches into the
    /// memtable in parallel (both engines).
    allow_concurrent_memtable_write: bool = true;
    /// Table files kept open; -1: no limit.
    open_files: i32 = -1;
    /// Use binary search plus a hash index in data blocks (--data_block_index_type=1 is the same).
    use_data_block_hash_index: bool = false;
    /// Fill ratio of the data block hash index.
    data_block_hash_table_util_ratio: f64 = 0.75;
    /// Keep index and filter blocks in the block cache.
    cache_index_and_filter_blocks: bool = false;
    /// Pin L0 index and filter blocks in the block cache.
    pin_l0_filter_and_index_blocks_in_cache: bool = false;
    /// Verify the checksum of every block read.
    verify_checksum: bool = true;
    /// Check at open that every table file exists with its recorded size,
    /// and stop at a malformed log record whose checksum holds.
    paranoid_checks: bool = true;
    /// Average keys per prefix; 0: no prefix in keys.
    keys_per_prefix: i64 = 0;
    /// Bytes of the prefix when --keys_per_prefix > 0.
    prefix_size: i32 = 0;
    /// The merge operator of mergerandom and readrandommergerandom: uint64add, put or stringappend.
    merge_operator: String = "".into();
    /// Distinct keys of mergerandom and readrandommergerandom; negative: --num keys.
    merge_keys: i64 = -1;
    /// Percent of readrandommergerandom's operations that are merges (the rest are gets).
    mergereadpercent: i32 = 70;
    /// Writes before range deletions start (db_bench's flag).
    writes_before_delete_range: i64 = 0;
    /// Writes between range deletions; 0: none (db_bench's flag).
    writes_per_range_tombstone: i64 = 0;
    /// Keys in each range deletion's range (db_bench's flag).
    range_tombstone_width: i64 = 100;
    /// The most range deletions a write benchmark issues (db_bench's flag).
    max_num_range_tombstones: i64 = 0;
    /// Write keys num-1 down to 0 in fillseq (ours; db_bench has no such flag).
    seq_descending: bool = false;
    /// Added to every key number (ours: W4 writes streams one after another
    /// into different ranges of one database).
    key_offset: i64 = 0;
    /// Cut table files where the first N key bytes change: Strata's
    /// SstPartitionerFactory::fixed_prefix (ours; 0: no partitioner).
    sst_partitioner_fixed_prefix: i32 = 0;
    /// Strata's stream-aware cutting of flush and compaction outputs (ours).
    stream_aware_cutting: bool = true;
    /// Strata's read-triggered compactions of files that point lookups
    /// search in vain (ours, after LevelDB and Pebble).
    read_triggered_compactions: bool = true;
    /// With --use_direct_reads, Strata caches data blocks compressed, as
    /// stored (ours).
    cache_compressed_under_direct_reads: bool = true;
    /// Table format: block (both engines), packed (Strata's packed tables)
    /// or plain (RocksDB's PlainTable, as db_bench's --use_plain_table) (ours).
    table_format: String = "block".into();
    /// With --table_format=packed: the first level written packed (ours).
    packed_from_level: i32 = 0;
    /// Strata only: the database options come from this TOML file
    /// (`Options::from_file`) instead of the option flags, as db_bench's
    /// --options_file replaces its flags with a RocksDB OPTIONS file.
    options_file: String = String::new();
    /// Versions of each row in fillmvcc and mvccscan (W5; ours).
    versions_per_key: i64 = 1;
    /// How mvccscan goes from row to row: next, next_prefix, prev_prefix or seek_successor (W5; ours).
    scan_method: String = "next".into();
    /// Next() calls after each Seek() in seekrandom.
    seek_nexts: i32 = 0;
    /// Use Prev() rather than Next() after seeks.
    reverse_iterator: bool = false;
    /// Key stride within a batch of reads (readrandom with --batch_size > 1).
    multiread_stride: i64 = 0;
    /// Use the batched MultiGet API in multireadrandom (pinned values).
    multiread_batched: bool = false;
    /// Seed of the random generators; 0: from the clock.
    seed: i64 = 0;
    /// RocksDB perf context level, set in every benchmark thread: 1 disabled, 2 counts, 3-6 timers. Strata has no perf context and takes only 1.
    perf_level: i32 = 1;
    /// Print a histogram of operation latencies.
    histogram: bool = false;
    /// Report interim stats every N operations; 0: no interim reports.
    stats_interval: i64 = 0;
    /// Report interim stats every N seconds (overrides --stats_interval).
    stats_interval_seconds: i64 = 0;
    /// Show progress (a bar on stderr when it is a terminal and the run is long).
    progress_reports: bool = true;
}

/// Other names gflags-era tools used for the same flag.
const ALIASES: &[(&str, &str)] = &[("data_block_index_type", "use_data_block_hash_index")];

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Run with these flags.
    Run(Box<Flags>),
    /// Print the flags and exit.
    Help,
}

/// Parses `args` (without the program name).
pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Command> {
    let mut flags = Flags::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_ref();
        i += 1;
        let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            return Err(Error::Usage(format!(
                "unexpected argument {arg:?}: flags look like --name=value"
            )));
        };
        if body == "help" || body == "helpfull" || body == "h" {
            return Ok(Command::Help);
        }
        let (raw_name, value) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (body, None),
        };
        let name = canonical(raw_name);
        match (Flags::is_bool(name), value) {
            (Some(_), Some(v)) => {
                flags.set(name, v)?;
            }
            (Some(true), None) => {
                flags.set(name, "true")?;
            }
            (Some(false), None) => {
                let Some(v) = args.get(i) else {
                    return Err(Error::Usage(format!("flag --{name} is missing its value")));
                };
                i += 1;
                flags.set(name, v.as_ref())?;
            }
            (None, _) => {
                // gflags' --noflag sets a boolean flag to false.
                let negated = raw_name.strip_prefix("no").map(canonical);
                match (negated, value) {
                    (Some(n), None) if Flags::is_bool(n) == Some(true) => {
                        flags.set(n, "false")?;
                    }
                    _ => return Err(unknown_flag(raw_name)),
                }
            }
        }
    }
    Ok(Command::Run(Box::new(flags)))
}

fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, real)| real)
}

/// The error for an unknown flag, naming the most similar known one.
fn unknown_flag(name: &str) -> Error {
    let closest = FLAG_NAMES
        .iter()
        .chain(ALIASES.iter().map(|(a, _)| a))
        .map(|known| (strsim::jaro_winkler(name, known), *known))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((score, known)) if score > 0.7 => Error::Usage(format!(
            "unknown flag --{name}; did you mean --{known}? (--help lists all flags)"
        )),
        _ => Error::Usage(format!("unknown flag --{name} (--help lists all flags)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Flags {
        match parse(args).unwrap() {
            Command::Run(f) => *f,
            Command::Help => panic!("help"),
        }
    }

    #[test]
    fn both_dash_forms_and_value_forms() {
        let f = run(&["--num=42", "-reads=7", "--key_size", "8", "-db", "/tmp/x"]);
        assert_eq!((f.num, f.reads, f.key_size), (42, 7, 8));
        assert_eq!(f.db, "/tmp/x");
        let f = run(&["-benchmarks=fillseq,readrandom", "--compression_ratio=0.25"]);
        assert_eq!(f.benchmarks, "fillseq,readrandom");
        assert_eq!(f.compression_ratio, 0.25);
        assert_eq!(f.value_size, 100, "defaults are db_bench's");
    }

    #[test]
    fn booleans() {
        for (arg, want) in [
            ("--histogram=1", true),
            ("--histogram=0", false),
            ("--histogram=true", true),
            ("-histogram=false", false),
            ("--histogram", true),
            ("--nohistogram", false),
        ] {
            assert_eq!(run(&[arg]).histogram, want, "{arg}");
        }
        // A bare boolean does not swallow the next argument.
        let f = run(&["--use_existing_db", "--num=3"]);
        assert!(f.use_existing_db);
        assert_eq!(f.num, 3);
        assert!(parse(&["--sync=maybe"]).is_err());
    }

    #[test]
    fn alias_for_the_hash_index_flag() {
        assert!(run(&["--data_block_index_type=1"]).use_data_block_hash_index);
        assert!(!run(&["--use_data_block_hash_index=0"]).use_data_block_hash_index);
    }

    #[test]
    fn unknown_flag_names_the_closest() {
        let e = parse(&["--num_keys=5"]).unwrap_err().to_string();
        assert!(e.contains("unknown flag --num_keys"), "{e}");
        let e = parse(&["--bloom_bit=10"]).unwrap_err().to_string();
        assert!(e.contains("did you mean --bloom_bits?"), "{e}");
        let e = parse(&["-write_buffer=1"]).unwrap_err().to_string();
        assert!(e.contains("did you mean --write_buffer_size?"), "{e}");
        let e = parse(&["--max_background_compactions=4"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean --max_background_jobs?"), "{e}");
    }

    #[test]
    fn malformed_values_and_arguments() {
        let e = parse(&["--num=many"]).unwrap_err().to_string();
        assert!(e.contains("invalid value \"many\" for --num"), "{e}");
        assert!(parse(&["--num"]).is_err(), "missing value");
        assert!(parse(&["fillseq"]).is_err(), "positional argument");
        assert!(parse(&["--nonum"]).is_err(), "--no only for booleans");
        assert_eq!(parse(&["--help"]).unwrap(), Command::Help);
    }

    #[test]
    fn help_lists_every_flag() {
        let h = Flags::help();
        for name in FLAG_NAMES {
            assert!(h.contains(&format!("--{name} ")), "{name}");
        }
    }
}
