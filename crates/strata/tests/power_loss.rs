//! Power loss at random points, on the fault-injecting file system over the
//! memory one: between operations, at a random file operation (inside a
//! write, a flush, a compaction or a manifest switch), after an injected
//! error, and during recovery itself.
//!
//! The check after each loss: the database reopens without error, gets and
//! a full scan agree, and the recovered contents equal the state after some
//! prefix `writes[..k]` of the writes attempted since the last reopen, with
//! `k >= floor`, where `floor` counts every write up to the last one
//! acknowledged with `sync = true` and every write acknowledged before a
//! successful `flush`. A write that failed may be in or out (it is the last
//! one attempted: the workload stops at the first error).
//!
//! Seeds are printed on failure; `STRATA_POWER_LOSS_SEED=<n>` replays one
//! and `STRATA_POWER_LOSS_SEEDS=<count>` runs more (the default keeps the
//! file under a few seconds).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::{
    CrashMode, FaultInjectionFileSystem, FaultRule, FileOp, FileSystem, MemFileSystem,
};
use strata_kv::{
    DBCompressionType, IteratorMode, Options, SstPartitionerFactory, WriteBatch, WriteOptions, DB,
};

const KEYS: u32 = 300;
const DB_DIR: &str = "/db";

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// One write: keys set (Some) or deleted (None), applied atomically.
type Write = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The writes since the last reopen and how many must survive.
#[derive(Default)]
struct History {
    base: Model,
    writes: Vec<Write>,
    floor: usize,
}

impl History {
    fn new(base: Model) -> History {
        History {
            base,
            writes: Vec::new(),
            floor: 0,
        }
    }
}

