//! Per-level flush and compaction statistics, printed as RocksDB prints its
//! `** Compaction Stats **` table. Compactions are counted at their output
//! level and flushes at L0, as RocksDB does.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::version::{Version, NUM_LEVELS};

use super::picker::LevelTargets;

/// Work done into one level.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LevelStats {
    /// Bytes read from the input level (Rn).
    pub(crate) bytes_read_n: u64,
    /// Bytes read from the output level (Rnp1).
    pub(crate) bytes_read_np1: u64,
    /// Bytes written (flush or compaction outputs).
    pub(crate) bytes_written: u64,
    /// Bytes moved here by trivial moves.
    pub(crate) bytes_moved: u64,
    pub(crate) micros: u64,
    pub(crate) count: u64,
    pub(crate) keys_in: u64,
    pub(crate) keys_dropped: u64,
}

impl LevelStats {
    fn add(&mut self, o: &LevelStats) {
        self.bytes_read_n += o.bytes_read_n;
        self.bytes_read_np1 += o.bytes_read_np1;
        self.bytes_written += o.bytes_written;
        self.bytes_moved += o.bytes_moved;
        self.micros += o.micros;
        self.count += o.count;
        self.keys_in += o.keys_in;
        self.keys_dropped += o.keys_dropped;
    }
}

const GB: f64 = (1u64 << 30) as f64;
const MB: f64 = (1u64 << 20) as f64;

/// "12.3 MB"-style sizes, as RocksDB's BytesToHumanString.
fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= GB {
        format!("{:.2} GB", b / GB)
    } else if b >= MB {
        format!("{:.2} MB", b / MB)
    } else if b >= 1024.0 {
        format!("{:.2} KB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// Inputs of the stats table.
pub(crate) struct StatsInput<'a> {
    pub(crate) version: &'a Version,
    pub(crate) stats: &'a [LevelStats; NUM_LEVELS],
    pub(crate) scores: &'a [(usize, f64)],
    pub(crate) targets: &'a LevelTargets,
    pub(crate) user_bytes: u64,
    pub(crate) wal_bytes: u64,
}

fn row(
    out: &mut String,
    name: &str,
    files: &str,
    size: u64,
    score: f64,
    s: &LevelStats,
    w_amp: f64,
) {
    let secs = s.micros as f64 / 1e6;
    let read = (s.bytes_read_n + s.bytes_read_np1) as f64;
    let rate = |bytes: f64| if secs > 0.0 { bytes / MB / secs } else { 0.0 };
    let wnew = s.bytes_written.saturating_sub(s.bytes_read_np1);
    let avg = if s.count > 0 {
        secs / s.count as f64
    } else {
        0.0
    };
    let _ = writeln!(
        out,
        "{name:>5} {files:>9} {:>9} {score:>5.1} {:>8.1} {:>7.1} {:>8.1} {:>9.1} {:>8.1} {:>9.1} {w_amp:>5.1} {:>8.1} {:>8.1} {secs:>9.2} {:>9} {avg:>8.3} {:>9} {:>9}",
        human(size),
        read / GB,
        s.bytes_read_n as f64 / GB,
        s.bytes_read_np1 as f64 / GB,
        s.bytes_written as f64 / GB,
        wnew as f64 / GB,
        s.bytes_moved as f64 / GB,
        rate(read),
        rate(s.bytes_written as f64),
        s.count,
        s.keys_in,
        s.keys_dropped,
    );
}

/// The `strata.stats` text.
pub(crate) fn format_stats(input: &StatsInput<'_>) -> String {
    let v = input.version;
    let mut out = String::from("\n** Compaction Stats [default] **\n");
    out.push_str(
        "Level     Files      Size Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) Comp(cnt) Avg(sec)     KeyIn   KeyDrop\n",
    );
    out.push_str(&"-".repeat(170));
    out.push('\n');
    let mut sum = LevelStats::default();
    let (mut sum_files, mut sum_busy, mut sum_size) = (0usize, 0usize, 0u64);
    for level in 0..NUM_LEVELS {
        let s = &input.stats[level];
        let files = v.files(level);
        let busy = files
            .iter()
            .filter(|f| f.being_compacted.load(Ordering::Relaxed))
            .count();
        if files.is_empty() && s.count == 0 {
            continue;
        }
        let score = input
            .scores
            .iter()
            .find(|(l, _)| *l == level)
            .map_or(0.0, |s| s.1);
        // A flush writes each byte once; a compaction writes per byte read
        // from the upper level.
        let w_amp = if level == 0 {
            if s.bytes_written > 0 {
                1.0
            } else {
                0.0
            }
        } else if s.bytes_read_n > 0 {
            s.bytes_written as f64 / s.bytes_read_n as f64
        } else {
            0.0
        };
        row(
            &mut out,
            &format!("L{level}"),
            &format!("{}/{busy}", files.len()),
            v.level_bytes(level),
            score,
            s,
            w_amp,
        );
        sum.add(s);
        sum_files += files.len();
        sum_busy += busy;
        sum_size += v.level_bytes(level);
    }
    let flushed = input.stats[0].bytes_written;
    let sum_w_amp = if flushed > 0 {
        sum.bytes_written as f64 / flushed as f64
    } else {
        0.0
    };
    row(
        &mut out,
        "Sum",
        &format!("{sum_files}/{sum_busy}"),
        sum_size,
        0.0,
        &sum,
        sum_w_amp,
    );
    let total_amp = if input.user_bytes > 0 {
        sum.bytes_written as f64 / input.user_bytes as f64
    } else {
        0.0
    };
    let _ = writeln!(out, "\nBase level: L{}", input.targets.base_level);
    let _ = writeln!(
        out,
        "User writes: {} (WAL {}); flushed: {}; compaction writes: {}; moved: {}",
        human(input.user_bytes),
        human(input.wal_bytes),
        human(flushed),
        human(sum.bytes_written - flushed),
        human(sum.bytes_moved)
    );
    let _ = writeln!(
        out,
        "Write amplification (flush + compaction bytes / user bytes): {total_amp:.2}"
    );
    out
}

/// The `strata.levelstats` text: files, bytes and median file size per
/// level (RocksDB's `rocksdb.levelstats` plus the median), then the same
/// over all levels.
pub(crate) fn format_level_stats(v: &Version) -> String {
    let mut out =
        String::from("Level Files Size(MB) Median(MB)\n-------------------------------\n");
    let mut all = Vec::new();
    for level in 0..NUM_LEVELS {
        let sizes: Vec<u64> = v.files(level).iter().map(|f| f.file_size).collect();
        let _ = writeln!(
            out,
            "{level:>5} {:>5} {:>8.0} {:>10.2}",
            sizes.len(),
            v.level_bytes(level) as f64 / MB,
            median(&sizes) as f64 / MB
        );
        all.extend(sizes);
    }
    let _ = writeln!(
        out,
        "  All {:>5} {:>8.0} {:>10.2}",
        all.len(),
        all.iter().sum::<u64>() as f64 / MB,
        median(&all) as f64 / MB
    );
    out
}

/// The median of `sizes` (the lower middle for an even count; 0 if empty).
fn median(sizes: &[u64]) -> u64 {
    let mut s = sizes.to_vec();
    s.sort_unstable();
    s.get(s.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_sizes() {
        assert_eq!(median(&[]), 0);
        assert_eq!(median(&[5]), 5);
        assert_eq!(median(&[9, 1, 5]), 5);
        assert_eq!(median(&[4, 1, 3, 2]), 2);
    }
}
