//! The thread bodies of the benchmarks, one function per db_bench method
//! (`DoWrite`, `ReadSequential`, `ReadReverse`, `ReadRandom`, `SeekRandom`,
//! `DoDelete`, `BGWriter`, `WriteSeqSeekSeq`). They draw from the thread's
//! generator exactly where db_bench does (including its per-operation
//! "which database" draw), so a given `--seed` reads and writes the same
//! keys as db_bench.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::duration::Duration;
use crate::engine::{Batch, Engine, WriteMode};
use crate::error::{Error, Result};
use crate::keys::{KeyFormat, KeySequence, WriteOrder};
use crate::random::Random64;
use crate::stats::{OpKind, Stats};
use crate::values::ValueGenerator;

/// What the thread bodies need; fixed for one benchmark.
#[derive(Debug, Clone)]
pub struct Params {
    /// Keys in the key space of this benchmark (`num_`: --num, or --num/1000
    /// for fillsync).
    pub num: u64,
    /// `--num`: the range of random keys and the prefix count.
    pub flags_num: u64,
    pub reads: u64,
    pub writes: u64,
    pub deletes: u64,
    pub key_format: KeyFormat,
    pub value_size: usize,
    pub compression_ratio: f64,
    /// Entries per write (and delete) batch, and reads per stride group.
    pub batch_size: u64,
    pub write_mode: WriteMode,
    pub duration_secs: u64,
    pub seek_nexts: u64,
    pub reverse_iterator: bool,
    pub multiread_stride: u64,
    /// `--multiread_batched`: the engine's batched MultiGet.
    pub multiread_batched: bool,
    pub seq_descending: bool,
    /// `--versions_per_key` (W5).
    pub versions_per_key: u64,
    /// Operations of the merge benchmarks: db_bench's `readwrites_`, the
    /// larger of the reads and writes.
    pub readwrites: u64,
    /// `--merge_keys` (negative: `num`).
    pub merge_keys: u64,
    /// `--mergereadpercent`.
    pub merge_percent: u64,
    /// db_bench's range deletions of write benchmarks.
    pub range_dels: RangeDels,
    pub seed_base: u64,
}

/// db_bench's `--writes_before_delete_range`, `--writes_per_range_tombstone`,
/// `--range_tombstone_width` and `--max_num_range_tombstones`: every
/// `per` writes after the first `before`, up to `max` times, a write
/// benchmark also deletes `width` keys from the next key it draws.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeDels {
    pub before: u64,
    pub per: u64,
    pub width: u64,
    pub max: u64,
}

impl RangeDels {
    /// True if a range deletion follows the `written`-th write (db_bench's
    /// condition).
    fn due(&self, written: u64) -> bool {
        self.per > 0
            && written > self.before
            && (written - self.before) / self.per <= self.max
            && (written - self.before).is_multiple_of(self.per)
    }
}

/// State shared by the threads of one benchmark.
pub struct Shared<'a> {
    pub engine: &'a dyn Engine,
    pub params: &'a Params,
    /// Threads that have finished.
    pub num_done: AtomicUsize,
    /// Threads of the benchmark.
    pub num_threads: usize,
    /// `--benchmark_write_rate_limit`, shared by every writer.
    pub write_pace: WritePace,
}

/// Paces the benchmark's own writes to `--benchmark_write_rate_limit`
/// bytes per second over all writer threads (db_bench's
/// `write_rate_limiter`): each write reserves the next slot of the
/// schedule and sleeps until it, in bursts of at most a millisecond.
#[derive(Debug)]
pub struct WritePace {
    bytes_per_sec: u64,
    /// When the schedule's next write may start.
    next: std::sync::Mutex<Option<Instant>>,
}

impl WritePace {
    /// A pace of `bytes_per_sec` (0: none).
    pub fn new(bytes_per_sec: u64) -> WritePace {
        WritePace {
            bytes_per_sec,
            next: std::sync::Mutex::new(None),
        }
    }

