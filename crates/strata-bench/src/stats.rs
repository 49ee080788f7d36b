//! Per-thread measurements and db_bench's result line (`Stats` in RocksDB's
//! `tools/db_bench_tool.cc`):
//!
//! ```text
//! readrandom   :       3.096 micros/op 322935 ops/sec 3.097 seconds 1000000 operations;   35.7 MB/s (1000000 of 1000000 found)
//! ```
//!
//! `micros/op` is the sum of the threads' busy seconds over the operations
//! done (so it is per-thread latency); `ops/sec` is operations over the wall
//! time from the first thread's start to the last one's finish; `MB/s` is
//! key and value bytes over that wall time. With `--histogram=1` each
//! thread times every operation, by kind, as db_bench does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::histogram::LatencyHistogram;
use crate::progress::Progress;

/// Kinds of operation, with db_bench's names (and order) in histograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpKind {
    /// A point read or an iterator step.
    Read,
    /// A put.
    Write,
    /// A delete.
    Delete,
    /// A merge.
    Merge,
    /// A seek.
    Seek,
    /// Anything else.
    Other,
}

impl OpKind {
    fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Delete => "delete",
            OpKind::Merge => "merge",
            OpKind::Seek => "seek",
            OpKind::Other => "op",
        }
    }
}

/// What a thread reports while it runs; shared by the threads of a run.
#[derive(Debug, Default)]
pub struct Reporting {
    /// Time every operation (`--histogram`).
    pub histogram: bool,
    /// Interim lines every N operations (0: none).
    pub stats_interval_ops: u64,
    /// ... but at most one every N seconds (0: no time limit).
    pub stats_interval_seconds: u64,
    /// The progress bar, if shown.
    pub progress: Option<Progress>,
}

/// Operations between progress-bar updates from one thread.
const PROGRESS_CHUNK_OPS: u64 = 1024;

/// One thread's measurements of one benchmark.
#[derive(Debug)]
pub struct Stats {
    id: usize,
    start: Instant,
    finish: Instant,
    seconds: f64,
    done: u64,
    bytes: u64,
    next_report: u64,
    last_report_done: u64,
    last_report_finish: Instant,
    last_op_finish: Instant,
    progress_pending: u64,
    hist: BTreeMap<OpKind, LatencyHistogram>,
    message: String,
    exclude_from_merge: bool,
    reporting: Arc<Reporting>,
}

impl Stats {
    /// Measurements of thread `id`, started now.
    pub fn new(id: usize, reporting: Arc<Reporting>) -> Stats {
        let now = Instant::now();
        let mut s = Stats {
            id,
            start: now,
            finish: now,
            seconds: 0.0,
            done: 0,
            bytes: 0,
            next_report: 0,
            last_report_done: 0,
            last_report_finish: now,
            last_op_finish: now,
            progress_pending: 0,
            hist: BTreeMap::new(),
            message: String::new(),
            exclude_from_merge: false,
            reporting,
        };
        s.start();
        s
    }

    /// Starts (or restarts) the clock and clears everything.
    pub fn start(&mut self) {
        let now = Instant::now();
        self.start = now;
        self.finish = now;
        self.last_report_finish = now;
        self.last_op_finish = now;
        self.seconds = 0.0;
        self.done = 0;
        self.bytes = 0;
        self.last_report_done = 0;
        self.next_report = self.reporting.stats_interval_ops;
        self.progress_pending = 0;
        self.hist.clear();
        self.message.clear();
    }

