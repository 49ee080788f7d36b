//! The run: db_bench's `Benchmark::Run`. Opens the database, prints the
//! header, then runs each benchmark of `--benchmarks` in order, in its
//! threads, and prints its result line.

mod duration;
mod mvcc;
mod ops;

pub use mvcc::{ScanMethod, ROW_BYTES};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::engine::{self, Engine, EngineConfig, WriteMode};
use crate::error::{Error, Result};
use crate::flags::Flags;
use crate::keys::{KeyFormat, WriteOrder};
use crate::progress::Progress;
use crate::random::Random64;
use crate::stats::{Reporting, Stats};
use crate::values::ValueGenerator;

use ops::{Method, Params, Shared, ThreadState, WritePace};

/// Every benchmark name the tool runs.
pub const BENCHMARKS: &[&str] = &[
    "fillseq",
    "appendseq",
    "fillrandom",
    "filluniquerandom",
    "fillsync",
    "overwrite",
    "readseq",
    "readreverse",
    "readrandom",
    "readmissing",
    "multireadrandom",
    "seekrandom",
    "readwhilewriting",
    "deleterandom",
    "mergerandom",
    "readrandommergerandom",
    "fillseekseq",
    "fillmvcc",
    "mvccscan",
    "fillseqingest",
    "checkpoint",
    "flush",
    "compact",
    "waitforcompaction",
    "stats",
    "levelstats",
    "sstables",
    "memstats",
];

/// The properties `memstats` prints (engine-neutral names).
const MEMSTATS: [&str; 4] = [
    "cur-size-all-mem-tables",
    "block-cache-usage",
    "block-cache-capacity",
    "estimate-table-readers-mem",
];

/// How long `waitforcompaction` lets background threads wake up before it
/// waits, as db_bench (5 s).
const WAIT_FOR_COMPACTION_SLEEP: std::time::Duration = std::time::Duration::from_secs(5);

/// What one benchmark name does.
enum Action {
    /// Run `method` in threads and print a result line.
    Run {
        method: Method,
        fresh_db: bool,
        threads: usize,
    },
    /// A meta-operation that prints something and measures nothing.
    Meta,
}

/// The database directory: given, or a temporary one removed at the end.
enum DbDir {
    Given(PathBuf),
    Temp { dir: tempfile::TempDir, keep: bool },
}

impl DbDir {
    fn path(&self) -> PathBuf {
        match self {
            DbDir::Given(p) => p.clone(),
            DbDir::Temp { dir, .. } => dir.path().join("dbbench"),
        }
    }

    fn new(flags: &Flags) -> Result<DbDir> {
        if !flags.db.is_empty() {
            return Ok(DbDir::Given(PathBuf::from(&flags.db)));
        }
        let shm = Path::new("/dev/shm");
        let parent = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = tempfile::Builder::new()
            .prefix("strata-bench-")
            .tempdir_in(&parent)?;
        Ok(DbDir::Temp {
            dir,
            keep: flags.keep_db,
        })
    }

    /// Removes a temporary directory unless it is to be kept.
    fn finish(self) {
        if let DbDir::Temp { dir, keep: true } = self {
            let path = dir.keep();
            eprintln!(
                "strata-bench: database kept in {}",
                path.join("dbbench").display()
            );
        }
    }
}

/// One run of the tool.
pub struct Runner<'o> {
    flags: Flags,
    engine_name: String,
    config: EngineConfig,
    key_format: KeyFormat,
    seed_base: u64,
    threads_started: u64,
    db_path: PathBuf,
    engine: Option<Box<dyn Engine>>,
    out: &'o mut dyn Write,
    /// (writes, key space) of the fillrandom that made the database, if
    /// that is how it was filled in this run.
    random_fill: Option<(u64, u64)>,
}

impl std::fmt::Debug for Runner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("engine", &self.engine_name)
            .field("db_path", &self.db_path)
            .finish_non_exhaustive()
    }
}

/// Most benchmark threads. Far more than a benchmark can use, and far
/// below where Linux runs out of memory maps for thread stacks (two each,
/// 65,530 by default): there Rust's runtime aborts inside the new thread
/// instead of returning a spawn error.
const MAX_THREADS: i32 = 10_000;

