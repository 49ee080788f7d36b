//! `strata-stress run`: threads doing random writes and verified reads.
//!
//! Writers lock the slots they write (in slot order, so batches never
//! deadlock), mark the write in flight in the expected state, write, and
//! acknowledge. Readers take no lock: they read the slot before and after
//! the database read, and accept any state a write between the two could
//! have left (see [`check_observed`]). Any mismatch or database error
//! prints `VERIFICATION FAILED` and exits with status 2.
//!
//! With `--disable_wal=1` every write also goes through one lock that
//! appends it to the history, so the history is the database's write order,
//! and a flusher thread calls `flush` every `--flush_interval_ms`, recording
//! how much of the history each flush made durable.
//!
//! With `--manifest_fault_interval_ms=N` the database runs on the
//! fault-injecting file system, and every N ms the monitor arms one failure
//! of a manifest append or sync and flushes, while the workers hold
//! snapshots and iterate. The database then stops writes with the injected
//! error; the workers stop, leaving their writes in flight, and let go of
//! their snapshots and iterators (a failed manifest edit may be on disk, so
//! nothing may be deleted then). The run reopens the database on the
//! healthy file system, settles the writes in flight, checks that the files
//! on disk are exactly the live ones, and goes on with the next round.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata::env::{CrashMode, FaultInjectionFileSystem, FaultRule, FileOp, PosixFileSystem};
use strata::{
    BlockBasedOptions, Cache, DBCompressionType, DBRawIterator, Direction, Error, IteratorMode,
    Options, ReadOptions, Snapshot, SstPartitionerFactory, WriteBatch, WriteOptions, DB,
};

use crate::expected::{ExpectedState, History, Shape, Slot};
use crate::failure::{open_failure, Failure};
use crate::flags::Flags;
use crate::value::{
    check_value, group_member_name, key_name, parse_key, KeyState, Observed, ParsedKey,
};

/// Flags of `run` that shape the database.
pub const DB_FLAGS: &[&str] = &[
    "write_buffer_size",
    "target_file_size_base",
    "max_bytes_for_level_base",
    "level0_file_num_compaction_trigger",
    "max_background_jobs",
    "max_subcompactions",
    "compression",
    "bloom_bits",
    "block_size",
    "cache_size",
    "stream_aware_cutting",
    "sst_partitioner_prefix",
    "packed_from_level",
    "enable_pipelined_write",
    "allow_concurrent_memtable_write",
    "merge_percent",
    "range_del_percent",
];

/// The merge operator of every run: the newest operand wins (RocksDB's
/// `PutOperator`), so a merge leaves the value a put of the same state
/// would, and the expected state needs no other model. What it checks is
/// the operands' path: logged, replayed, flushed and compacted (folded),
/// and read back in order.
fn newest_operand(
    _key: &[u8],
    base: Option<&[u8]>,
    operands: &strata::MergeOperands,
) -> Option<Vec<u8>> {
    operands.iter().last().or(base).map(<[u8]>::to_vec)
}

/// The exit status of a run that cut its power as asked
/// (`--power_loss_after_ms`).
pub const POWER_LOSS_EXIT: i32 = 3;

/// Set just before a simulated power cut: from then on the database's
/// operations fail, and a thread that sees one waits for the cut to end
/// the process instead of reporting a failure.
static POWER_LOST: AtomicBool = AtomicBool::new(false);

/// Waits forever if the power was cut (the cutting thread exits the
/// process); returns at once otherwise.
pub fn wait_if_power_lost() {
    while POWER_LOST.load(Ordering::SeqCst) {
        std::thread::park();
    }
}

/// Cuts the power of `fs` after `after`: every unsynced byte and
/// directory entry is dropped from the disk, then the process exits with
/// [`POWER_LOSS_EXIT`] (or 2 if the disk could not be put back).
fn cut_power_after(fs: FaultInjectionFileSystem, after: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        POWER_LOST.store(true, Ordering::SeqCst);
        match fs.crash() {
            Ok(()) => {
                eprintln!("run: power cut after {} ms", after.as_millis());
                std::process::exit(POWER_LOSS_EXIT);
            }
            Err(e) => {
                eprintln!("VERIFICATION FAILED: power cut: putting the disk back failed: {e}");
                std::process::exit(2);
            }
        }
    });
}

/// Prints a verification failure and exits with status 2.
pub fn fail(what: String) -> ! {
    wait_if_power_lost();
    eprintln!("VERIFICATION FAILED: {what}");
    std::process::exit(2);
}

