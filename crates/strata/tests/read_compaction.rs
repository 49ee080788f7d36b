//! Read-triggered compactions (`Options::set_read_triggered_compactions`):
//! a level-0 file below the compaction trigger that point lookups keep
//! searching in vain (they read a block of it and find their key in an
//! older level) is compacted down once they have wasted its allowance,
//! and the database still holds what a `BTreeMap` model holds. Lookups
//! that a filter turns away from the file waste nothing, and the option
//! off leaves the file where it is. Below level 0 the same holds for a
//! file of level 1 over keys that lookups find in level 2. Batched
//! lookups (`multi_get`) charge as point lookups do, and scans charge
//! through the iterators' read samples (one per mebibyte returned, on
//! average). A read-triggered compaction waits until no write has come
//! for a second, so each test lets that second pass before it checks
//! (`settle`).

mod common;

use common::{contents, files_per_level, prop};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::MemFileSystem;
use strata_kv::{BlockBasedOptions, Options, DB};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Lookups a small file may waste before it is due (LevelDB's minimum).
const MIN_ALLOWED_SEEKS: u32 = 100;

/// Waits out the pause in writes a read-triggered compaction waits for
/// (one second), then for every compaction.
fn settle(db: &DB) {
    std::thread::sleep(Duration::from_millis(1_300));
    db.wait_for_compact().unwrap();
}

/// `settle`, where a read-triggered compaction is due: first waits (up
/// to 20 s) until one has run. The quiet-time gate and the background
/// thread's wake-up are timers, and on a loaded machine (CI runs these
/// tests side by side on 2 cores) they can fire after `settle` looked.
fn settle_after_read_compaction(db: &DB) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while prop(db, "strata.num-read-triggered-compactions") == 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    settle(db);
}

/// Settles, then checks that level 0 still holds its `l0` files and no
/// read-triggered compaction ran.
fn assert_level0_kept(db: &DB, l0: u32) {
    settle(db);
    assert_eq!(files_per_level(db)[0] as u32, l0);
    assert_eq!(prop(db, "strata.num-read-triggered-compactions"), 0);
}

fn key(i: u32) -> Vec<u8> {
    format!("{i:08}").into_bytes()
}

/// Puts of random 60-byte values, recorded in a model.
struct RandomWrites {
    rng: StdRng,
    model: Model,
}

impl RandomWrites {
    fn new(seed: u64) -> RandomWrites {
        RandomWrites {
            rng: StdRng::seed_from_u64(seed),
            model: Model::new(),
        }
    }

    fn put(&mut self, db: &DB, i: u32) {
        let v: Vec<u8> = (0..60).map(|_| self.rng.gen()).collect();
        db.put(key(i), &v).unwrap();
        self.model.insert(key(i), v);
    }
}

fn options(bloom: bool, read_triggered: bool) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(MemFileSystem::new()));
    opts.set_write_buffer_size(4 << 20);
    opts.set_target_file_size_base(64 << 10);
    opts.set_level_zero_file_num_compaction_trigger(4);
    opts.set_read_triggered_compactions(read_triggered);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(1024);
    if bloom {
        t.set_bloom_filter(10.0, false);
    }
    opts.set_block_based_table_factory(&t);
    opts
}

/// A database whose lower levels hold the even keys below 10,000 and whose
/// level 0 holds one flush of keys 1, 11, 21, ... over the same range, with
/// the model of both and the number of level-0 files (the flush may be cut
/// where the lower level's files end).
fn open_with_one_level0_flush(opts: &Options) -> (DB, Model, u32) {
    let db = DB::open(opts, "/db").unwrap();
    let mut writes = RandomWrites::new(7);
    for i in (0..10_000).step_by(2) {
        writes.put(&db, i);
    }
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    for i in (1..10_000).step_by(10) {
        writes.put(&db, i);
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    let l0 = files_per_level(&db)[0] as u32;
    assert!(l0 >= 1, "the flush stays in level 0, below the trigger");
    assert!(files_per_level(&db)[1..].iter().sum::<u64>() > 0);
    (db, writes.model, l0)
}

/// `n` even keys (in the lower levels, not in the level-0 file), spread
/// over the key range.
fn lower_keys(n: u32) -> Vec<Vec<u8>> {
    (0..n).map(|j| key((j * 38) % 10_000)).collect()
}

/// Looks up `n` even keys (in the lower levels, not in the level-0 file),
/// checking each against the model.
fn read_lower_keys(db: &DB, model: &Model, n: u32) {
    for k in lower_keys(n) {
        assert_eq!(
            db.get(&k).unwrap().as_deref(),
            model.get(&k).map(|v| &v[..])
        );
    }
}

#[test]
fn lookups_that_search_a_level0_file_in_vain_compact_it_down() {
    let (db, model, l0) = open_with_one_level0_flush(&options(false, true));
    // Under their allowance (shared out over the files), the files stay.
    read_lower_keys(&db, &model, MIN_ALLOWED_SEEKS - 10);
    settle(&db);
    assert_eq!(files_per_level(&db)[0] as u32, l0);
    assert_eq!(prop(&db, "strata.num-read-triggered-compactions"), 0);
    // Past it, the files go down and the data stays whole.
    read_lower_keys(&db, &model, 3 * l0 * MIN_ALLOWED_SEEKS);
    settle_after_read_compaction(&db);
    assert_eq!(files_per_level(&db)[0], 0, "level 0 is compacted down");
    assert!(prop(&db, "strata.num-read-triggered-compactions") >= 1);
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(contents(&db), expected);
    read_lower_keys(&db, &model, 1_000);
    for i in (1..10_000).step_by(10) {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            model.get(&key(i)).map(|v| &v[..])
        );
    }
}