fn check_flags(f: &Flags) -> Result<()> {
    let bad = |m: String| Err(Error::Usage(m));
    if f.use_existing_db && f.db.is_empty() {
        return bad("--use_existing_db=1 needs --db: without it the tool makes a fresh, empty temporary database".into());
    }
    if f.num <= 0 {
        return bad(format!("--num must be positive, got {}", f.num));
    }
    if f.threads <= 0 || f.threads > MAX_THREADS {
        return bad(format!(
            "--threads must be 1 to {MAX_THREADS}, got {}",
            f.threads
        ));
    }
    if f.batch_size <= 0 {
        return bad(format!(
            "--batch_size must be positive, got {}",
            f.batch_size
        ));
    }
    if f.key_size <= 0 {
        return bad(format!("--key_size must be positive, got {}", f.key_size));
    }
    if f.value_size < 0 || f.prefix_size < 0 || f.keys_per_prefix < 0 {
        return bad(
            "--value_size, --prefix_size and --keys_per_prefix must not be negative".into(),
        );
    }
    if f.key_offset < 0 || f.sst_partitioner_fixed_prefix < 0 {
        return bad("--key_offset and --sst_partitioner_fixed_prefix must not be negative".into());
    }
    if !(0.0..=1.0).contains(&f.compression_ratio) || f.compression_ratio.is_nan() {
        return bad(format!(
            "--compression_ratio must be between 0 and 1, got {}",
            f.compression_ratio
        ));
    }
    if f.versions_per_key <= 0 {
        return bad(format!(
            "--versions_per_key must be positive, got {}",
            f.versions_per_key
        ));
    }
    ScanMethod::parse(&f.scan_method)?;
    if f.keys_per_prefix > f.num {
        return bad(format!(
            "--keys_per_prefix={} exceeds --num={}: there would be no prefix",
            f.keys_per_prefix, f.num
        ));
    }
    for name in f.benchmarks.split(',').filter(|n| !n.is_empty()) {
        if !BENCHMARKS.contains(&name) {
            let closest = BENCHMARKS
                .iter()
                .map(|b| (strsim::jaro_winkler(name, b), *b))
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .filter(|(score, _)| *score > 0.7)
                .map_or(String::new(), |(_, b)| format!("; did you mean {b}?"));
            return bad(format!(
                "unknown benchmark '{name}'{closest} (known: {})",
                BENCHMARKS.join(", ")
            ));
        }
    }
    Ok(())
}

impl<'o> Runner<'o> {
    /// Checks the flags and the engine; opens nothing yet.
    pub fn new(flags: Flags, out: &'o mut dyn Write) -> Result<Runner<'o>> {
        check_flags(&flags)?;
        let config = EngineConfig::from_flags(&flags)?;
        engine::check(&flags.engine, &config)?;
        let key_format = KeyFormat::new(
            flags.key_size as usize,
            flags.prefix_size as usize,
            flags.keys_per_prefix as u64,
        )?
        .with_offset(flags.key_offset as u64);
        Ok(Runner {
            engine_name: flags.engine.clone(),
            config,
            key_format,
            seed_base: 0,
            threads_started: 0,
            db_path: PathBuf::new(),
            engine: None,
            flags,
            out,
            random_fill: None,
        })
    }

    /// Runs every benchmark of `--benchmarks`.
    pub fn run(mut self) -> Result<()> {
        let dir = DbDir::new(&self.flags)?;
        self.db_path = dir.path();
        let result = self.run_in();
        // Close the database before its directory goes.
        self.engine = None;
        dir.finish();
        result
    }

    fn run_in(&mut self) -> Result<()> {
        self.seed_base = if self.flags.seed == 0 {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_micros() as u64);
            writeln!(self.out, "Set seed to {now} because --seed was 0")?;
            now
        } else {
            self.flags.seed as u64
        };
        print_environment(&mut *self.out, &self.engine_name)?;
        if !self.flags.use_existing_db {
            engine::destroy(&self.engine_name, &self.config, &self.db_path)?;
        }
        self.open(!self.flags.use_existing_db)?;
        self.print_header()?;
        let names: Vec<String> = self
            .flags
            .benchmarks
            .split(',')
            .map(str::to_string)
            .collect();
        for name in names.iter().filter(|n| !n.is_empty()) {
            self.run_one(name)?;
        }
        Ok(())
    }