/// The database options the flags ask for: small buffers and files by
/// default, so flushes and compactions run all the time.
pub fn db_options(flags: &Flags) -> Result<Options, String> {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_write_buffer_size(flags.get("write_buffer_size", 64usize << 10)?);
    o.set_target_file_size_base(flags.get("target_file_size_base", 64u64 << 10)?);
    o.set_max_bytes_for_level_base(flags.get("max_bytes_for_level_base", 256u64 << 10)?);
    o.set_level_zero_file_num_compaction_trigger(
        flags.get("level0_file_num_compaction_trigger", 4)?,
    );
    o.set_max_background_jobs(flags.get("max_background_jobs", 2)?);
    o.set_max_subcompactions(flags.get("max_subcompactions", 1)?);
    let compression = match flags.get("compression", "snappy".to_string())?.as_str() {
        "none" => DBCompressionType::None,
        "snappy" => DBCompressionType::Snappy,
        "lz4" => DBCompressionType::Lz4,
        "zstd" => DBCompressionType::Zstd,
        other => return Err(format!("--compression={other}: none, snappy, lz4 or zstd")),
    };
    o.set_compression_type(compression);
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(flags.get("bloom_bits", 10.0)?, false);
    table.set_block_size(flags.get("block_size", 4096)?);
    table.set_block_cache(&Cache::new_lru_cache(
        flags.get("cache_size", 1usize << 20)?,
    ));
    o.set_block_based_table_factory(&table);
    o.set_stream_aware_cutting(flags.flag("stream_aware_cutting", true)?);
    o.set_enable_pipelined_write(flags.flag("enable_pipelined_write", false)?);
    o.set_allow_concurrent_memtable_write(flags.flag("allow_concurrent_memtable_write", true)?);
    o.set_merge_operator_associative("stress.newest_operand", newest_operand);
    // Keys are "k" and 8 digits: a prefix of 6 bytes groups 1,000 slots.
    match flags.get("sst_partitioner_prefix", 0usize)? {
        0 => {}
        n => o.set_sst_partitioner_factory(SstPartitionerFactory::fixed_prefix(n)),
    }
    // Packed tables from this level down (-1: block-based only).
    match flags.get("packed_from_level", -1i32)? {
        -1 => {}
        level @ 0..=6 => {
            let mut p = strata::PackedTableOptions::default();
            p.set_from_level(level);
            o.set_packed_table_factory(&p);
        }
        other => return Err(format!("--packed_from_level={other}: -1 (none) or 0 to 6")),
    }
    Ok(o)
}

/// The key-space flags.
pub fn shape(flags: &Flags) -> Result<Shape, String> {
    let shape = Shape {
        keys: flags.get("keys", 10_000)?,
        groups: flags.get("groups", 100)?,
        group_size: flags.get("group_size", 5)?,
    };
    shape.check()?;
    Ok(shape)
}

/// Accepts `seen` for a slot read without its lock, between reads of the
/// slot `pre` and `post`: a value of any generation from `pre`'s
/// acknowledged one up to the newest `post` knows, unless a state known
/// for that generation says otherwise; absent if a known state in that
/// range is, or if an unknown intermediate write may have been a delete.
pub fn check_observed(seen: Observed, pre: Slot, post: Slot) -> Result<(), String> {
    let known: Vec<KeyState> = [Some(pre.acked), pre.pending, Some(post.acked), post.pending]
        .into_iter()
        .flatten()
        .collect();
    let lo = pre.acked.generation();
    let hi = known.iter().map(|s| s.generation()).max().unwrap_or(lo);
    let in_range = |s: &&KeyState| (lo..=hi).contains(&s.generation());
    let ok = match seen {
        Observed::Present(g) => {
            (lo..=hi).contains(&g)
                && known
                    .iter()
                    .filter(|s| s.generation() == g)
                    .all(|s| s.exists())
        }
        Observed::Absent => known.iter().filter(in_range).any(|s| !s.exists()) || hi - lo >= 2,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "saw {seen:?}; expected state before {pre:?}, after {post:?}"
        ))
    }
}

struct Ctx<'a> {
    db: &'a DB,
    expected: &'a ExpectedState,
    shape: Shape,
    locks: &'a [Mutex<()>],
    history: Option<&'a Mutex<History>>,
    wo: WriteOptions,
    value_size_max: usize,
    /// Percent of value writes made as merges.
    merge_percent: u32,
    /// Percent of key deletions made as range deletions (of the key's
    /// own range), and the weight of deleting a run of keys with one.
    range_del_percent: u32,
    /// Ascending insert streams that half the single puts follow (0: none).
    streams: u32,
    stream_pos: AtomicU32,
    ops: AtomicU64,
    reads_verified: AtomicU64,
    stop: AtomicBool,
    /// A manifest failure was armed this round: the database may stop
    /// writes with the injected error, which ends the round.
    fault_armed: AtomicBool,
}