/// `read_lower_keys` in batches of 16 (`multi_get`).
fn multi_get_lower_keys(db: &DB, model: &Model, n: u32) {
    for batch in lower_keys(n).chunks(16) {
        for (k, got) in batch.iter().zip(db.multi_get(batch)) {
            assert_eq!(got.unwrap().as_deref(), model.get(k).map(|v| &v[..]));
        }
    }
}

#[test]
fn batched_lookups_that_search_a_level0_file_in_vain_compact_it_down() {
    let (db, model, l0) = open_with_one_level0_flush(&options(false, true));
    // Keys level 0 holds: searched there and found, nothing wasted.
    let upper: Vec<Vec<u8>> = (1..10_000).step_by(10).map(key).collect();
    for _ in 0..3 * l0 {
        for batch in upper.chunks(16) {
            for (k, got) in batch.iter().zip(db.multi_get(batch)) {
                assert_eq!(got.unwrap().as_deref(), Some(&model[k][..]));
            }
        }
    }
    multi_get_lower_keys(&db, &model, MIN_ALLOWED_SEEKS - 10);
    settle(&db);
    assert_eq!(files_per_level(&db)[0] as u32, l0, "under the allowance");
    assert_eq!(prop(&db, "strata.num-read-triggered-compactions"), 0);
    multi_get_lower_keys(&db, &model, 3 * l0 * MIN_ALLOWED_SEEKS);
    settle_after_read_compaction(&db);
    assert_eq!(files_per_level(&db)[0], 0, "level 0 is compacted down");
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(contents(&db), expected);
    multi_get_lower_keys(&db, &model, 1_000);
}

#[test]
fn batched_lookups_a_filter_turns_away_waste_nothing() {
    let (db, model, l0) = open_with_one_level0_flush(&options(true, true));
    multi_get_lower_keys(&db, &model, 3 * l0 * MIN_ALLOWED_SEEKS);
    assert_level0_kept(&db, l0);
}