    fn open(&mut self, create: bool) -> Result<()> {
        self.engine = None;
        self.engine = Some(engine::open(
            &self.engine_name,
            &self.config,
            &self.db_path,
            create,
        )?);
        Ok(())
    }

    fn engine(&self) -> &dyn Engine {
        self.engine
            .as_deref()
            .expect("engine opened before benchmarks run")
    }

    /// db_bench's `PrintHeader` (stdout).
    fn print_header(&mut self) -> Result<()> {
        let f = &self.flags;
        let (key_size, value_size) = (f.key_size as f64, f.value_size as f64);
        let num = f.num as f64;
        let out = &mut *self.out;
        writeln!(
            out,
            "Keys:       {} bytes each (+ 0 bytes user-defined timestamp)",
            f.key_size
        )?;
        writeln!(
            out,
            "Values:     {} bytes each ({} bytes after compression)",
            f.value_size,
            (value_size * f.compression_ratio + 0.5) as i64
        )?;
        writeln!(out, "Entries:    {}", f.num)?;
        writeln!(out, "Prefix:    {} bytes", f.prefix_size)?;
        writeln!(out, "Keys per prefix:    {}", f.keys_per_prefix)?;
        writeln!(
            out,
            "RawSize:    {:.1} MB (estimated)",
            (key_size + value_size) * num / 1_048_576.0
        )?;
        writeln!(
            out,
            "FileSize:   {:.1} MB (estimated)",
            (key_size + value_size * f.compression_ratio) * num / 1_048_576.0
        )?;
        // db_bench prints its rate limits here even when unset (0); the tool
        // has no rate limits, and a "0 bytes/second" reads as a measurement.
        writeln!(
            out,
            "Compression: {}",
            self.config.compression.header_name()
        )?;
        writeln!(out, "Engine:     {}", self.engine_name)?;
        writeln!(out, "Storage:    {}", storage_of(&self.db_path))?;
        if self.config.cache_size == 0 {
            writeln!(out, "Block cache: none")?;
        } else if self.engine_name == "strata" {
            writeln!(
                out,
                "Block cache: {} bytes, Strata's sharded LRU",
                self.config.cache_size
            )?;
        } else {
            writeln!(
                out,
                "Block cache: {} bytes, {}",
                self.config.cache_size,
                self.config.cache_type.name()
            )?;
        }
        if self.engine_name != "strata" {
            writeln!(
                out,
                "Pipelined write: {}",
                self.config.enable_pipelined_write
            )?;
        }
        writeln!(out, "Perf Level: {}", f.perf_level)?;
        writeln!(out, "Build:      {}", build_line())?;
        for w in build_warnings() {
            writeln!(out, "WARNING: {w}")?;
        }
        writeln!(out, "------------------------------------------------")?;
        Ok(())
    }

    /// The parameters db_bench resets before each benchmark.
    fn params(&self) -> Params {
        let f = &self.flags;
        let num = f.num as u64;
        let or_num = |v: i64| if v < 0 { num } else { v as u64 };
        Params {
            num,
            flags_num: num,
            reads: or_num(f.reads),
            writes: or_num(f.writes),
            deletes: or_num(f.deletes),
            key_format: self.key_format,
            value_size: f.value_size as usize,
            compression_ratio: f.compression_ratio,
            batch_size: f.batch_size as u64,
            write_mode: WriteMode {
                sync: f.sync,
                disable_wal: f.disable_wal,
            },
            duration_secs: f.duration.max(0) as u64,
            seek_nexts: f.seek_nexts.max(0) as u64,
            reverse_iterator: f.reverse_iterator,
            multiread_stride: f.multiread_stride.max(0) as u64,
            multiread_batched: f.multiread_batched,
            seq_descending: f.seq_descending,
            versions_per_key: f.versions_per_key.max(1) as u64,
            readwrites: if f.reads < 0 && f.writes < 0 {
                num
            } else {
                or_num(f.reads).max(or_num(f.writes))
            },
            merge_keys: if f.merge_keys < 0 {
                num
            } else {
                f.merge_keys as u64
            },
            merge_percent: f.mergereadpercent.clamp(0, 100) as u64,
            range_dels: ops::RangeDels {
                before: f.writes_before_delete_range.max(0) as u64,
                per: f.writes_per_range_tombstone.max(0) as u64,
                width: f.range_tombstone_width.max(0) as u64,
                max: f.max_num_range_tombstones.max(0) as u64,
            },
            seed_base: self.seed_base,
        }
    }