    /// Stops the clock.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
        self.seconds = (self.finish - self.start).as_secs_f64();
        self.flush_progress();
    }

    /// Leaves this thread out of the merged result (the writer of
    /// readwhilewriting).
    pub fn exclude_from_merge(&mut self) {
        self.exclude_from_merge = true;
    }

    /// Time since the clock started.
    pub fn elapsed(&self) -> std::time::Duration {
        self.start.elapsed()
    }

    /// Adds key and value bytes moved.
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
    }

    /// Appends to the message printed after the result line.
    pub fn add_message(&mut self, msg: &str) {
        append_with_space(&mut self.message, msg);
    }

    /// Operations finished so far.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Records `n` finished operations of `kind`.
    #[inline]
    pub fn finished_ops(&mut self, n: u64, kind: OpKind) {
        if self.reporting.histogram {
            let now = Instant::now();
            let nanos = (now - self.last_op_finish).as_nanos() as u64;
            self.hist.entry(kind).or_default().record(nanos);
            self.last_op_finish = now;
        }
        self.done += n;
        self.progress_pending += n;
        if self.progress_pending >= PROGRESS_CHUNK_OPS {
            self.flush_progress();
        }
        if self.reporting.stats_interval_ops > 0 && self.done >= self.next_report {
            self.interim_report();
        }
    }

    fn flush_progress(&mut self) {
        if let Some(p) = &self.reporting.progress {
            p.add(self.progress_pending);
        }
        self.progress_pending = 0;
    }

    /// db_bench's `--stats_interval(_seconds)` line, on stderr.
    fn interim_report(&mut self) {
        let now = Instant::now();
        let since_last = (now - self.last_report_finish).as_secs_f64();
        let interval_s = self.reporting.stats_interval_seconds;
        self.next_report += self.reporting.stats_interval_ops;
        if interval_s > 0 && since_last < interval_s as f64 {
            return;
        }
        let total = (now - self.start).as_secs_f64();
        let delta = self.done - self.last_report_done;
        eprintln!(
            "{} ... thread {}: ({},{}) ops and ({:.1},{:.1}) ops/second in ({:.6},{:.6}) seconds",
            time_to_string(SystemTime::now()),
            self.id,
            delta,
            self.done,
            delta as f64 / since_last.max(1e-9),
            self.done as f64 / total.max(1e-9),
            since_last,
            total
        );
        self.last_report_finish = now;
        self.last_report_done = self.done;
    }

    /// Adds `other` (another thread of the same benchmark), as db_bench's
    /// `Stats::Merge`.
    pub fn merge(&mut self, other: &Stats) {
        if other.exclude_from_merge {
            return;
        }
        for (kind, h) in &other.hist {
            self.hist.entry(*kind).or_default().merge(h);
        }
        self.done += other.done;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
        self.start = self.start.min(other.start);
        self.finish = self.finish.max(other.finish);
        if self.message.is_empty() {
            self.message = other.message.clone();
        }
    }

    /// The merge of all threads' stats (the first one's clock included only
    /// if it is not excluded).
    pub fn merge_all(all: &[Stats]) -> Option<Stats> {
        let mut iter = all.iter().filter(|s| !s.exclude_from_merge);
        let first = iter.next()?;
        let mut merged = Stats {
            hist: first.hist.clone(),
            message: first.message.clone(),
            reporting: first.reporting.clone(),
            ..*first
        };
        for s in iter {
            merged.merge(s);
        }
        Some(merged)
    }

    /// The result line (and histograms) of benchmark `name`.
    pub fn report(&self, name: &str) -> String {
        // Benchmarks that do no operation count one, as db_bench.
        let done = self.done.max(1);
        let elapsed = (self.finish - self.start).as_secs_f64();
        let mut extra = String::new();
        if self.bytes > 0 {
            extra = format!("{:6.1} MB/s", self.bytes as f64 / 1_048_576.0 / elapsed);
        }
        append_with_space(&mut extra, &self.message);
        let mut out = result_line(
            name,
            self.seconds * 1e6 / done as f64,
            done as f64 / elapsed,
            elapsed,
            done,
            &extra,
        );
        if self.reporting.histogram {
            for (kind, h) in &self.hist {
                out.push_str(&format!(
                    "Microseconds per {}:\n{}\n",
                    kind.name(),
                    h.report()
                ));
            }
        }
        out
    }
}

/// db_bench's result line: `"%-12s : %11.3f micros/op %ld ops/sec %.3f
/// seconds %lu operations;%s%s\n"`.
pub fn result_line(
    name: &str,
    micros_per_op: f64,
    ops_per_sec: f64,
    seconds: f64,
    ops: u64,
    extra: &str,
) -> String {
    let ops_per_sec = if ops_per_sec.is_finite() {
        ops_per_sec as i64
    } else {
        0
    };
    format!(
        "{name:<12} : {micros_per_op:>11.3} micros/op {ops_per_sec} ops/sec {seconds:.3} seconds {ops} operations;{}{extra}\n",
        if extra.is_empty() { "" } else { " " }
    )
}

