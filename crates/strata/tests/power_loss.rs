//! Power loss at random points, on the fault-injecting file system over the
//! memory one: between operations, at a random file operation (inside a
//! write, a flush, a compaction or a manifest switch), after an injected
//! error, and during recovery itself. Some rounds make no synced write,
//! and some hold flushes for a while, so that logs closed by a memtable
//! switch (unsynced until the next synced write or their flush) are still
//! needed when the power goes.
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

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::dump::WalEntry;
use strata_kv::env::{
    CrashMode, FaultInjectionFileSystem, FaultRule, FileLock, FileOp, FileSystem, MemFileSystem,
    RandomAccessFile, SequentialFile, WritableFile,
};
use strata_kv::{
    DBCompressionType, DBRecoveryMode, IteratorMode, Options, SstPartitionerFactory, WriteBatch,
    WriteOptions, DB,
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

fn options(fs: Arc<dyn FileSystem>, rng: &mut StdRng) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_file_system(fs);
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

/// How a round writes.
#[derive(Clone, Copy)]
struct Writes<'a> {
    disable_wal: bool,
    /// One write in this many is synced (0: none).
    sync_one_in: u32,
    /// Flushes held from the start of the round (so that the logs of the
    /// memtables switched out stay, unsynced, beside the newer ones) until
    /// the next switch could have to wait for one or the round ends, with
    /// the number of memtables allowed. Meanwhile the round only writes.
    held: Option<(&'a HeldFlushes, usize)>,
}

/// Memtables switched out and not yet flushed.
fn immutable_memtables(db: &DB) -> usize {
    common::prop(db, "rocksdb.num-immutable-mem-table") as usize
}

/// Runs up to `ops` random operations, recording writes in `h`. Stops at
/// the first error (the file system went down or a fault was injected).
fn workload(db: &DB, rng: &mut StdRng, h: &mut History, ops: usize, writes: Writes, tag: &str) {
    let Writes {
        disable_wal,
        sync_one_in,
        held,
    } = writes;
    for i in 0..ops {
        let mut roll = rng.gen_range(0..100);
        if let Some((gate, max_memtables)) = held.filter(|(gate, _)| gate.is_held()) {
            // The test thread is the only writer: a write switches at most
            // once, so it stops only if the immutable memtables are
            // already as many as they may be.
            if immutable_memtables(db) + 1 >= max_memtables {
                gate.let_go();
            } else if roll < 4 {
                roll = 4; // a write: a flush or compaction would wait
            }
        }
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
            let sync = !disable_wal && sync_one_in > 0 && rng.gen_ratio(1, sync_one_in);
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
    let gate = HeldFlushes::new(Arc::new(fs.clone()), false);
    let max_memtables = rng.gen_range(2..6);
    let mut opts = options(gate.clone(), &mut rng);
    opts.set_max_write_buffer_number(max_memtables as i32);
    let mut state = Model::new();
    for round in 0..rounds {
        let label = format!("seed {seed}, {loss:?}, {mode:?}, round {round}");
        let mut h = History::new(state.clone());
        // Rounds without synced writes leave the logs a memtable switch
        // closed unsynced until their flush: a loss may cut them short,
        // and more likely so while flushes are held.
        let hold = max_memtables > 2 && rng.gen_ratio(1, 2);
        if hold {
            gate.hold();
        }
        let writes = Writes {
            disable_wal: rng.gen_ratio(1, 6),
            sync_one_in: if rng.gen_ratio(1, 3) { 0 } else { 4 },
            held: hold.then_some((gate.as_ref(), max_memtables)),
        };
        {
            let db = DB::open(&opts, DB_DIR).unwrap_or_else(|e| panic!("{label}: open: {e}"));
            match loss {
                Loss::BetweenOperations => {}
                Loss::AtFileOperation => fs.crash_after_ops(rng.gen_range(0..1500)),
                Loss::AfterInjectedError => fs.inject(random_fault(&mut rng)),
            }
            let ops = rng.gen_range(50..500);
            workload(&db, &mut rng, &mut h, ops, writes, &format!("r{round}"));
            if !fs.is_down() {
                fs.crash().unwrap();
            }
            // The held flushes fail on the fallen file system, so that the
            // database can close.
            gate.let_go();
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

/// A file system whose table creations wait while flushes are held: a
/// flush started meanwhile waits too, so the log of the memtable it writes
/// stays (with the writes in it) until they are let go.
#[derive(Debug)]
struct HeldFlushes {
    inner: Arc<dyn FileSystem>,
    held: Mutex<bool>,
    let_go: Condvar,
}

impl HeldFlushes {
    fn new(inner: Arc<dyn FileSystem>, held: bool) -> Arc<HeldFlushes> {
        Arc::new(HeldFlushes {
            inner,
            held: Mutex::new(held),
            let_go: Condvar::new(),
        })
    }

    fn is_held(&self) -> bool {
        *self.held.lock().unwrap()
    }

    fn hold(&self) {
        *self.held.lock().unwrap() = true;
    }

    fn let_go(&self) {
        *self.held.lock().unwrap() = false;
        self.let_go.notify_all();
    }
}

impl FileSystem for HeldFlushes {
    fn create(&self, path: &Path) -> strata_kv::Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            let mut held = self.held.lock().unwrap();
            while *held {
                held = self.let_go.wait(held).unwrap();
            }
        }
        self.inner.create(path)
    }
    fn open_append(&self, path: &Path) -> strata_kv::Result<Box<dyn WritableFile>> {
        self.inner.open_append(path)
    }
    fn open_sequential(&self, path: &Path) -> strata_kv::Result<Box<dyn SequentialFile>> {
        self.inner.open_sequential(path)
    }
    fn open_random_access(&self, path: &Path) -> strata_kv::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random_access(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> strata_kv::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> strata_kv::Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> strata_kv::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> strata_kv::Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn remove_dir(&self, dir: &Path) -> strata_kv::Result<()> {
        self.inner.remove_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn file_size(&self, path: &Path) -> strata_kv::Result<u64> {
        self.inner.file_size(path)
    }
    fn lock(&self, path: &Path) -> strata_kv::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
    fn sync_dir(&self, dir: &Path) -> strata_kv::Result<()> {
        self.inner.sync_dir(dir)
    }
}

/// The database's logs, oldest first.
fn logs(fs: &dyn FileSystem) -> Vec<PathBuf> {
    common::files_ending(fs, DB_DIR, ".log")
        .into_iter()
        .map(|n| Path::new(DB_DIR).join(n))
        .collect()
}

/// Puts `key(i)` = "v{i}" for i = 0, 1, ... on `fs` (flushes held) until
/// the memtable has switched, then five more; returns the open database.
fn write_past_a_switch(fs: Arc<HeldFlushes>) -> DB {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(32 << 10);
    opts.set_file_system(fs.clone());
    let db = DB::open(&opts, DB_DIR).unwrap();
    let mut i = 0;
    let mut after = 0;
    while after < 5 {
        db.put(key(i), format!("v{i}")).unwrap();
        i += 1;
        if logs(fs.as_ref()).len() > 1 {
            after += 1;
        }
        assert!(i < 5_000, "the memtable never switched");
    }
    assert!(i > 10, "the switch came after {i} writes");
    assert_eq!(immutable_memtables(&db), 1, "its flush is held");
    db
}

/// A memtable switch does not sync the log it closes, nor the directory
/// that names the new one; the next synced write does, before its own log.
/// (Before, the switch synced both: the writer that filled the memtable
/// waited.) A power loss right after it loses nothing.
#[test]
fn a_synced_write_makes_the_older_logs_durable() {
    let fault = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let fs = HeldFlushes::new(Arc::new(fault.clone()), true);
    let db = write_past_a_switch(fs.clone());
    let [old, new] = &logs(fs.as_ref())[..] else {
        panic!("expected two logs")
    };
    assert!(
        fault.unsynced_bytes(old) > 0,
        "the switch synced the old log"
    );
    assert!(fault.unsynced_bytes(new) > 0);
    let mut sync = WriteOptions::default();
    sync.set_sync(true);
    db.put_opt(b"synced", b"1", &sync).unwrap();
    assert_eq!(
        fault.unsynced_bytes(old),
        0,
        "{} left unsynced",
        old.display()
    );
    assert_eq!(
        fault.unsynced_bytes(new),
        0,
        "{} left unsynced",
        new.display()
    );
    fault.crash().unwrap();
    fs.let_go();
    drop(db);
    fault.restart();
    let mut opts = Options::default();
    opts.set_file_system(Arc::new(fault.clone()));
    let db = DB::open(&opts, DB_DIR).unwrap();
    assert_eq!(
        db.get(b"synced").unwrap().as_deref(),
        Some(&b"1"[..]),
        "the synced write was lost"
    );
    let keys: Vec<Vec<u8>> = common::contents(&db)
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with(b"k"))
        .collect();
    assert!(keys.len() > 10);
    let written: Vec<Vec<u8>> = (0..keys.len() as u32).map(key).collect();
    assert_eq!(keys, written, "a write before the synced one was lost");
}

/// With several column families, a flush syncs the logs a switch closed
/// before its tables go on record: another family may still need the old
/// log after a power loss, and the flushed family's tables must not hold
/// writes that its replay would lose.
#[test]
fn a_flush_beside_other_families_makes_the_older_logs_durable() {
    let fault = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_file_system(Arc::new(fault.clone()));
    let db = DB::open_cf(&opts, DB_DIR, ["users"]).unwrap();
    let users = db.cf_handle("users").unwrap();
    db.put(b"k", b"default").unwrap();
    db.put_cf(users, b"k", b"users").unwrap();
    let [old] = logs(&fault).try_into().unwrap();
    assert!(fault.unsynced_bytes(&old) > 0);
    db.flush_cf(users).unwrap();
    assert_eq!(
        logs(&fault).len(),
        2,
        "the default family keeps the old log"
    );
    assert_eq!(
        fault.unsynced_bytes(&old),
        0,
        "{} left unsynced",
        old.display()
    );
}

/// What a power loss can leave since a switch no longer syncs the old
/// log: the old log cut short, the new one kept. Recovery must not replay
/// the new log's writes over the hole: it stops where the old log ends
/// (tolerating a torn tail or to a point in time), reports the hole (with
/// absolute consistency), or skips it (salvaging every record).
#[test]
fn a_power_loss_that_cuts_the_old_log_short_ends_recovery_there() {
    let mem = MemFileSystem::new();
    let fs = HeldFlushes::new(Arc::new(mem.clone()), true);
    let db = write_past_a_switch(fs.clone());
    // The files as they are now, flushes held: a crash image.
    let image: Vec<(PathBuf, Vec<u8>)> = mem
        .list(Path::new(DB_DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n != "LOCK")
        .map(|n| {
            let path = Path::new(DB_DIR).join(n);
            let mut bytes = vec![0; mem.file_size(&path).unwrap() as usize];
            let mut f = mem.open_sequential(&path).unwrap();
            let mut at = 0;
            while at < bytes.len() {
                let n = f.read(&mut bytes[at..]).unwrap();
                assert!(n > 0);
                at += n;
            }
            (path, bytes)
        })
        .collect();
    let [old, new] = logs(fs.as_ref()).try_into().unwrap();
    let first_key = |r: &strata_kv::dump::WalRecord| match &r.entries[..] {
        [WalEntry::Put(k, _)] => k.clone(),
        e => panic!("unexpected record {e:?}"),
    };
    let old_records = strata_kv::dump::wal_records(&mem, &old).unwrap();
    let new_keys: Vec<Vec<u8>> = strata_kv::dump::wal_records(&mem, &new)
        .unwrap()
        .iter()
        .map(first_key)
        .collect();
    assert!(
        new_keys.len() >= 5,
        "{} records in the new log",
        new_keys.len()
    );
    fs.let_go();
    drop(db);

    let cut_record = &old_records[old_records.len() / 2];
    let kept: Vec<Vec<u8>> = old_records[..old_records.len() / 2]
        .iter()
        .map(first_key)
        .collect();
    // A power loss keeping the old log up to `cut` (`None`: not at all).
    let recover = |cut: Option<u64>, mode: DBRecoveryMode| {
        let lost = MemFileSystem::new();
        lost.create_dir_all(Path::new(DB_DIR)).unwrap();
        for (path, bytes) in &image {
            let len = if *path == old {
                match cut {
                    Some(cut) => cut as usize,
                    None => continue,
                }
            } else {
                bytes.len()
            };
            let mut f = lost.create(path).unwrap();
            f.append(&bytes[..len]).unwrap();
            f.sync().unwrap();
        }
        let mut opts = Options::default();
        opts.set_file_system(Arc::new(lost));
        opts.set_wal_recovery_mode(mode);
        DB::open(&opts, DB_DIR).map(|db| {
            db.iterator(IteratorMode::Start)
                .map(|r| r.unwrap().0.to_vec())
                .collect::<Vec<Vec<u8>>>()
        })
    };
    let at_record = Some(cut_record.offset);
    let in_record = Some(cut_record.offset + 3);
    for mode in [
        DBRecoveryMode::TolerateCorruptedTailRecords,
        DBRecoveryMode::PointInTimeRecovery,
    ] {
        for cut in [at_record, in_record] {
            let got = recover(cut, mode).unwrap_or_else(|e| panic!("{mode:?}, {cut:?}: {e}"));
            assert_eq!(got, kept, "{mode:?}, old log cut at {cut:?}");
        }
        let got = recover(None, mode).unwrap();
        assert_eq!(got, Vec::<Vec<u8>>::new(), "{mode:?}, old log lost");
    }
    let e = recover(at_record, DBRecoveryMode::AbsoluteConsistency).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    let shown = e.to_string();
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        shown.contains(&name(&new)) && shown.contains(&name(&old)),
        "{shown}"
    );
    let got = recover(at_record, DBRecoveryMode::SkipAnyCorruptedRecords).unwrap();
    let mut salvaged = kept.clone();
    salvaged.extend(new_keys);
    salvaged.sort();
    assert_eq!(got, salvaged, "skipping corrupted records");
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