    /// What benchmark `name` does; adjusts `p` as db_bench does per name.
    /// Meta-operations (flush, stats, ...) run here.
    fn action(&mut self, name: &str, p: &mut Params) -> Result<Action> {
        let threads = self.flags.threads as usize;
        let write = |order| Action::Run {
            method: Method::Write(order),
            fresh_db: true,
            threads,
        };
        let run = |method| Action::Run {
            method,
            fresh_db: false,
            threads,
        };
        Ok(match name {
            "fillseq" => write(WriteOrder::Sequential { descending: false }),
            // fillseq's writes into the database as it is (ours: W4's
            // sequential runs; db_bench's fills always start fresh).
            "appendseq" => run(Method::Write(WriteOrder::Sequential { descending: false })),
            "fillrandom" => write(WriteOrder::Random),
            "filluniquerandom" => {
                if threads > 1 {
                    eprintln!("filluniquerandom multithreaded not supported, use 1 thread");
                }
                Action::Run {
                    method: Method::Write(WriteOrder::UniqueRandom),
                    fresh_db: true,
                    threads: 1,
                }
            }
            "fillsync" => {
                // Synced writes of num/1000 random keys. (Recent db_bench
                // versions keep --num writes here, over num/1000 keys; the
                // num/1000 writes are LevelDB's and older db_bench's.)
                p.num /= 1000;
                p.writes = p.num;
                p.write_mode.sync = true;
                write(WriteOrder::Random)
            }
            "overwrite" => run(Method::Write(WriteOrder::Random)),
            "readseq" => run(Method::ReadSequential),
            "readreverse" => run(Method::ReadReverse),
            "readrandom" => run(Method::ReadRandom),
            "readmissing" => {
                // One byte longer than every key written: all misses.
                p.key_format = p.key_format.with_key_size(p.key_format.key_size() + 1);
                run(Method::ReadRandom)
            }
            "multireadrandom" => run(Method::MultiReadRandom),
            "seekrandom" => run(Method::SeekRandom),
            "deleterandom" => run(Method::DeleteRandom),
            "mergerandom" | "readrandommergerandom" => {
                if self.config.merge_operator.is_none() {
                    return Err(Error::Usage(format!(
                        "--benchmarks={name} needs --merge_operator (uint64add, put or stringappend)"
                    )));
                }
                if p.merge_keys == 0 {
                    return Err(Error::Usage("--merge_keys must not be 0".into()));
                }
                run(if name == "mergerandom" {
                    Method::MergeRandom
                } else {
                    Method::ReadRandomMergeRandom
                })
            }
            "readwhilewriting" => Action::Run {
                method: Method::ReadWhileWriting,
                fresh_db: false,
                threads: threads + 1,
            },
            "fillseekseq" => run(Method::FillSeekSeq),
            // One writer and one scanner: the rows are written in order.
            "fillmvcc" => Action::Run {
                method: Method::FillMvcc,
                fresh_db: true,
                threads: 1,
            },
            "mvccscan" => Action::Run {
                method: Method::MvccScan(ScanMethod::parse(&self.flags.scan_method)?),
                fresh_db: false,
                threads: 1,
            },
            // One compaction of everything, not one per --threads thread.
            "compact" => Action::Run {
                method: Method::Compact,
                fresh_db: false,
                threads: 1,
            },
            "fillseqingest" => self.fill_by_ingestion(p)?,
            "checkpoint" => self.checkpoint()?,
            "flush" => {
                self.engine().flush()?;
                writeln!(self.out, "flush memtable")?;
                Action::Meta
            }
            "waitforcompaction" => {
                self.wait_for_compaction()?;
                Action::Meta
            }
            "stats" => self.print_property("stats")?,
            "levelstats" => self.print_property("levelstats")?,
            "sstables" => self.print_property("sstables")?,
            "memstats" => self.print_memstats()?,
            other => return Err(Error::Usage(format!("unknown benchmark '{other}'"))),
        })
    }