/// A database for scans: 400 keys (the even numbers below 800) with 4 KiB
/// values in one file below level 0, and one level-0 file of 40 keys
/// (1, 21, 41, ...) over the same range, with the model. A whole scan
/// returns about 1.8 MB.
fn open_for_scans(read_triggered: bool) -> (DB, Model) {
    let mut opts = options(false, read_triggered);
    opts.set_target_file_size_base(64 << 20);
    let db = DB::open(&opts, "/db").unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let mut model = Model::new();
    let mut put = |db: &DB, i: u32| {
        let v: Vec<u8> = (0..4096).map(|_| rng.gen()).collect();
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    };
    for i in (0..800).step_by(2) {
        put(&db, i);
    }
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    for i in (1..800).step_by(20) {
        put(&db, i);
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    let levels = files_per_level(&db);
    assert_eq!(levels[0], 1, "{levels:?}");
    assert_eq!(levels[1..].iter().sum::<u64>(), 1, "{levels:?}");
    (db, model)
}

/// Scans the whole database `n` times, checking the first scan against
/// the model.
fn scan(db: &DB, model: &Model, n: u32) {
    for round in 0..n {
        let mut it = db.raw_iterator();
        it.seek_to_first();
        let mut expected = model.iter();
        while let Some((k, v)) = it.item() {
            if round == 0 {
                assert_eq!(Some((k, v)), expected.next().map(|(k, v)| (&k[..], &v[..])));
            }
            it.next();
        }
        it.status().unwrap();
        if round == 0 {
            assert_eq!(expected.next(), None);
        }
    }
}

#[test]
fn scans_over_a_level0_file_and_an_older_one_compact_it_down() {
    let (db, model) = open_for_scans(true);
    // About 45 MB returned, some 43 samples (under the file's 100).
    scan(&db, &model, 25);
    settle(&db);
    assert_eq!(files_per_level(&db)[0], 1, "under the allowance");
    assert_eq!(prop(&db, "strata.num-read-triggered-compactions"), 0);
    // About 360 MB, some 340 samples, nearly all of keys both files span.
    scan(&db, &model, 200);
    settle_after_read_compaction(&db);
    assert_eq!(files_per_level(&db)[0], 0, "level 0 is compacted down");
    assert!(prop(&db, "strata.num-read-triggered-compactions") >= 1);
    scan(&db, &model, 1);
}

#[test]
fn scans_charge_nothing_with_read_triggered_compactions_off() {
    let (db, model) = open_for_scans(false);
    scan(&db, &model, 200);
    settle(&db);
    assert_eq!(files_per_level(&db)[0], 1);
    assert_eq!(prop(&db, "strata.num-read-triggered-compactions"), 0);
}

#[test]
fn lookups_a_filter_turns_away_waste_nothing() {
    let (db, model, l0) = open_with_one_level0_flush(&options(true, true));
    read_lower_keys(&db, &model, 3 * l0 * MIN_ALLOWED_SEEKS);
    settle(&db);
    assert_eq!(
        files_per_level(&db)[0] as u32,
        l0,
        "the filter kept the lookups out"
    );
    assert_eq!(prop(&db, "strata.num-read-triggered-compactions"), 0);
}

#[test]
fn read_triggered_compactions_can_be_turned_off() {
    let (db, model, l0) = open_with_one_level0_flush(&options(false, false));
    read_lower_keys(&db, &model, 3 * l0 * MIN_ALLOWED_SEEKS);
    assert_level0_kept(&db, l0);
}

/// A database with keys 0, 2, 4, ... below 10,000 in level 2 and keys
/// 1, 11, 21, ... over the same range in level 1, nothing in level 0
/// (each flush is compacted at once), with its model. The even keys are
/// written with a level-1 target of 1 KiB, so they all go on to level 2;
/// the database is then reopened with one of 1 MiB for the odd keys.
fn open_with_levels_1_and_2() -> (DB, Model) {
    let mut opts = options(false, true);
    opts.set_level_zero_file_num_compaction_trigger(1);
    opts.set_max_bytes_for_level_base(1 << 10);
    opts.set_max_bytes_for_level_multiplier(10_000.0);
    let mut writes = RandomWrites::new(11);
    let db = DB::open(&opts, "/db").unwrap();
    for i in (0..10_000).step_by(2) {
        writes.put(&db, i);
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    assert_eq!(files_per_level(&db)[..2], [0, 0]);
    drop(db);
    opts.set_max_bytes_for_level_base(1 << 20);
    opts.set_max_bytes_for_level_multiplier(10.0);
    let db = DB::open(&opts, "/db").unwrap();
    for i in (1..10_000).step_by(10) {
        writes.put(&db, i);
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    (db, writes.model)
}

#[test]
fn lookups_that_search_a_level1_file_in_vain_compact_it_into_level2() {
    let (db, model) = open_with_levels_1_and_2();
    let before = files_per_level(&db);
    assert_eq!(before[0], 0, "level 0 is empty: {before:?}");
    assert!(before[1] > 0 && before[2] > 0, "{before:?}");
    assert_eq!(prop(&db, "strata.num-read-triggered-compactions"), 0);
    // Every key, many times over: those in level 2 under a level-1 file's
    // range are searched there in vain first.
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    for round in 0..20 {
        for k in &keys {
            assert_eq!(
                db.get(k).unwrap().as_deref(),
                Some(&model[*k][..]),
                "round {round}"
            );
        }
    }
    settle_after_read_compaction(&db);
    let after = files_per_level(&db);
    assert!(
        prop(&db, "strata.num-read-triggered-compactions") >= 1,
        "{before:?} -> {after:?}"
    );
    assert_eq!(after[0], 0);
    assert!(after[1] < before[1], "{before:?} -> {after:?}");
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    assert_eq!(contents(&db), expected);
}

#[test]
fn a_steady_writer_holds_read_triggered_compactions_back() {
    let (db, mut model, l0) = open_with_one_level0_flush(&options(false, true));
    let db = Arc::new(db);
    let stop = Arc::new(AtomicBool::new(false));
    // A write every 10 ms, to keys the reads do not touch: too few to
    // flush, enough that no second passes without one.
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut written = Model::new();
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let (k, v) = (format!("w{i:06}").into_bytes(), vec![b'w'; 20]);
                db.put(&k, &v).unwrap();
                written.insert(k, v);
                i += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            written
        })
    };
    read_lower_keys(&db, &model, 3 * l0 * MIN_ALLOWED_SEEKS);
    std::thread::sleep(Duration::from_millis(1_500));
    db.wait_for_compact().unwrap();
    assert_eq!(prop(&db, "strata.num-read-triggered-compactions"), 0);
    assert_eq!(
        files_per_level(&db)[0] as u32,
        l0,
        "held back while writes come"
    );
    stop.store(true, Ordering::Relaxed);
    model.extend(writer.join().unwrap());
    // The files stay due: the next wasted lookups name them again, and
    // once the writes have paused for a second they go down.
    read_lower_keys(&db, &model, 3 * l0 * MIN_ALLOWED_SEEKS);
    settle_after_read_compaction(&db);
    assert!(prop(&db, "strata.num-read-triggered-compactions") >= 1);
    assert_eq!(files_per_level(&db)[0], 0, "level 0 is compacted down");
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(contents(&db), expected);
}