fn db_error(what: &str, e: Error) -> ! {
    fail(format!("{what}: database error {e}"))
}

impl Ctx<'_> {
    /// Writes the given slots (sorted, distinct) in one batch: a put or a
    /// delete per slot, each member of a group alike.
    fn write(&self, slots: &[(u32, bool)]) {
        let _guards: Vec<_> = slots
            .iter()
            .map(|(s, _)| {
                self.locks[*s as usize]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
            })
            .collect();
        let mut batch = WriteBatch::default();
        let mut writes = Vec::with_capacity(slots.len());
        for &(slot, exists) in slots {
            let next = self.expected.get(slot).acked.next(exists);
            writes.push((slot, next));
            let value = crate::value::value_for(slot, next.generation(), self.value_size_max);
            // A deterministic share of the value writes are merges.
            let roll = (slot.wrapping_mul(2_654_435_761) ^ next.generation()) % 100;
            let merge = exists && roll < self.merge_percent;
            let ranged = !exists && roll < self.range_del_percent;
            for key in self.keys_of(slot) {
                if ranged {
                    // The key's own range: [key, key + 0x00).
                    let mut end = key.clone();
                    end.push(0);
                    batch.delete_range(&key, &end);
                } else if !exists {
                    batch.delete(&key);
                } else if merge {
                    batch.merge(&key, &value);
                } else {
                    batch.put(&key, &value);
                }
            }
        }
        self.commit(&writes, batch, "write");
    }

    /// Marks `writes` in flight (and appends them to the history), writes
    /// `batch`, and acknowledges them. The caller holds their slots' locks.
    fn commit(&self, writes: &[(u32, KeyState)], batch: WriteBatch, what: &str) {
        let mut history = self
            .history
            .as_ref()
            .map(|h| h.lock().unwrap_or_else(|e| e.into_inner()));
        for &(slot, next) in writes {
            self.expected.begin_write(slot, next);
        }
        if let Some(h) = history.as_mut() {
            h.append_batch(writes);
        }
        if let Err(e) = self.db.write_opt(batch, &self.wo) {
            if self.is_injected(&e) {
                // The writes stay in flight; the reopen settles them.
                self.stop.store(true, Ordering::Relaxed);
                return;
            }
            db_error(what, e);
        }
        for &(slot, _) in writes {
            self.expected.ack_write(slot);
        }
    }

    /// Deletes plain slots `first..first + n` with one range deletion
    /// (key names are fixed-width, so the range holds exactly them).
    fn delete_run(&self, first: u32, n: u32) {
        let last = (first + n).min(self.shape.keys);
        let slots: Vec<u32> = (first..last).collect();
        if slots.is_empty() {
            return;
        }
        let _guards: Vec<_> = slots
            .iter()
            .map(|s| {
                self.locks[*s as usize]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
            })
            .collect();
        let writes: Vec<(u32, KeyState)> = slots
            .iter()
            .map(|&s| (s, self.expected.get(s).acked.next(false)))
            .collect();
        let mut batch = WriteBatch::default();
        batch.delete_range(key_name(first), key_name(last));
        self.commit(&writes, batch, "delete_range");
    }

    /// True for the error of an armed manifest failure: the round ends.
    fn is_injected(&self, e: &Error) -> bool {
        self.fault_armed.load(Ordering::Relaxed) && e.to_string().contains("injected")
    }

    fn keys_of(&self, slot: u32) -> Vec<Vec<u8>> {
        if slot < self.shape.keys {
            vec![key_name(slot)]
        } else {
            let g = slot - self.shape.keys;
            (0..self.shape.group_size)
                .map(|m| group_member_name(g, m))
                .collect()
        }
    }

    fn observe(&self, slot: u32, value: Option<&[u8]>) -> Result<Observed, String> {
        match value {
            None => Ok(Observed::Absent),
            Some(v) => check_value(slot, v, self.value_size_max).map(Observed::Present),
        }
    }

    fn verified(&self, n: u64) {
        self.reads_verified.fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self, rng: &mut StdRng) {
        let slot = rng.gen_range(0..self.shape.keys);
        let pre = self.expected.get(slot);
        let got = self
            .db
            .get(key_name(slot))
            .unwrap_or_else(|e| db_error("get", e));
        let post = self.expected.get(slot);
        let seen = self.observe(slot, got.as_deref());
        if let Err(e) = seen.and_then(|s| check_observed(s, pre, post)) {
            fail(format!("get k{slot:08}: {e}"));
        }
        self.verified(1);
    }

    /// Random plain keys (unsorted, maybe repeated) read by one MultiGet,
    /// copied or pinned: each answer must be a state its key could have.
    fn multi_get(&self, rng: &mut StdRng) {
        let n: u32 = rng.gen_range(1..=32);
        let slots: Vec<u32> = (0..n).map(|_| rng.gen_range(0..self.shape.keys)).collect();
        let keys: Vec<Vec<u8>> = slots.iter().map(|&s| key_name(s)).collect();
        let pre: Vec<Slot> = slots.iter().map(|&s| self.expected.get(s)).collect();
        let got: Vec<Option<Vec<u8>>> = if rng.gen_bool(0.5) {
            self.db
                .multi_get(&keys)
                .into_iter()
                .collect::<Result<_, _>>()
        } else {
            self.db
                .batched_multi_get(&keys, false)
                .into_iter()
                .map(|r| r.map(|v| v.map(|v| v.to_vec())))
                .collect::<Result<_, _>>()
        }
        .unwrap_or_else(|e| db_error("multi_get", e));
        let post: Vec<Slot> = slots.iter().map(|&s| self.expected.get(s)).collect();
        for (i, &slot) in slots.iter().enumerate() {
            let seen = self.observe(slot, got[i].as_deref());
            if let Err(e) = seen.and_then(|s| check_observed(s, pre[i], post[i])) {
                fail(format!("multi_get k{slot:08} (key {i} of {n}): {e}"));
            }
        }
        self.verified(u64::from(n));
    }

    /// Reads every member of a group through one snapshot: all must show
    /// the same write, one the expected state allows.
    fn check_group(&self, rng: &mut StdRng) {
        if self.shape.groups == 0 {
            return;
        }
        let g = rng.gen_range(0..self.shape.groups);
        let slot = self.shape.keys + g;
        let pre = self.expected.get(slot);
        let snap = self.db.snapshot();
        let post = self.expected.get(slot);
        let mut seen = Vec::new();
        let members: Vec<Vec<u8>> = (0..self.shape.group_size)
            .map(|m| group_member_name(g, m))
            .collect();
        // One MultiGet or a get per member: both read the snapshot.
        let values: Vec<Option<Vec<u8>>> = if rng.gen_bool(0.5) {
            snap.multi_get(&members)
                .into_iter()
                .collect::<Result<_, _>>()
        } else {
            members
                .iter()
                .map(|k| snap.get(k))
                .collect::<Result<_, _>>()
        }
        .unwrap_or_else(|e| db_error("group get", e));
        for (m, v) in values.iter().enumerate() {
            match self.observe(slot, v.as_deref()) {
                Ok(o) => seen.push(o),
                Err(e) => fail(format!("group {g} member {m}: {e}")),
            }
        }
        if seen.iter().any(|o| *o != seen[0]) {
            fail(format!("group {g} is torn: members saw {seen:?}"));
        }
        if let Err(e) = check_observed(seen[0], pre, post) {
            fail(format!("group {g}: {e}"));
        }
        self.verified(u64::from(self.shape.group_size));
    }

    /// A bounded scan over plain keys, forward or backward.
    fn scan(&self, rng: &mut StdRng) {
        let lo = rng.gen_range(0..self.shape.keys);
        let hi = (lo + rng.gen_range(1..64)).min(self.shape.keys);
        let pre: Vec<Slot> = (lo..hi).map(|s| self.expected.get(s)).collect();
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(key_name(lo));
        ro.set_iterate_upper_bound(key_name(hi));
        let forward = rng.gen_bool(0.5);
        let mode = if forward {
            IteratorMode::Start
        } else {
            IteratorMode::End
        };
        let mut found: Vec<(u32, Observed)> = Vec::new();
        for item in self.db.iterator_opt(mode, ro) {
            let (k, v) = item.unwrap_or_else(|e| db_error("scan", e));
            let slot = match parse_key(&k) {
                Some(ParsedKey::Plain(i)) if (lo..hi).contains(&i) => i,
                _ => fail(format!(
                    "scan [{lo}, {hi}) returned key {:?} outside its bounds",
                    String::from_utf8_lossy(&k)
                )),
            };
            if let Some(&(prev, _)) = found.last() {
                if (forward && slot <= prev) || (!forward && slot >= prev) {
                    fail(format!(
                        "scan order: k{slot:08} after k{prev:08} (forward: {forward})"
                    ));
                }
            }
            match self.observe(slot, Some(&v)) {
                Ok(o) => found.push((slot, o)),
                Err(e) => fail(format!("scan k{slot:08}: {e}")),
            }
        }
        let post: Vec<Slot> = (lo..hi).map(|s| self.expected.get(s)).collect();
        for slot in lo..hi {
            let i = (slot - lo) as usize;
            let seen = found
                .iter()
                .find(|(s, _)| *s == slot)
                .map_or(Observed::Absent, |(_, o)| *o);
            if let Err(e) = check_observed(seen, pre[i], post[i]) {
                fail(format!("scan [{lo}, {hi}), k{slot:08}: {e}"));
            }
        }
        self.verified(u64::from(hi - lo));
    }

    /// Takes a snapshot of some keys and checks what it shows.
    fn take_snapshot<'d>(&'d self, rng: &mut StdRng) -> Held<'d> {
        let slots: Vec<u32> = (0..8).map(|_| rng.gen_range(0..self.shape.keys)).collect();
        let pre: Vec<Slot> = slots.iter().map(|&s| self.expected.get(s)).collect();
        let snap = self.db.snapshot();
        let post: Vec<Slot> = slots.iter().map(|&s| self.expected.get(s)).collect();
        let mut seen = Vec::new();
        for (i, &slot) in slots.iter().enumerate() {
            let v = snap
                .get(key_name(slot))
                .unwrap_or_else(|e| db_error("snapshot get", e));
            let o = self
                .observe(slot, v.as_deref())
                .and_then(|o| check_observed(o, pre[i], post[i]).map(|()| o));
            match o {
                Ok(o) => seen.push((slot, o)),
                Err(e) => fail(format!("snapshot read of k{slot:08}: {e}")),
            }
        }
        self.verified(slots.len() as u64);
        // An iterator at the snapshot, kept as long as the snapshot: it
        // pins the version of now, so old versions (and their files) stay
        // alive across flushes, compactions and injected failures.
        let mut ro = ReadOptions::default();
        ro.set_snapshot(&snap);
        let it = self.db.raw_iterator_opt(ro);
        Held { snap, it, seen }
    }

    /// Reads a held snapshot again, by gets and by an iterator: it must
    /// show exactly what it showed when taken, however much was written
    /// and compacted since.
    fn recheck_snapshot(&self, held: &mut Held<'_>) {
        for &(slot, was) in &held.seen {
            let key = key_name(slot);
            held.it.seek(&key);
            held.it
                .status()
                .unwrap_or_else(|e| db_error("held iterator", e));
            let by_held = match held.it.item() {
                Some((k, v)) if k == &key[..] => {
                    self.observe(slot, Some(v)).unwrap_or_else(|e| fail(e))
                }
                _ => Observed::Absent,
            };
            if by_held != was {
                fail(format!(
                    "held iterator shows {by_held:?} for k{slot:08}, the snapshot showed {was:?}"
                ));
            }
            let v = held
                .snap
                .get(&key)
                .unwrap_or_else(|e| db_error("snapshot get", e));
            let now = self.observe(slot, v.as_deref()).unwrap_or_else(|e| fail(e));
            if now != was {
                fail(format!(
                    "snapshot read of k{slot:08} changed from {was:?} to {now:?}"
                ));
            }
            let mut it = held
                .snap
                .iterator(IteratorMode::From(&key, Direction::Forward));
            let first = it
                .next()
                .transpose()
                .unwrap_or_else(|e| db_error("snapshot scan", e));
            let by_iter = match first {
                Some((k, v)) if *k == key[..] => {
                    self.observe(slot, Some(&v)).unwrap_or_else(|e| fail(e))
                }
                _ => Observed::Absent,
            };
            if by_iter != was {
                fail(format!(
                    "snapshot iterator shows {by_iter:?} for k{slot:08}, get showed {was:?}"
                ));
            }
        }
        self.verified(3 * held.seen.len() as u64);
    }

    fn random_write(&self, rng: &mut StdRng, roll: u32) {
        let keys = self.shape.keys;
        if roll < 30 {
            // Half the puts follow one of the ascending streams, each over
            // its share of the key space, so that flushes and compactions
            // cut between streams (stream-aware cutting).
            let slot = match self.streams {
                s if s > 0 && keys >= s && rng.gen_bool(0.5) => {
                    let share = keys / s;
                    let pos = self.stream_pos.fetch_add(1, Ordering::Relaxed);
                    rng.gen_range(0..s) * share + pos % share
                }
                _ => rng.gen_range(0..keys),
            };
            self.write(&[(slot, true)]);
        } else if roll < 36 {
            self.write(&[(rng.gen_range(0..keys), false)]);
        } else if roll < 38 {
            if rng.gen_range(0..100) < self.range_del_percent {
                self.delete_run(rng.gen_range(0..keys), rng.gen_range(2..24));
            } else {
                self.write(&[(rng.gen_range(0..keys), false)]);
            }
        } else if roll < 48 {
            let n = rng.gen_range(2..8);
            let mut slots: Vec<(u32, bool)> = (0..n)
                .map(|_| (rng.gen_range(0..keys), !rng.gen_ratio(1, 4)))
                .collect();
            slots.sort_unstable_by_key(|(s, _)| *s);
            slots.dedup_by_key(|(s, _)| *s);
            self.write(&slots);
        } else if self.shape.groups > 0 {
            let g = rng.gen_range(0..self.shape.groups);
            self.write(&[(keys + g, !rng.gen_ratio(1, 5))]);
        }
    }

    fn thread_main(&self, seed: u64, deadline: Instant, ops_max: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut held: Option<Held<'_>> = None;
        let mut done = 0u64;
        while done < ops_max && !self.stop.load(Ordering::Relaxed) {
            if done.is_multiple_of(64) && Instant::now() >= deadline {
                break;
            }
            let roll = rng.gen_range(0..1000) / 10;
            match roll {
                0..=52 => self.random_write(&mut rng, roll),
                53..=70 => self.get(&mut rng),
                71..=77 => self.multi_get(&mut rng),
                78..=84 => self.check_group(&mut rng),
                85..=94 => self.scan(&mut rng),
                _ => match held.take() {
                    Some(mut h) if rng.gen_bool(0.7) => {
                        self.recheck_snapshot(&mut h);
                        held = Some(h);
                    }
                    _ => held = Some(self.take_snapshot(&mut rng)),
                },
            }
            if rng.gen_ratio(1, 2000) {
                let lo = rng.gen_range(0..self.shape.keys);
                let r = self
                    .db
                    .compact_range(Some(key_name(lo)), Some(key_name(lo + 100)));
                if let Err(e) = r {
                    if self.is_injected(&e) {
                        self.stop.store(true, Ordering::Relaxed);
                    } else if !matches!(e, Error::Busy(_)) {
                        db_error("compact_range", e);
                    }
                }
            }
            self.ops.fetch_add(1, Ordering::Relaxed);
            done += 1;
        }
    }
}