    fn run_one(&mut self, name: &str) -> Result<()> {
        let mut p = self.params();
        let action = self.action(name, &mut p)?;
        let Action::Run {
            method,
            fresh_db,
            threads,
        } = action
        else {
            return Ok(());
        };
        if fresh_db && !self.fresh_database(name)? {
            return Ok(());
        }
        writeln!(self.out, "DB path: [{}]", self.db_path.display())?;
        let stats = self.run_benchmark(name, method, threads, &p)?;
        self.out.write_all(stats.report(name).as_bytes())?;
        match method {
            Method::Write(WriteOrder::Random) if fresh_db => {
                self.random_fill = Some((p.writes.max(1) * threads as u64, p.num));
            }
            Method::Write(_) if fresh_db => self.random_fill = None,
            Method::ReadRandom | Method::MultiReadRandom => {
                if let Some((writes, keys)) = self.random_fill {
                    // The "(found of read)" count after fillrandom is not
                    // data loss: random keys repeat.
                    let exist = 1.0 - (-(writes as f64) / keys as f64).exp();
                    writeln!(
                        self.out,
                        "  note: {name} reads keys that {} random writes chose from {keys}; they repeat, so about {:.0}% of the key space exists",
                        writes,
                        exist * 100.0
                    )?;
                }
            }
            _ => {}
        }
        self.out.flush()?;
        Ok(())
    }

    /// Replaces the database with an empty one for a fill, as db_bench's
    /// fills do; false (and a line saying so) with `--use_existing_db`.
    fn fresh_database(&mut self, name: &str) -> Result<bool> {
        if self.flags.use_existing_db {
            writeln!(self.out, "{name:<12} : skipped (--use_existing_db is true)")?;
            return Ok(false);
        }
        self.engine = None;
        engine::destroy(&self.engine_name, &self.config, &self.db_path)?;
        self.open(true)?;
        Ok(true)
    }

    /// Ours: `--num` sequential keys (fillseq's keys and values) written
    /// to table files of `--target_file_size_base` bytes with the engine's
    /// table-file writer, in a directory beside the database, then
    /// ingested (moved) into a fresh database. Reports micros per key over
    /// both phases, and each phase's time.
    fn fill_by_ingestion(&mut self, p: &Params) -> Result<Action> {
        if !self.fresh_database("fillseqingest")? {
            return Ok(Action::Meta);
        }
        let staging = self.db_path.with_extension("ingest");
        let _ = std::fs::remove_dir_all(&staging);
        let mut values = ValueGenerator::new(p.value_size, p.compression_ratio);
        let mut i = 0u64;
        let num = p.num;
        let key_format = p.key_format;
        let mut next = |key: &mut Vec<u8>, value: &mut Vec<u8>| {
            if i >= num {
                return false;
            }
            key.resize(key_format.key_size(), 0);
            key_format.fill(i, num, key);
            value.clear();
            value.extend_from_slice(values.generate());
            i += 1;
            true
        };
        let file_bytes = self.config.target_file_size_base.max(1 << 20);
        let (wrote, ingested) = self
            .engine()
            .write_and_ingest(&staging, file_bytes, &mut next)?;
        let _ = std::fs::remove_dir_all(&staging);
        let total = wrote + ingested;
        let micros = total.as_secs_f64() * 1e6 / num.max(1) as f64;
        let mb = (num as f64 * (key_format.key_size() + p.value_size) as f64) / 1048576.0;
        writeln!(
            self.out,
            "fillseqingest : {micros:11.3} micros/op {:.0} ops/sec {:8.3} seconds {num} operations; {:5.1} MB/s (tables written in {:.3} s, ingested in {:.3} s)",
            num as f64 / total.as_secs_f64().max(1e-9),
            total.as_secs_f64(),
            mb / total.as_secs_f64().max(1e-9),
            wrote.as_secs_f64(),
            ingested.as_secs_f64()
        )?;
        self.random_fill = None;
        Ok(Action::Meta)
    }