fn seeds(default_count: u64) -> Vec<u64> {
    if let Ok(s) = std::env::var("STRATA_POWER_LOSS_SEED") {
        return vec![s.parse().expect("STRATA_POWER_LOSS_SEED is a number")];
    }
    let count = std::env::var("STRATA_POWER_LOSS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_count);
    (0..count).collect()
}

fn options(fs: &FaultInjectionFileSystem, rng: &mut StdRng) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_file_system(Arc::new(fs.clone()));
    o.set_write_buffer_size(rng.gen_range(4096..16384));
    o.set_target_file_size_base(rng.gen_range(8 << 10..32 << 10));
    o.set_max_bytes_for_level_base(rng.gen_range(32 << 10..128 << 10));
    o.set_level_zero_file_num_compaction_trigger(rng.gen_range(2..5));
    o.set_max_background_jobs(rng.gen_range(1..3));
    let compression = if rng.gen_bool(0.5) {
        DBCompressionType::None
    } else {
        DBCompressionType::Snappy
    };
    o.set_compression_type(compression);
    // Cutting on (the default) most of the time, sometimes off or with a
    // partitioner ("k" and two digits: 100 keys per partition).
    o.set_stream_aware_cutting(rng.gen_ratio(4, 5));
    if rng.gen_ratio(1, 4) {
        o.set_sst_partitioner_factory(SstPartitionerFactory::fixed_prefix(3));
    }
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// A write of random keys, or (half the time) of the next key of one of
/// four ascending streams over quarters of the key space, whose flushes are
/// cut into several tables (stream-aware cutting); `op` drives the streams.
fn random_write(rng: &mut StdRng, tag: &str, op: usize) -> Write {
    let value = |rng: &mut StdRng| {
        let mut v = format!("{tag}:").into_bytes();
        v.resize(
            v.len() + rng.gen_range(0..200),
            b'a' + rng.gen_range(0..26u8),
        );
        v
    };
    let n = if rng.gen_ratio(1, 6) {
        rng.gen_range(2..9)
    } else {
        1
    };
    let streams = rng.gen_bool(0.5);
    (0..n)
        .map(|j| {
            let k = if streams {
                let quarter = KEYS / 4;
                key(rng.gen_range(0..4) * quarter + (op + j) as u32 % quarter)
            } else {
                key(rng.gen_range(0..KEYS))
            };
            let v = (!rng.gen_ratio(1, 5)).then(|| value(rng));
            (k, v)
        })
        .collect()
}

fn apply(model: &mut Model, write: &Write) {
    for (k, v) in write {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
}

fn to_batch(write: &Write) -> WriteBatch {
    let mut b = WriteBatch::default();
    for (k, v) in write {
        match v {
            Some(v) => b.put(k, v),
            None => b.delete(k),
        }
    }
    b
}

/// The smallest `k` in `floor..=writes.len()` whose state equals
/// `recovered`, found by keeping the set of keys that differ up to date as
/// each write is applied.
fn matching_prefix(h: &History, recovered: &Model) -> Option<usize> {
    let mut model = h.base.clone();
    for w in &h.writes[..h.floor] {
        apply(&mut model, w);
    }
    let mut differ: BTreeSet<Vec<u8>> = model
        .keys()
        .chain(recovered.keys())
        .filter(|k| model.get(*k) != recovered.get(*k))
        .cloned()
        .collect();
    if differ.is_empty() {
        return Some(h.floor);
    }
    for (i, w) in h.writes.iter().enumerate().skip(h.floor) {
        apply(&mut model, w);
        for (k, _) in w {
            if model.get(k) == recovered.get(k) {
                differ.remove(k);
            } else {
                differ.insert(k.clone());
            }
        }
        if differ.is_empty() {
            return Some(i + 1);
        }
    }
    None
}

/// Reads everything back, checks gets against the scan and the scan
/// against the history. Returns the recovered contents.
fn verify(db: &DB, h: &History, label: &str) -> Model {
    let recovered: Model = db
        .iterator(IteratorMode::Start)
        .map(|r| {
            let (k, v) = r.unwrap_or_else(|e| panic!("{label}: scan after recovery: {e}"));
            (k.to_vec(), v.to_vec())
        })
        .collect();
    for i in 0..KEYS {
        let k = key(i);
        let got = db
            .get(&k)
            .unwrap_or_else(|e| panic!("{label}: get after recovery: {e}"));
        assert_eq!(
            got.as_ref(),
            recovered.get(&k),
            "{label}: get and scan disagree on {}",
            String::from_utf8_lossy(&k)
        );
    }
    if matching_prefix(h, &recovered).is_none() {
        let mut want = h.base.clone();
        for w in &h.writes[..h.floor] {
            apply(&mut want, w);
        }
        let wrong: Vec<String> = want
            .keys()
            .chain(recovered.keys())
            .filter(|k| want.get(*k) != recovered.get(*k))
            .take(5)
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect();
        panic!(
            "{label}: recovered state is no prefix of the {} writes that includes the \
             {} that had to survive (first keys differing from the floor state: {wrong:?})",
            h.writes.len(),
            h.floor
        );
    }
    recovered
}

/// Reopens after a loss, retrying while an armed crash keeps hitting the
/// recovery itself; then verifies.
fn reopen_and_verify(
    fs: &FaultInjectionFileSystem,
    opts: &Options,
    h: &History,
    label: &str,
) -> Model {
    // Each pass either opens or consumes the armed crash, so there are at
    // most two.
    let db = loop {
        match DB::open(opts, DB_DIR) {
            Ok(db) => {
                fs.clear_faults();
                if !fs.is_down() {
                    break db;
                }
                // The armed crash hit the background work after the open.
                drop(db);
                fs.restart();
            }
            // The armed crash hit the recovery: power is lost again.
            Err(_) if fs.is_down() => fs.restart(),
            Err(e) => panic!("{label}: reopen after power loss: {e}"),
        }
    };
    let recovered = verify(&db, h, label);
    drop(db);
    recovered
}

/// Runs up to `ops` random operations, recording writes in `h`. Stops at
/// the first error (the file system went down or a fault was injected).
fn workload(db: &DB, rng: &mut StdRng, h: &mut History, ops: usize, disable_wal: bool, tag: &str) {
    for i in 0..ops {
        let roll = rng.gen_range(0..100);
        let ok = if roll < 3 {
            let before = h.writes.len();
            let ok = db.flush().is_ok();
            if ok {
                h.floor = h.floor.max(before);
            }
            ok
        } else if roll < 4 {
            let before = h.writes.len();
            let ok = db.compact_range(None::<&[u8]>, None::<&[u8]>).is_ok();
            if ok {
                h.floor = h.floor.max(before);
            }
            ok
        } else {
            let write = random_write(rng, &format!("{tag}.{i}"), i);
            let mut wo = WriteOptions::default();
            let sync = !disable_wal && rng.gen_ratio(1, 4);
            wo.set_sync(sync);
            wo.disable_wal(disable_wal);
            let ok = db.write_opt(to_batch(&write), &wo).is_ok();
            h.writes.push(write);
            if ok && sync {
                h.floor = h.writes.len();
            }
            ok
        };
        if !ok {
            return;
        }
    }
}

/// How a round ends.
#[derive(Clone, Copy, Debug)]
enum Loss {
    /// `crash()` from the test thread between two operations.
    BetweenOperations,
    /// `crash_after_ops(n)`: at a random file operation.
    AtFileOperation,
    /// An error injected into flush, compaction or manifest I/O, then a
    /// crash.
    AfterInjectedError,
}

fn run(seed: u64, loss: Loss, mode: CrashMode, rounds: usize) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_0000);
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    fs.set_seed(seed);
    fs.set_crash_mode(mode);
    let opts = options(&fs, &mut rng);
    let mut state = Model::new();
    for round in 0..rounds {
        let label = format!("seed {seed}, {loss:?}, {mode:?}, round {round}");
        let mut h = History::new(state.clone());
        let disable_wal = rng.gen_ratio(1, 6);
        {
            let db = DB::open(&opts, DB_DIR).unwrap_or_else(|e| panic!("{label}: open: {e}"));
            match loss {
                Loss::BetweenOperations => {}
                Loss::AtFileOperation => fs.crash_after_ops(rng.gen_range(0..1500)),
                Loss::AfterInjectedError => fs.inject(random_fault(&mut rng)),
            }
            let ops = rng.gen_range(50..500);
            workload(
                &db,
                &mut rng,
                &mut h,
                ops,
                disable_wal,
                &format!("r{round}"),
            );
            if !fs.is_down() {
                fs.crash().unwrap();
            }
        }
        fs.clear_faults();
        fs.restart();
        if rng.gen_ratio(1, 4) {
            // The next loss lands inside the recovery.
            fs.crash_after_ops(rng.gen_range(0..40));
        }
        state = reopen_and_verify(&fs, &opts, &h, &label);
        fs.clear_faults();
    }
    let stats = fs.stats();
    assert!(stats.crashes >= rounds as u64, "{stats:?}");
}