/// A snapshot a thread keeps across operations, with what it showed.
struct Held<'a> {
    snap: Snapshot<'a>,
    it: DBRawIterator<'a>,
    seen: Vec<(u32, Observed)>,
}

/// What a run did.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunStats {
    /// Operations, reads and writes.
    pub ops: u64,
    /// Keys whose read was checked against the expected state.
    pub reads_verified: u64,
}

/// What stays the same across the rounds of a run.
struct RunSetup<'a> {
    expected: &'a ExpectedState,
    shape: Shape,
    threads: u64,
    seed: u64,
    deadline: Instant,
    ops_per_thread: u64,
    wo: WriteOptions,
    value_size_max: usize,
    merge_percent: u32,
    range_del_percent: u32,
    streams: u32,
    history: Option<Mutex<History>>,
    flush_interval: Duration,
    /// The file system and interval of manifest failures, if asked for.
    faults: Option<(FaultInjectionFileSystem, Duration)>,
    locks: Vec<Mutex<()>>,
}

/// Runs the stress test described by `flags` (see `main.rs`).
pub fn run(flags: &Flags) -> Result<RunStats, Failure> {
    let db_path = flags.required("db")?;
    let expected_path = flags.required("expected")?;
    let shape = shape(flags)?;
    let disable_wal = flags.flag("disable_wal", false)?;
    let fault_interval = Duration::from_millis(flags.get("manifest_fault_interval_ms", 0)?);
    if !fault_interval.is_zero() && disable_wal {
        return Err(Failure::Setup(
            "--manifest_fault_interval_ms needs the log: a reopen after the failure settles writes in flight, which --disable_wal loses by design".into(),
        ));
    }
    let expected = ExpectedState::open_or_create(expected_path.as_ref(), shape)?;
    // Anything left in flight by a crash was settled by `verify`.
    if expected.has_history() {
        return Err(Failure::Setup(format!(
            "{expected_path} has a write history of a killed --disable_wal run: run `verify` first"
        )));
    }
    let power_loss = Duration::from_millis(flags.get("power_loss_after_ms", 0)?);
    if !power_loss.is_zero() && !fault_interval.is_zero() {
        return Err(Failure::Setup(
            "--power_loss_after_ms and --manifest_fault_interval_ms do not go together".into(),
        ));
    }
    let sync = flags.flag("sync", false)?;
    let mut opts = db_options(flags)?;
    let power_fs = if power_loss.is_zero() {
        None
    } else {
        let fs = FaultInjectionFileSystem::new(Arc::new(PosixFileSystem::new()));
        if flags.flag("power_loss_keep_prefix", false)? {
            fs.set_crash_mode(CrashMode::KeepRandomPrefix);
            fs.set_seed(flags.get("seed", 0)?);
        }
        opts.set_file_system(Arc::new(fs.clone()));
        Some(fs)
    };
    let faults = (!fault_interval.is_zero()).then(|| {
        let fs = FaultInjectionFileSystem::new(Arc::new(PosixFileSystem::new()));
        opts.set_file_system(Arc::new(fs.clone()));
        (fs, fault_interval)
    });
    let mut db = DB::open(&opts, &db_path).map_err(|e| open_failure(&db_path, e))?;
    for slot in 0..shape.slots() {
        if expected.get(slot).pending.is_some() {
            return Err(Failure::Setup(format!(
                "slot {slot} has a write in flight: run `verify` first"
            )));
        }
    }
    if let Some(fs) = power_fs {
        cut_power_after(fs, power_loss);
    }
    let mut wo = WriteOptions::default();
    wo.set_sync(sync);
    wo.disable_wal(disable_wal);
    // Without the log, or with it unsynced under a power cut, what
    // survives is a prefix of the writes: keep their history for `verify`.
    let history = if disable_wal || (!power_loss.is_zero() && !sync) {
        Some(Mutex::new(expected.start_history()?))
    } else {
        expected.clear_history()?;
        None
    };
    let value_size_max: usize = flags.get("value_size_max", 100)?;
    let streams: u32 = flags.get("streams", 4)?;
    let setup = RunSetup {
        expected: &expected,
        shape,
        threads: flags.get("threads", 4)?,
        seed: flags.get("seed", 0)?,
        deadline: Instant::now() + Duration::from_millis(flags.get("duration_ms", 10_000)?),
        ops_per_thread: flags.get("ops_per_thread", u64::MAX)?,
        wo,
        value_size_max,
        merge_percent: flags.get("merge_percent", 25u32)?.min(100),
        range_del_percent: flags.get("range_del_percent", 25u32)?.min(100),
        streams,
        history,
        flush_interval: Duration::from_millis(flags.get("flush_interval_ms", 300)?),
        faults,
        locks: (0..shape.slots()).map(|_| Mutex::new(())).collect(),
    };
    let mut stats = RunStats::default();
    let mut rounds = 0u64;
    loop {
        let faulted = run_round(&db, &setup, rounds, &mut stats);
        if !faulted {
            break;
        }
        // The injected failure stopped writes: reopen on the healthy file
        // system. A table the manifest names but a release deleted would
        // fail this open.
        drop(db);
        if let Some((fs, _)) = &setup.faults {
            fs.clear_faults();
        }
        db = DB::open(&opts, &db_path)
            .map_err(|e| open_failure(&db_path, e).context("reopen after a manifest failure"))?;
        crate::verify::settle_after_reopen(&db, &expected, value_size_max)
            .map_err(Failure::Check)?;
        crate::verify::check_files_at_idle(&db, &db_path)
            .map_err(|e| Failure::Check(format!("after the reopen: {e}")))?;
        rounds += 1;
        if Instant::now() >= setup.deadline
            || stats.ops / setup.threads.max(1) >= setup.ops_per_thread
        {
            break;
        }
    }
    drop(setup);
    // A clean end: the whole database must match exactly, and hold exactly
    // its live files.
    crate::verify::check_files_at_idle(&db, &db_path)
        .map_err(|e| Failure::Check(format!("at the end: {e}")))?;
    let checked =
        crate::verify::verify_open_db(&db, &expected, value_size_max).map_err(Failure::Check)?;
    expected.clear_history()?;
    println!(
        "run: {} ops, {} reads verified, {rounds} injected manifest failures survived, then {} keys verified at the end",
        stats.ops, stats.reads_verified, checked
    );
    Ok(stats)
}