    /// Ours: a checkpoint of the database into `<db>.checkpoint` (made
    /// anew), its time, and the bytes it takes beyond the hard-linked
    /// tables.
    fn checkpoint(&mut self) -> Result<Action> {
        let dir = self.db_path.with_extension("checkpoint");
        let _ = std::fs::remove_dir_all(&dir);
        let start = std::time::Instant::now();
        self.engine().checkpoint(&dir)?;
        let took = start.elapsed();
        let (mut linked, mut copied) = (0u64, 0u64);
        for entry in std::fs::read_dir(&dir)? {
            let meta = entry?.metadata()?;
            if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
                linked += meta.len();
            } else {
                copied += meta.len();
            }
        }
        writeln!(
            self.out,
            "checkpoint   : {:8.3} seconds; {linked} bytes hard-linked, {copied} bytes written",
            took.as_secs_f64()
        )?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(Action::Meta)
    }

    fn wait_for_compaction(&mut self) -> Result<()> {
        // As db_bench: give background threads a chance to wake first.
        std::thread::sleep(WAIT_FOR_COMPACTION_SLEEP);
        let path = self.db_path.display().to_string();
        writeln!(self.out, "waitforcompaction({path}): started")?;
        let status = match self.engine().wait_for_compaction() {
            Ok(()) => "OK".to_string(),
            Err(e) => e.to_string(),
        };
        writeln!(
            self.out,
            "waitforcompaction({path}): finished with status ({status})"
        )?;
        Ok(())
    }

    /// db_bench's `PrintStats`: the property, between empty lines.
    fn print_property(&mut self, name: &str) -> Result<Action> {
        let text = match self.engine().property(name)? {
            Some(t) => t,
            None if name == "levelstats" => {
                level_stats_from_counts(&self.engine().level_file_counts()?)
            }
            None => "(failed)".to_string(),
        };
        writeln!(self.out, "\n{text}")?;
        Ok(Action::Meta)
    }

    /// Where the engine's memory is, by the properties both engines have:
    /// memtables, block cache, and table readers outside the cache; then
    /// what the C allocator holds for the whole process, where it can say.
    fn print_memstats(&mut self) -> Result<Action> {
        writeln!(self.out)?;
        for name in MEMSTATS {
            let value = self.engine().property(name)?;
            writeln!(
                self.out,
                "{name}: {}",
                value.as_deref().unwrap_or("(failed)")
            )?;
        }
        if let Some(line) = crate::stats::allocator_line() {
            writeln!(self.out, "{line}")?;
        }
        Ok(Action::Meta)
    }

    /// db_bench's `RunBenchmark`: starts `n` threads together (once all
    /// have arrived at the start gate), waits for them, merges their stats.
    fn run_benchmark(&mut self, name: &str, method: Method, n: usize, p: &Params) -> Result<Stats> {
        let f = &self.flags;
        let total_ops = self.expected_ops(method, n, p);
        let reporting = Arc::new(Reporting {
            histogram: f.histogram,
            stats_interval_ops: if f.stats_interval_seconds > 0 {
                // db_bench: with a time interval, check the clock every 1000 ops.
                1000
            } else {
                f.stats_interval.max(0) as u64
            },
            stats_interval_seconds: f.stats_interval_seconds.max(0) as u64,
            progress: Progress::start(name, total_ops, f.progress_reports),
        });
        // Thread k of the whole run (from 1) seeds with seed + k, as db_bench.
        let first_thread = self.threads_started;
        self.threads_started += n as u64;
        let seed_base = self.seed_base;
        let mut states: Vec<ThreadState> = (0..n)
            .map(|tid| ThreadState {
                tid,
                rand: Random64::new(seed_base.wrapping_add(first_thread + tid as u64 + 1)),
                stats: Stats::new(tid, reporting.clone()),
            })
            .collect();
        let shared = Shared {
            engine: self.engine(),
            params: p,
            num_done: AtomicUsize::new(0),
            num_threads: n,
            write_pace: WritePace::new(self.flags.benchmark_write_rate_limit),
        };
        let gate = StartGate::default();
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let mut handles = Vec::with_capacity(n);
            let mut spawn_error = None;
            for th in states.iter_mut() {
                let (shared, gate) = (&shared, &gate);
                let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                    shared.engine.thread_start();
                    if !gate.wait() {
                        return Ok(());
                    }
                    th.stats.start();
                    let r = ops::run(method, shared, th);
                    th.stats.stop();
                    shared.num_done.fetch_add(1, Ordering::AcqRel);
                    r
                });
                match spawned {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        spawn_error = Some(e);
                        break;
                    }
                }
            }
            // Every thread starts together, or none does: threads already
            // spawned must not wait forever for one that never came.
            match spawn_error {
                None => gate.open_when_arrived(handles.len()),
                Some(_) => gate.abandon(),
            }
            let mut results: Vec<Result<()>> = handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Usage(format!("{name}: a benchmark thread panicked")))
                    })
                })
                .collect();
            if let Some(e) = spawn_error {
                results.push(Err(Error::Usage(format!(
                    "{name}: cannot start thread {} of {n}: {e}",
                    results.len() + 1
                ))));
            }
            results
        });
        if let Some(p) = &reporting.progress {
            p.finish();
        }
        results.into_iter().collect::<Result<Vec<()>>>()?;
        let stats: Vec<Stats> = states.into_iter().map(|t| t.stats).collect();
        Ok(Stats::merge_all(&stats).expect("at least one thread is merged"))
    }

    /// Operations the progress bar expects (`None`: bounded by time).
    fn expected_ops(&self, method: Method, n: usize, p: &Params) -> Option<u64> {
        let timed = p.duration_secs > 0;
        let per_thread = match method {
            Method::Write(WriteOrder::Random) if timed => return None,
            Method::Write(_) => p.writes,
            Method::ReadSequential | Method::ReadReverse => p.reads.min(p.num),
            Method::ReadRandom
            | Method::MultiReadRandom
            | Method::SeekRandom
            | Method::DeleteRandom
            | Method::MergeRandom
            | Method::ReadRandomMergeRandom
                if timed =>
            {
                return None
            }
            Method::ReadRandom | Method::MultiReadRandom | Method::SeekRandom => p.reads,
            Method::DeleteRandom => p.deletes,
            Method::MergeRandom | Method::ReadRandomMergeRandom => p.readwrites,
            Method::ReadWhileWriting if timed => return None,
            Method::ReadWhileWriting => return Some(p.reads * (n as u64 - 1)),
            Method::FillSeekSeq => 2 * p.flags_num,
            Method::FillMvcc => mvcc::rows(p.num, p.versions_per_key) * p.versions_per_key,
            Method::MvccScan(_) => mvcc::rows(p.num, p.versions_per_key),
            Method::Compact => 1,
        };
        Some(per_thread * n as u64)
    }
}