/// A one-shot error in table, manifest or CURRENT I/O.
fn random_fault(rng: &mut StdRng) -> FaultRule {
    let (ops, path): (&[FileOp], &str) = match rng.gen_range(0..6) {
        0 => (&[FileOp::Create], ".sst"),
        1 => (&[FileOp::Append, FileOp::Sync], ".sst"),
        2 => (&[FileOp::Append, FileOp::Sync], "MANIFEST"),
        3 => (&[FileOp::Rename], "CURRENT"),
        4 => (&[FileOp::SyncDir], ""),
        _ => (&[FileOp::Append], ".log"),
    };
    FaultRule::new(ops)
        .path_contains(path)
        .after(rng.gen_range(0..30))
        .times(1)
}

#[test]
fn power_loss_between_operations() {
    for seed in seeds(20) {
        run(seed, Loss::BetweenOperations, CrashMode::DropUnsynced, 5);
    }
}

#[test]
fn power_loss_at_a_random_file_operation() {
    for seed in seeds(20) {
        run(seed, Loss::AtFileOperation, CrashMode::DropUnsynced, 5);
    }
}

#[test]
fn power_loss_after_an_injected_error() {
    for seed in seeds(20) {
        run(seed, Loss::AfterInjectedError, CrashMode::DropUnsynced, 5);
    }
}

#[test]
fn power_loss_keeping_part_of_the_unsynced_state() {
    for seed in seeds(20) {
        run(seed, Loss::AtFileOperation, CrashMode::KeepRandomPrefix, 5);
        run(
            seed,
            Loss::BetweenOperations,
            CrashMode::KeepRandomPrefix,
            3,
        );
    }
}

/// Regression: a memtable switch left the old log's unsynced tail
/// volatile, so a later synced write (in the new log) could survive a power
/// loss while earlier writes in the old log did not: no prefix. The switch
/// now syncs the old log.
#[test]
fn memtable_switch_makes_the_old_log_durable() {
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    // Big enough that the first switch comes after many writes.
    opts.set_write_buffer_size(32 << 10);
    let db = DB::open(&opts, DB_DIR).unwrap();
    // Keep the switched memtable (and so its log) from being flushed.
    fs.inject(FaultRule::new(&[FileOp::Create]).path_contains(".sst"));
    let logs = || {
        let mut logs: Vec<String> = fs
            .list(std::path::Path::new(DB_DIR))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".log"))
            .collect();
        logs.sort();
        logs
    };
    let mut i = 0;
    while logs().len() < 2 {
        // Fails once the flush of the switched memtable has failed.
        let _ = db.put(key(i % KEYS), [b'u'; 100]);
        i += 1;
        assert!(i < 10_000, "the memtable never switched");
    }
    assert!(i > 10, "the switch came after {i} writes");
    let old = std::path::Path::new(DB_DIR).join(&logs()[0]);
    assert_eq!(
        fs.unsynced_bytes(&old),
        0,
        "{} left unsynced",
        old.display()
    );
}

/// Regression: flush and compaction synced a new table but not its
/// directory entry before the manifest named it, so a power loss right
/// after a flush or compaction left "table file named by the manifest is
/// missing". Tables now get a `sync_dir` before the manifest edit.
#[test]
fn tables_survive_power_loss_right_after_flush_and_compaction() {
    for compact in [false, true] {
        let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_file_system(Arc::new(fs.clone()));
        opts.set_disable_auto_compactions(true);
        let mut h = History::new(Model::new());
        {
            let db = DB::open(&opts, DB_DIR).unwrap();
            for round in 0..3 {
                for i in 0..50 {
                    let w: Write = vec![(key(i), Some(format!("v{round}").into_bytes()))];
                    db.write(to_batch(&w)).unwrap();
                    h.writes.push(w);
                }
                db.flush().unwrap();
            }
            if compact {
                db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
            }
            h.floor = h.writes.len();
            fs.crash().unwrap();
        }
        fs.restart();
        let db =
            DB::open(&opts, DB_DIR).unwrap_or_else(|e| panic!("reopen (compact = {compact}): {e}"));
        verify(&db, &h, &format!("compact = {compact}"));
    }
}