    /// Waits until `bytes` more may be written.
    pub fn request(&self, bytes: u64) {
        if self.bytes_per_sec == 0 {
            return;
        }
        let now = Instant::now();
        let start = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            let start = next.map_or(now, |n| n.max(now));
            *next = Some(
                start
                    + std::time::Duration::from_secs_f64(bytes as f64 / self.bytes_per_sec as f64),
            );
            start
        };
        // Bursts up to a millisecond ahead of the schedule: sleeping for
        // each small write would cost more than the write.
        let ahead = start.saturating_duration_since(now);
        if ahead > std::time::Duration::from_millis(1) {
            std::thread::sleep(ahead);
        }
    }
}

/// One thread of a benchmark.
#[derive(Debug)]
pub struct ThreadState {
    pub tid: usize,
    pub rand: Random64,
    pub stats: Stats,
}

/// A thread body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Write(WriteOrder),
    ReadSequential,
    ReadReverse,
    ReadRandom,
    MultiReadRandom,
    SeekRandom,
    DeleteRandom,
    MergeRandom,
    ReadRandomMergeRandom,
    ReadWhileWriting,
    FillSeekSeq,
    FillMvcc,
    MvccScan(super::ScanMethod),
    Compact,
}

/// Runs `method` on thread `th`.
pub fn run(method: Method, sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    match method {
        Method::Write(order) => do_write(sh, th, order, sh.params.writes),
        Method::ReadSequential => read_sequential(sh, th, false),
        Method::ReadReverse => read_sequential(sh, th, true),
        Method::ReadRandom => read_random(sh, th),
        Method::MultiReadRandom => multi_read_random(sh, th),
        Method::SeekRandom => seek_random(sh, th),
        Method::DeleteRandom => delete_random(sh, th),
        Method::MergeRandom => merge_random(sh, th),
        Method::ReadRandomMergeRandom => read_random_merge_random(sh, th),
        Method::ReadWhileWriting if th.tid == 0 => background_writer(sh, th),
        Method::ReadWhileWriting => read_random(sh, th),
        Method::FillSeekSeq => fill_seek_seq(sh, th),
        Method::FillMvcc => super::mvcc::fill(sh, th),
        Method::MvccScan(m) => super::mvcc::scan(sh, th, m),
        Method::Compact => sh.engine.compact_all(),
    }
}

fn do_write(sh: &Shared<'_>, th: &mut ThreadState, order: WriteOrder, writes: u64) -> Result<()> {
    let p = sh.params;
    let random = order == WriteOrder::Random;
    let test_duration = if random { p.duration_secs } else { 0 };
    let num_ops = if writes == 0 { p.num } else { writes };
    let mut duration = Duration::new(test_duration, num_ops);
    let order = match order {
        WriteOrder::Sequential { .. } => WriteOrder::Sequential {
            descending: p.seq_descending,
        },
        other => other,
    };
    // As db_bench: the key generator covers the range deletions' starts.
    let mut keys = KeySequence::new(order, p.num + p.range_dels.max, p.seed_base);
    if p.num != p.flags_num {
        th.stats.add_message(&format!("({} ops)", p.num));
    }
    let mut values = ValueGenerator::new(p.value_size, p.compression_ratio);
    let mut batch = Batch::default();
    let mut key = p.key_format.buffer();
    let mut end_key = p.key_format.buffer();
    let mut bytes = 0u64;
    let (mut written, mut range_deletions) = (0u64, 0u64);
    while !duration.done(p.batch_size) {
        if !matches!(order, WriteOrder::Sequential { .. }) {
            // db_bench picks the database of the batch here.
            th.rand.next_u64();
        }
        batch.clear();
        for _ in 0..p.batch_size {
            let v = keys.next(&mut th.rand);
            p.key_format.fill(v, p.flags_num, &mut key);
            let value = values.generate();
            batch.put(&key, value);
            bytes += (key.len() + value.len()) as u64;
            written += 1;
            if p.range_dels.due(written) {
                range_deletions += 1;
                let begin = keys.next(&mut th.rand);
                p.key_format.fill(begin, p.flags_num, &mut key);
                p.key_format
                    .fill(begin + p.range_dels.width, p.flags_num, &mut end_key);
                batch.delete_range(&key, &end_key);
            }
        }
        // db_bench clears and reuses one WriteBatch. The `rocksdb` crate
        // cannot: its write takes the batch and destroys it, so a batch per
        // write cost the RocksDB column ~780 instructions (7%) per W6
        // fillrandom write under callgrind. A batch of one put goes through
        // `put` instead, in both engines: RocksDB's `DB::Put` builds its
        // batch on the stack.
        sh.write_pace.request(batch.data_bytes() as u64);
        match batch.single_put() {
            Some((k, v)) => sh.engine.put(k, v, p.write_mode)?,
            None => sh.engine.write(&batch, p.write_mode)?,
        }
        th.stats.finished_ops(p.batch_size, OpKind::Write);
    }
    if range_deletions > 0 {
        th.stats
            .add_message(&format!("(range deletions: {range_deletions})"));
    }
    th.stats.add_bytes(bytes);
    Ok(())
}