/// Holds benchmark threads until all have arrived, then lets them all go
/// together (db_bench waits for every thread to initialize before it
/// starts the clock), or sends them home if one could not be spawned.
#[derive(Default)]
struct StartGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    arrived: usize,
    /// `None` while closed; `Some(go)` once decided.
    decision: Option<bool>,
}

impl StartGate {
    /// Arrives and waits for the decision; true means run.
    fn wait(&self) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.arrived += 1;
        self.changed.notify_all();
        loop {
            if let Some(go) = st.decision {
                return go;
            }
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Once `n` threads have arrived, lets them run.
    fn open_when_arrived(&self, n: usize) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.arrived < n {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.decision = Some(true);
        self.changed.notify_all();
    }

    /// Sends every waiting (and later) thread home.
    fn abandon(&self) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .decision = Some(false);
        self.changed.notify_all();
    }
}

/// `levelstats` for an engine without the property: files per level only,
/// in RocksDB's layout.
fn level_stats_from_counts(counts: &[u64]) -> String {
    let mut s = String::from("Level Files Size(MB)\n--------------------\n");
    for (level, n) in counts.iter().enumerate() {
        s.push_str(&format!("{level:>3} {n:>8} {:>8}\n", "?"));
    }
    s
}

/// How this binary was compiled: what a figure depends on besides the code.
pub fn build_line() -> String {
    let features: Vec<&str> = [
        ("sse4.2", cfg!(target_feature = "sse4.2")),
        ("avx2", cfg!(target_feature = "avx2")),
        ("bmi2", cfg!(target_feature = "bmi2")),
    ]
    .into_iter()
    .filter_map(|(name, on)| on.then_some(name))
    .collect();
    format!(
        "{}, target features: {}",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        if features.is_empty() {
            "baseline x86-64 (no -C target-cpu=native)".to_string()
        } else {
            features.join(" ")
        }
    )
}