/// One round of worker threads until the deadline, the operation budget,
/// or an injected manifest failure. Returns true if the failure stopped
/// the database (it must be reopened); otherwise the round ended with the
/// database flushed.
fn run_round(db: &DB, setup: &RunSetup<'_>, round: u64, stats: &mut RunStats) -> bool {
    let expected = setup.expected;
    let (ops0, reads0) = expected.counters();
    let ctx = Ctx {
        db,
        expected,
        shape: setup.shape,
        locks: &setup.locks,
        history: setup.history.as_ref(),
        wo: setup.wo.clone(),
        value_size_max: setup.value_size_max,
        merge_percent: setup.merge_percent,
        range_del_percent: setup.range_del_percent,
        streams: setup.streams,
        stream_pos: AtomicU32::new(0),
        ops: AtomicU64::new(0),
        reads_verified: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        fault_armed: AtomicBool::new(false),
    };
    let threads = setup.threads;
    let ops_left = setup
        .ops_per_thread
        .saturating_sub(stats.ops / threads.max(1));
    let workers_done = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (ctx, workers_done) = (&ctx, &workers_done);
            let seed = setup
                .seed
                .wrapping_mul(1000)
                .wrapping_add(t)
                .wrapping_add(round.wrapping_mul(7919));
            s.spawn(move || {
                ctx.thread_main(seed, setup.deadline, ops_left);
                workers_done.fetch_add(1, Ordering::SeqCst);
            });
        }
        // The monitor: counters to the file, flushes without a log, and
        // the manifest failure.
        let (mut last_flush, started) = (Instant::now(), Instant::now());
        let mut fault_rng = StdRng::seed_from_u64(setup.seed ^ round);
        while workers_done.load(Ordering::SeqCst) < threads {
            std::thread::sleep(Duration::from_millis(20));
            let (ops, reads) = (
                ctx.ops.load(Ordering::Relaxed),
                ctx.reads_verified.load(Ordering::Relaxed),
            );
            expected.set_counters(ops0 + ops, reads0 + reads);
            if let Some(h) = ctx.history {
                if last_flush.elapsed() >= setup.flush_interval {
                    let before = h.lock().unwrap_or_else(|e| e.into_inner()).len();
                    db.flush().unwrap_or_else(|e| db_error("flush", e));
                    expected.set_history_floor(before);
                    last_flush = Instant::now();
                }
            }
            if let Some((fs, interval)) = &setup.faults {
                if !ctx.fault_armed.load(Ordering::Relaxed) && started.elapsed() >= *interval {
                    let op = if fault_rng.gen_bool(0.5) {
                        FileOp::Sync
                    } else {
                        FileOp::Append
                    };
                    ctx.fault_armed.store(true, Ordering::Relaxed);
                    fs.inject(FaultRule::new(&[op]).path_contains("MANIFEST").times(1));
                    if let Err(e) = db.flush() {
                        if !ctx.is_injected(&e) {
                            db_error("flush", e);
                        }
                        ctx.stop.store(true, Ordering::Relaxed);
                    }
                }
            }
        }
    });
    stats.ops += ctx.ops.load(Ordering::Relaxed);
    stats.reads_verified += ctx.reads_verified.load(Ordering::Relaxed);
    expected.set_counters(
        ops0 + ctx.ops.load(Ordering::Relaxed),
        reads0 + ctx.reads_verified.load(Ordering::Relaxed),
    );
    // The workers' snapshots and iterators are gone. An armed failure no
    // write met yet is taken back; one a background job met shows now.
    if let Some((fs, _)) = &setup.faults {
        fs.clear_faults();
    }
    // Writes the log never saw (--disable_wal) must be in tables before
    // the history goes, or a kill between here and the close (which would
    // flush them too) loses them with nothing left to explain it.
    match db.flush().and_then(|()| db.wait_for_compact()) {
        Ok(()) => false,
        Err(e) if ctx.is_injected(&e) => true,
        Err(e) => db_error("flush at the end of a round", e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(acked: KeyState, pending: Option<KeyState>) -> Slot {
        Slot { acked, pending }
    }

    #[test]
    fn reads_accept_exactly_the_states_a_concurrent_write_allows() {
        let s1 = KeyState::INITIAL.next(true); // generation 1, present
        let s2 = s1.next(false); // generation 2, deleted
        let s3 = s2.next(true); // generation 3, present
        let quiet = slot(s1, None);
        assert!(check_observed(Observed::Present(1), quiet, quiet).is_ok());
        assert!(check_observed(Observed::Absent, quiet, quiet).is_err());
        assert!(check_observed(Observed::Present(2), quiet, quiet).is_err());
        // A delete in flight: old value or nothing.
        let deleting = slot(s1, Some(s2));
        assert!(check_observed(Observed::Present(1), deleting, deleting).is_ok());
        assert!(check_observed(Observed::Absent, deleting, deleting).is_ok());
        assert!(check_observed(Observed::Present(2), deleting, deleting).is_err());
        // Two writes between the reads: the one in between is unknown, so
        // it may have been a delete.
        let after = slot(s3, None);
        assert!(check_observed(Observed::Present(3), quiet, after).is_ok());
        assert!(check_observed(Observed::Absent, quiet, after).is_ok());
        assert!(check_observed(Observed::Present(4), quiet, after).is_err());
        assert!(check_observed(Observed::Present(0), quiet, after).is_err());
    }
}