/// What glibc's allocator holds for the whole process (`mallinfo2`, summed
/// over its arenas), in MB: `malloc-heap: S MB from the system (A in arenas,
/// M mapped), U in use, F free in arenas`. The free bytes are chunks the
/// arenas keep without handing them back; against the bytes in use they
/// measure fragmentation, which the engines' own memory properties cannot
/// see. `None` where the allocator is not glibc's.
pub fn allocator_line() -> Option<String> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 takes no arguments and returns a plain struct;
        // it locks each arena in turn while it sums.
        let m = unsafe { libc::mallinfo2() };
        let mb = |b: usize| b as f64 / 1e6;
        Some(format!(
            "malloc-heap: {:.1} MB from the system ({:.1} in arenas, {:.1} mapped), {:.1} in use, {:.1} free in arenas",
            mb(m.arena + m.hblkhd),
            mb(m.arena),
            mb(m.hblkhd),
            mb(m.uordblks + m.hblkhd),
            mb(m.fordblks),
        ))
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

fn append_with_space(s: &mut String, msg: &str) {
    if msg.is_empty() {
        return;
    }
    if !s.is_empty() {
        s.push(' ');
    }
    s.push_str(msg);
}

/// `YYYY/MM/DD-HH:MM:SS` in UTC, as db_bench's `TimeToString` (which uses
/// local time).
pub fn time_to_string(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}/{month:02}/{day:02}-{:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn result_line_format_is_db_bench_s() {
        assert_eq!(
            result_line("readrandom", 3.0957, 322935.9, 3.0966, 1_000_000, "  35.7 MB/s (1000000 of 1000000 found)\n"),
            "readrandom   :       3.096 micros/op 322935 ops/sec 3.097 seconds 1000000 operations;   35.7 MB/s (1000000 of 1000000 found)\n\n"
        );
        assert_eq!(
            result_line("fillseq", 2.5, 399983.2, 2.5, 1_000_000, "  44.2 MB/s"),
            "fillseq      :       2.500 micros/op 399983 ops/sec 2.500 seconds 1000000 operations;   44.2 MB/s\n"
        );
        // No bytes and no message: nothing after the semicolon.
        assert_eq!(
            result_line("a_long_benchmark_name", 1234567.8912, 0.8, 1.25, 1, ""),
            "a_long_benchmark_name : 1234567.891 micros/op 0 ops/sec 1.250 seconds 1 operations;\n"
        );
    }

    #[test]
    fn report_merges_threads() {
        let r = Arc::new(Reporting::default());
        let mut a = Stats::new(0, r.clone());
        let mut b = Stats::new(1, r.clone());
        for _ in 0..10 {
            a.finished_ops(1, OpKind::Read);
            b.finished_ops(1, OpKind::Read);
        }
        a.add_bytes(2 << 20);
        a.add_message("(10 of 20 found)");
        std::thread::sleep(Duration::from_millis(5));
        a.stop();
        b.stop();
        let mut w = Stats::new(2, r);
        w.finished_ops(100, OpKind::Write);
        w.exclude_from_merge();
        w.stop();
        let m = Stats::merge_all(&[w, a, b]).unwrap();
        let line = m.report("readrandom");
        assert!(line.starts_with("readrandom   : "), "{line}");
        assert!(line.contains(" 20 operations; "), "{line}");
        assert!(line.contains(" MB/s (10 of 20 found)\n"), "{line}");
    }

    #[test]
    fn histogram_sections() {
        let r = Arc::new(Reporting {
            histogram: true,
            ..Reporting::default()
        });
        let mut s = Stats::new(0, r);
        s.finished_ops(1, OpKind::Write);
        s.finished_ops(1, OpKind::Seek);
        s.stop();
        let out = s.report("x");
        let write = out.find("Microseconds per write:\nCount: 1 ").unwrap();
        let seek = out.find("Microseconds per seek:\nCount: 1 ").unwrap();
        assert!(write < seek, "db_bench's order: read, write, delete, seek");
    }

    #[test]
    fn utc_time_string() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(time_to_string(t), "2023/11/14-22:13:20");
        assert_eq!(time_to_string(UNIX_EPOCH), "1970/01/01-00:00:00");
    }
}