/// db_bench's `PrintWarnings`, for this build.
fn build_warnings() -> Vec<&'static str> {
    let mut w = Vec::new();
    if cfg!(debug_assertions) {
        w.push("Optimization is disabled: benchmarks unnecessarily slow");
    }
    if cfg!(all(target_arch = "x86_64", not(target_feature = "sse4.2"))) {
        w.push(
            "built without RUSTFLAGS=\"-C target-cpu=native\": a RocksDB engine in this \
             binary runs a software CRC32C (see bench/compare.sh)",
        );
    }
    w
}

/// db_bench's `PrintEnvironment` (stderr).
/// The kind of file system `path` (or its nearest existing ancestor) is
/// on, from `/proc/mounts`: `tmpfs (memory)` or the disk's file system.
fn storage_of(path: &Path) -> String {
    let mut at = path.to_path_buf();
    let canonical = loop {
        if let Ok(c) = at.canonicalize() {
            break c;
        }
        if !at.pop() {
            return "unknown".into();
        }
    };
    let Ok(mounts) = std::fs::read_to_string("/proc/mounts") else {
        return "unknown".into();
    };
    let best = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, point, kind) = (f.next()?, f.next()?, f.next()?);
            canonical
                .starts_with(point)
                .then(|| (point.len(), point.to_string(), kind.to_string()))
        })
        .max_by_key(|(len, _, _)| *len);
    match best {
        Some((_, point, kind)) if kind == "tmpfs" || kind == "ramfs" => {
            format!("{kind} at {point} (memory: reads never wait for a disk)")
        }
        Some((_, point, kind)) => format!("{kind} at {point}"),
        None => "unknown".into(),
    }
}

/// The lines db_bench prints first (version, date, CPU), on the report
/// with the rest of the header (db_bench sends these to stderr).
fn print_environment(out: &mut dyn Write, engine_name: &str) -> Result<()> {
    writeln!(out, "{}", engine::version_line(engine_name))?;
    writeln!(
        out,
        "Date:       {}",
        crate::stats::time_to_string(SystemTime::now())
    )?;
    if let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") {
        let field = |line: &str| {
            line.split_once(':')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        };
        let mut cpus = 0;
        let (mut model, mut cache) = (String::new(), String::new());
        for (k, v) in cpuinfo.lines().filter_map(field) {
            match k.as_str() {
                "model name" => {
                    cpus += 1;
                    model = v;
                }
                "cache size" => cache = v,
                _ => {}
            }
        }
        writeln!(out, "CPU:        {cpus} * {model}")?;
        writeln!(out, "CPUCache:   {cache}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiters(go: bool) -> Vec<bool> {
        let gate = StartGate::default();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..3).map(|_| s.spawn(|| gate.wait())).collect();
            if go {
                gate.open_when_arrived(3);
                let arrived = gate.state.lock().unwrap().arrived;
                assert_eq!(arrived, 3, "opened before every thread arrived");
            } else {
                gate.abandon();
            }
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn thread_counts_outside_what_can_start_are_usage_errors() {
        for (threads, ok) in [
            (0, false),
            (1, true),
            (MAX_THREADS, true),
            (MAX_THREADS + 1, false),
        ] {
            let f = Flags {
                threads,
                ..Flags::default()
            };
            assert_eq!(check_flags(&f).is_ok(), ok, "--threads={threads}");
        }
    }

    #[test]
    fn start_gate_releases_every_waiter_either_way() {
        assert_eq!(waiters(true), [true; 3]);
        assert_eq!(
            waiters(false),
            [false; 3],
            "an abandoned start does not hang"
        );
        // A thread that arrives after the decision does not wait.
        let gate = StartGate::default();
        gate.abandon();
        assert!(!gate.wait());
    }
}