fn read_sequential(sh: &Shared<'_>, th: &mut ThreadState, reverse: bool) -> Result<()> {
    let mut it = sh.engine.iterator()?;
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    let (mut i, mut bytes) = (0u64, 0u64);
    while i < sh.params.reads && it.valid() {
        bytes += (it.key().len() + it.value().len()) as u64;
        th.stats.finished_ops(1, OpKind::Read);
        i += 1;
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status()?;
    th.stats.add_bytes(bytes);
    Ok(())
}

fn read_random(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    let (mut read, mut found, mut bytes) = (0u64, 0u64, 0u64);
    let (mut num_keys, mut key_rand) = (0u64, 0u64);
    let mut key = p.key_format.buffer();
    let mut duration = Duration::new(p.duration_secs, p.reads);
    let stride = p.batch_size > 1 && p.multiread_stride > 0;
    while !duration.done(1) {
        // db_bench picks the database of the read here.
        th.rand.next_u64();
        if stride {
            // Groups of batch_size keys, multiread_stride apart.
            num_keys += 1;
            if num_keys == p.batch_size {
                num_keys = 0;
                key_rand = th.rand.next_u64() % p.flags_num;
                // Saturating: with huge flags the group's first key clamps
                // to 0 and the later ones saturate past --num (not found)
                // instead of overflowing.
                let span = (p.batch_size - 1).saturating_mul(p.multiread_stride);
                if key_rand.saturating_add(span) >= p.flags_num {
                    key_rand = p
                        .flags_num
                        .saturating_sub(p.batch_size.saturating_mul(p.multiread_stride));
                }
            } else {
                key_rand = key_rand.saturating_add(p.multiread_stride);
            }
        } else {
            key_rand = th.rand.next_u64() % p.flags_num;
        }
        p.key_format.fill(key_rand, p.flags_num, &mut key);
        read += 1;
        let key_len = key.len() as u64;
        if sh
            .engine
            .get(&key, &mut |v| bytes += key_len + v.len() as u64)?
        {
            found += 1;
        }
        th.stats.finished_ops(1, OpKind::Read);
    }
    th.stats.add_bytes(bytes);
    // The newline is db_bench's: it leaves an empty line after the result.
    th.stats
        .add_message(&format!("({found} of {read} found)\n"));
    Ok(())
}

/// db_bench's `MultiReadRandom`: batches of `--batch_size` random keys (or
/// `--multiread_stride` apart from a random first key), one MultiGet each;
/// every key is one operation.
fn multi_read_random(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    let (mut read, mut found, mut bytes) = (0u64, 0u64, 0u64);
    let mut keys: Vec<Vec<u8>> = (0..p.batch_size).map(|_| p.key_format.buffer()).collect();
    let mut duration = Duration::new(p.duration_secs, p.reads);
    while !duration.done(p.batch_size) {
        // db_bench picks the database of the batch here.
        th.rand.next_u64();
        if p.multiread_stride > 0 {
            let mut k = th.rand.next_u64() % p.flags_num;
            // As db_bench: a group that would run past --num starts lower
            // (saturating where db_bench's signed arithmetic would go
            // negative).
            let span = (p.batch_size - 1).saturating_mul(p.multiread_stride);
            if k.saturating_add(span) >= p.flags_num {
                k = p
                    .flags_num
                    .saturating_sub(p.batch_size.saturating_mul(p.multiread_stride));
            }
            for key in keys.iter_mut() {
                p.key_format.fill(k, p.flags_num, key);
                k = k.saturating_add(p.multiread_stride);
            }
        } else {
            for key in keys.iter_mut() {
                p.key_format
                    .fill(th.rand.next_u64() % p.flags_num, p.flags_num, key);
            }
        }
        let n = sh
            .engine
            .multi_get(&keys, p.multiread_batched, &mut |i, v| {
                bytes += (keys[i].len() + v.len()) as u64
            })?;
        found += n as u64;
        read += p.batch_size;
        th.stats.finished_ops(p.batch_size, OpKind::Read);
    }
    th.stats.add_bytes(bytes);
    th.stats.add_message(&format!("({found} of {read} found)"));
    Ok(())
}

fn seek_random(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    let (mut read, mut found, mut bytes) = (0u64, 0u64, 0u64);
    let mut key = p.key_format.buffer();
    let mut duration = Duration::new(p.duration_secs, p.reads);
    while !duration.done(1) {
        let seek_pos = th.rand.next_u64() % p.flags_num;
        p.key_format.fill(seek_pos, p.flags_num, &mut key);
        // A new iterator per seek, as db_bench without a tailing iterator.
        let mut it = sh.engine.iterator()?;
        it.seek(&key);
        read += 1;
        if it.valid() && it.key() == key.as_slice() {
            found += 1;
        }
        for _ in 0..p.seek_nexts {
            if !it.valid() {
                break;
            }
            bytes += (it.key().len() + it.value().len()) as u64;
            if p.reverse_iterator {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status()?;
        th.stats.finished_ops(1, OpKind::Seek);
    }
    th.stats.add_bytes(bytes);
    th.stats
        .add_message(&format!("({found} of {read} found)\n"));
    Ok(())
}

fn delete_random(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    let mut duration = Duration::new(p.duration_secs, p.deletes);
    let mut batch = Batch::default();
    let mut key = p.key_format.buffer();
    while !duration.done(p.batch_size) {
        // db_bench picks the database of the batch here.
        th.rand.next_u64();
        batch.clear();
        for _ in 0..p.batch_size {
            let k = th.rand.next_u64() % p.flags_num;
            p.key_format.fill(k, p.flags_num, &mut key);
            batch.delete(&key);
        }
        sh.engine.write(&batch, p.write_mode)?;
        th.stats.finished_ops(p.batch_size, OpKind::Delete);
    }
    Ok(())
}

/// db_bench's MergeRandom: merges of generated values into random keys of
/// `--merge_keys`.
fn merge_random(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    let mut values = ValueGenerator::new(p.value_size, p.compression_ratio);
    let mut key = p.key_format.buffer();
    let mut duration = Duration::new(p.duration_secs, p.readwrites);
    let mut bytes = 0u64;
    while !duration.done(1) {
        let k = th.rand.next_u64() % p.merge_keys;
        p.key_format.fill(k, p.merge_keys, &mut key);
        let value = values.generate();
        sh.engine.merge(&key, value, p.write_mode)?;
        bytes += (key.len() + value.len()) as u64;
        th.stats.finished_ops(1, OpKind::Merge);
    }
    th.stats.add_bytes(bytes);
    th.stats
        .add_message(&format!("( updates:{})", p.readwrites));
    Ok(())
}

/// db_bench's ReadRandomMergeRandom: on random keys of `--merge_keys`,
/// `--mergereadpercent` merges, the rest gets.
fn read_random_merge_random(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    let mut values = ValueGenerator::new(p.value_size, p.compression_ratio);
    let mut key = p.key_format.buffer();
    let mut duration = Duration::new(p.duration_secs, p.readwrites);
    let (mut gets, mut merges, mut hits, mut max_length) = (0u64, 0u64, 0u64, 0usize);
    while !duration.done(1) {
        let k = th.rand.next_u64() % p.merge_keys;
        p.key_format.fill(k, p.merge_keys, &mut key);
        if th.rand.next_u64() % 100 < p.merge_percent {
            sh.engine.merge(&key, values.generate(), p.write_mode)?;
            merges += 1;
            th.stats.finished_ops(1, OpKind::Merge);
        } else {
            if sh
                .engine
                .get(&key, &mut |v| max_length = max_length.max(v.len()))?
            {
                hits += 1;
            }
            gets += 1;
            th.stats.finished_ops(1, OpKind::Read);
        }
    }
    th.stats.add_message(&format!(
        "(reads:{gets} merges:{merges} total:{} hits:{hits} maxlength:{max_length})",
        p.readwrites
    ));
    Ok(())
}

/// readwhilewriting's writer: random puts until every reader is done. Its
/// stats are left out of the result, which is the readers'.
fn background_writer(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    th.stats.exclude_from_merge();
    let mut values = ValueGenerator::new(p.value_size, p.compression_ratio);
    let mut key = p.key_format.buffer();
    let mut end_key = p.key_format.buffer();
    let mut bytes = 0u64;
    let mut written = 0u64;
    loop {
        th.rand.next_u64();
        if sh.num_done.load(Ordering::Acquire) + 1 >= sh.num_threads {
            break;
        }
        let k = th.rand.next_u64() % p.flags_num;
        p.key_format.fill(k, p.flags_num, &mut key);
        let value = values.generate();
        sh.write_pace.request((key.len() + value.len()) as u64);
        sh.engine.put(&key, value, p.write_mode)?;
        bytes += (key.len() + value.len()) as u64;
        th.stats.finished_ops(1, OpKind::Write);
        written += 1;
        if p.range_dels.due(written) {
            // db_bench's BGWriter: a random start, its own write.
            let begin = th.rand.next_u64() % p.flags_num;
            p.key_format.fill(begin, p.flags_num, &mut key);
            p.key_format
                .fill(begin + p.range_dels.width, p.flags_num, &mut end_key);
            let mut b = Batch::default();
            b.delete_range(&key, &end_key);
            sh.engine.write(&b, p.write_mode)?;
            th.stats.finished_ops(1, OpKind::Write);
        }
    }
    th.stats.add_bytes(bytes);
    // The readers' result depends on how hard the writer pushed: say it.
    let seconds = th.stats.elapsed().as_secs_f64();
    eprintln!(
        "readwhilewriting writer: {written} puts in {seconds:.3} seconds ({:.0} puts/sec)",
        written as f64 / seconds.max(1e-9)
    );
    Ok(())
}

/// Writes keys 0..num in order (not timed), then seeks to each in order,
/// stepping with next() `--seek_nexts` times between seeks.
fn fill_seek_seq(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    do_write(
        sh,
        th,
        WriteOrder::Sequential { descending: false },
        p.flags_num,
    )?;
    th.stats.start();
    let mut it = sh.engine.iterator()?;
    let mut key = p.key_format.buffer();
    let missing = |i: u64| {
        Error::engine(
            sh.engine.name(),
            format!("fillseekseq: key {i} not found after writing it"),
        )
    };
    let mut i = 0;
    while i < p.flags_num {
        p.key_format.fill(i, p.flags_num, &mut key);
        it.seek(&key);
        if !(it.valid() && it.key() == key.as_slice()) {
            return Err(missing(i));
        }
        th.stats.finished_ops(1, OpKind::Seek);
        let mut j = 0;
        while j < p.seek_nexts && i + 1 < p.flags_num {
            if p.reverse_iterator {
                it.prev();
            } else {
                it.next();
            }
            i += 1;
            p.key_format.fill(i, p.flags_num, &mut key);
            if !(it.valid() && it.key() == key.as_slice()) {
                return Err(missing(i));
            }
            th.stats.finished_ops(1, OpKind::Seek);
            j += 1;
        }
        it.seek(&key);
        th.stats.finished_ops(1, OpKind::Seek);
        i += 1;
    }
    it.status()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_pace_holds_writers_to_the_rate() {
        // 10 requests of 100 KB at 10 MB/s: the last may start 90 ms after
        // the first, so the ten take at least that (a lower bound only).
        let pace = WritePace::new(10_000_000);
        let start = Instant::now();
        for _ in 0..10 {
            pace.request(100_000);
        }
        assert!(
            start.elapsed() >= std::time::Duration::from_millis(88),
            "{:?}",
            start.elapsed()
        );
        // No limit: the schedule is not even kept.
        let free = WritePace::new(0);
        free.request(u64::MAX);
        assert!(free.next.lock().unwrap().is_none());
    }
}
