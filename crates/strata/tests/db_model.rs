//! Randomized operations against a `BTreeMap` model: puts, deletes,
//! range deletions, whole-range compactions (which drop range deletions
//! at the bottom), merges (an append operator whose partial merge
//! sometimes declines),
//! batches, gets, bounded iteration both ways (and by prefix steps, with
//! a prefix extractor that may change at each reopen), snapshots, flushes
//! and reopens, with buffers small enough that many files and levels appear.
//! Manifest writes fail now and then (on the fault-injecting file system)
//! while an iterator and snapshots are held; the database must then keep
//! every file, and the reopen must find every acknowledged write. At idle
//! points the table files on disk must be exactly the live ones.
//!
//! Every seed is printed; replay one with `STRATA_SEED=<seed>`. Scale with
//! `STRATA_MODEL_SEEDS` and `STRATA_MODEL_OPS`.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::{FaultInjectionFileSystem, FaultRule, FileOp, MemFileSystem};
use strata_kv::{BlockBasedOptions, Options, ReadOptions, WriteBatch, DB};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Options for one open, and the length of the fixed prefix extractor it
/// sets, if any (it may change from one open to the next).
fn options(fs: &FaultInjectionFileSystem, rng: &mut StdRng) -> (Options, Option<usize>) {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    opts.set_write_buffer_size(rng.gen_range(8..64) << 10);
    opts.set_target_file_size_base(rng.gen_range(8..64) << 10);
    opts.set_max_bytes_for_level_base(rng.gen_range(64..256) << 10);
    opts.set_max_bytes_for_level_multiplier(4.0);
    opts.set_level_zero_file_num_compaction_trigger(rng.gen_range(2..5));
    opts.set_max_write_buffer_number(rng.gen_range(2..4));
    let mut t = BlockBasedOptions::default();
    t.set_block_size(rng.gen_range(256..4096));
    t.set_block_restart_interval(rng.gen_range(1..17));
    t.set_bloom_filter(if rng.gen_bool(0.5) { 10.0 } else { 0.0 }, false);
    if rng.gen_bool(0.3) {
        t.set_cache_index_and_filter_blocks(true);
        t.set_pin_l0_filter_and_index_blocks_in_cache(rng.gen_bool(0.5));
        t.set_block_cache(&strata_kv::Cache::new_lru_cache(rng.gen_range(4..64) << 10));
    }
    opts.set_block_based_table_factory(&t);
    let compression = ["none", "snappy", "lz4", "zstd"][rng.gen_range(0..4)];
    opts.set_compression_type(compression.parse().unwrap());
    // Keys are "key" and 5 digits: groups of 100 or 10 keys share a prefix.
    let prefix_len = [None, Some(6), Some(7)][rng.gen_range(0..3)];
    if let Some(n) = prefix_len {
        opts.set_prefix_extractor(strata_kv::SliceTransform::create_fixed_prefix(n));
    }
    // Stream-aware cutting on or off, sometimes with a partitioner: the
    // answers must not change.
    opts.set_stream_aware_cutting(rng.gen_bool(0.5));
    if rng.gen_bool(0.25) {
        opts.set_sst_partitioner_factory(strata_kv::SstPartitionerFactory::fixed_prefix(
            rng.gen_range(5..8),
        ));
    }
    // Packed tables in some levels (keys of one table are often dense or
    // gappy runs of digits: every key index kind is met), the format
    // changing from one open to the next.
    if rng.gen_bool(0.35) {
        let mut p = strata_kv::PackedTableOptions::default();
        p.set_from_level(rng.gen_range(0..3));
        p.set_lazy_checksums(rng.gen_bool(0.5));
        opts.set_packed_table_factory(&p);
    }
    opts.set_merge_operator("append", common::append, append_partial);
    (opts, prefix_len)
}

/// Its partial merge: the operands joined, except for runs of a multiple
/// of three operands, which it declines (they then stay apart).
fn append_partial(
    key: &[u8],
    base: Option<&[u8]>,
    operands: &strata_kv::MergeOperands,
) -> Option<Vec<u8>> {
    assert!(base.is_none(), "a partial merge has no base");
    if operands.len().is_multiple_of(3) {
        return None;
    }
    common::append(key, None, operands)
}

/// What the model holds after merging `operand` into `k`.
fn model_merge(model: &mut Model, k: Vec<u8>, operand: &[u8]) {
    model.entry(k).or_default().extend_from_slice(operand);
}

/// What the model holds after deleting `[from, to)`.
fn model_delete_range(model: &mut Model, from: &[u8], to: &[u8]) {
    if from < to {
        let doomed: Vec<Vec<u8>> = model
            .range::<[u8], _>((Bound::Included(from), Bound::Excluded(to)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in doomed {
            model.remove(&k);
        }
    }
}

/// A range to delete: mostly a few keys wide, now and then hundreds, and
/// sometimes empty.
fn delete_range_bounds(rng: &mut StdRng) -> (Vec<u8>, Vec<u8>) {
    let a = rng.gen_range(0..2000u32);
    let width = if rng.gen_bool(0.1) {
        rng.gen_range(0..600)
    } else {
        rng.gen_range(0..12)
    };
    let b = (a + width).min(2000);
    (
        format!("key{a:05}").into_bytes(),
        format!("key{b:05}").into_bytes(),
    )
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:05}", rng.gen_range(0..2000)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = if rng.gen_bool(0.02) {
        rng.gen_range(1000..5000)
    } else {
        rng.gen_range(0..64)
    };
    (0..len).map(|_| rng.gen()).collect()
}

fn range_of(
    model: &Model,
    lower: &Option<Vec<u8>>,
    upper: &Option<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let lo = lower.clone().map_or(Bound::Unbounded, Bound::Included);
    let hi = upper.clone().map_or(Bound::Unbounded, Bound::Excluded);
    if let (Bound::Included(l), Bound::Excluded(h)) = (&lo, &hi) {
        if l >= h {
            return Vec::new();
        }
    }
    model
        .range((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Checks up to `steps` entries of a bounded iteration in a random
/// direction against the model; with a prefix extractor of `prefix_len`
/// bytes, sometimes by prefix steps (`next_prefix` then `prev_prefix`).
fn check_iteration(
    db: &DB,
    model: &Model,
    snapshot: Option<&strata_kv::Snapshot<'_>>,
    rng: &mut StdRng,
    prefix_len: Option<usize>,
) {
    let mut ro = ReadOptions::default();
    let lower = rng.gen_bool(0.3).then(|| key(rng));
    let upper = rng.gen_bool(0.3).then(|| key(rng));
    if let Some(l) = &lower {
        ro.set_iterate_lower_bound(l.clone());
    }
    if let Some(u) = &upper {
        ro.set_iterate_upper_bound(u.clone());
    }
    if let Some(s) = snapshot {
        ro.set_snapshot(s);
    }
    let expected = range_of(model, &lower, &upper);
    let mut it = db.raw_iterator_opt(ro);
    let steps = 40;
    let start = key(rng);
    if let Some(n) = prefix_len.filter(|_| rng.gen_bool(0.3)) {
        return check_prefix_steps(&mut it, &expected, &start, n);
    }
    if rng.gen_bool(0.5) {
        // Forward from a seek, then back a few.
        it.seek(&start);
        let mut i = expected.partition_point(|(k, _)| *k < start);
        for _ in 0..steps {
            match expected.get(i) {
                Some((k, v)) => {
                    assert_eq!(it.item(), Some((&k[..], &v[..])), "forward at {i}");
                    it.next();
                    i += 1;
                }
                None => {
                    assert!(!it.valid(), "iterator past the model's end");
                    break;
                }
            }
        }
        if i > 0 && i < expected.len() && it.valid() {
            it.prev();
            assert_eq!(it.key(), Some(&expected[i - 1].0[..]), "prev after next");
        }
    } else {
        it.seek_for_prev(&start);
        let mut i = expected.partition_point(|(k, _)| *k <= start);
        for _ in 0..steps {
            if i == 0 {
                assert!(!it.valid(), "iterator before the model's start");
                break;
            }
            let (k, v) = &expected[i - 1];
            assert_eq!(it.item(), Some((&k[..], &v[..])), "backward at {i}");
            it.prev();
            i -= 1;
        }
    }
    it.status().unwrap();
}

/// From a seek to `start`: `next_prefix` visits the first entry of each
/// group of keys sharing an `n`-byte prefix, then `prev_prefix` walks back
/// over the same groups, as the model says.
fn check_prefix_steps(
    it: &mut strata_kv::DBRawIterator<'_>,
    expected: &[(Vec<u8>, Vec<u8>)],
    start: &[u8],
    n: usize,
) {
    let group = |i: usize| &expected[i].0[..n];
    let group_start = |mut i: usize| {
        while i > 0 && expected[i - 1].0.starts_with(group(i)) {
            i -= 1;
        }
        i
    };
    it.seek(start);
    let mut i = expected.partition_point(|(k, _)| k.as_slice() < start);
    let mut visited = Vec::new();
    for _ in 0..20 {
        let Some((k, v)) = expected.get(i) else {
            assert!(!it.valid(), "next_prefix past the model's end");
            break;
        };
        assert_eq!(it.item(), Some((&k[..], &v[..])), "next_prefix at {i}");
        visited.push(i);
        it.next_prefix();
        let p = group(i).to_vec();
        i += expected[i..]
            .iter()
            .take_while(|(k, _)| k.starts_with(&p))
            .count();
    }
    // Back from the last entry visited: the first entry of each group before.
    let Some(&last) = visited.last() else {
        return it.status().unwrap();
    };
    it.seek(&expected[last].0);
    let mut i = last;
    for _ in 0..20 {
        let before = group_start(i);
        it.prev_prefix();
        if before == 0 {
            assert!(!it.valid(), "prev_prefix before the model's start");
            break;
        }
        i = group_start(before - 1);
        let (k, v) = &expected[i];
        assert_eq!(it.item(), Some((&k[..], &v[..])), "prev_prefix at {i}");
    }
    it.status().unwrap();
}

/// A MultiGet of random keys (unsorted, maybe repeated), copied or
/// pinned, through the database or a snapshot, against the model.
fn check_multi_get(
    db: &DB,
    snapshot: Option<&strata_kv::Snapshot<'_>>,
    model: &Model,
    rng: &mut StdRng,
    what: &str,
) {
    let n = if rng.gen_bool(0.1) {
        rng.gen_range(100..500)
    } else {
        rng.gen_range(1..40)
    };
    let mut keys: Vec<Vec<u8>> = (0..n).map(|_| key(rng)).collect();
    let sorted = rng.gen_bool(0.3);
    if sorted {
        keys.sort();
    }
    let pinned = |r: Vec<strata_kv::Result<Option<strata_kv::DBPinnableSlice>>>| {
        r.into_iter()
            .map(|r| r.map(|v| v.map(|v| v.to_vec())))
            .collect::<Vec<_>>()
    };
    let got = match (snapshot, rng.gen_bool(0.5)) {
        (None, true) => db.multi_get(&keys),
        (None, false) => pinned(db.batched_multi_get(&keys, sorted)),
        (Some(s), true) => s.multi_get(&keys),
        (Some(s), false) => pinned(s.batched_multi_get(&keys, sorted)),
    };
    assert_eq!(got.len(), keys.len(), "{what}: multi_get answers");
    for (k, r) in keys.iter().zip(got) {
        let v = r.unwrap_or_else(|e| panic!("{what}: multi_get {k:?}: {e}"));
        assert_eq!(v, model.get(k).cloned(), "{what}: multi_get {k:?}");
    }
}

/// Flushes and waits for compactions, with no reader holding an old
/// version: the tables on disk must be exactly the live ones.
fn check_idle_files(db: &DB, fs: &FaultInjectionFileSystem, what: &str) {
    db.flush().unwrap_or_else(|e| panic!("{what}: flush: {e}"));
    db.wait_for_compact()
        .unwrap_or_else(|e| panic!("{what}: wait_for_compact: {e}"));
    common::assert_files_are_live(fs.inner().as_ref(), "/db", db, what);
}

/// Fails one manifest write while an iterator and the snapshots are held,
/// by a flush or a `compact_range`. Returns true if the database took a
/// background error (it then needs a reopen), after checking that reads
/// still match the model and that releasing the readers deleted no table.
fn manifest_fault(db: &DB, fs: &FaultInjectionFileSystem, model: &Model, rng: &mut StdRng) -> bool {
    let held = db.raw_iterator();
    let op = if rng.gen_bool(0.5) {
        FileOp::Sync
    } else {
        FileOp::Append
    };
    fs.inject(FaultRule::new(&[op]).path_contains("MANIFEST").times(1));
    let r = if rng.gen_bool(0.7) {
        db.flush()
    } else {
        db.compact_range(None::<&[u8]>, None::<&[u8]>)
    };
    fs.clear_faults();
    // A background job may have met the fault instead of the call.
    let failed = r.is_err() || db.wait_for_compact().is_err();
    if failed {
        for (k, v) in model.iter().take(50) {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v), "get after the fault");
        }
        let tables = |fs: &FaultInjectionFileSystem| {
            common::files_ending(fs.inner().as_ref(), "/db", ".sst")
        };
        let before = tables(fs);
        drop(held);
        // A job that was running may still add an output; none may go.
        let after = tables(fs);
        let gone: Vec<_> = before.iter().filter(|t| !after.contains(t)).collect();
        assert!(gone.is_empty(), "a reader's release deleted {gone:?}");
    }
    failed
}

fn run_seed(seed: u64, ops: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut model = Model::new();
    let mut done = 0;
    while done < ops {
        let (opts, prefix_len) = options(&fs, &mut rng);
        let db = DB::open(&opts, "/db").unwrap_or_else(|e| panic!("seed {seed}: open: {e}"));
        check_idle_files(&db, &fs, &format!("seed {seed} op {done}: after open"));
        let mut snapshots: Vec<(strata_kv::Snapshot<'_>, Model)> = Vec::new();
        loop {
            done += 1;
            if done >= ops {
                break;
            }
            match rng.gen_range(0..1000) {
                0..=299 => {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                300..=399 => {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    db.merge(&k, &v[..v.len().min(8)]).unwrap();
                    model_merge(&mut model, k, &v[..v.len().min(8)]);
                }
                400..=499 => {
                    let k = key(&mut rng);
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                500..=504 => {
                    // Several ascending streams at once, long enough for
                    // flushes and compactions to cut between them.
                    let streams = rng.gen_range(2..5u32);
                    let len = rng.gen_range(50..200u32);
                    let starts: Vec<u32> = (0..streams).map(|s| s * (2000 / streams)).collect();
                    for i in 0..len {
                        for s in &starts {
                            let k = format!("key{:05}", (s + i) % 2000).into_bytes();
                            let v = value(&mut rng);
                            db.put(&k, &v).unwrap();
                            model.insert(k, v);
                        }
                    }
                }
                505..=549 => {
                    let mut b = WriteBatch::default();
                    for _ in 0..rng.gen_range(1..20) {
                        let k = key(&mut rng);
                        let dice = rng.gen_range(0..10);
                        if dice < 5 {
                            let v = value(&mut rng);
                            b.put(&k, &v);
                            model.insert(k, v);
                        } else if dice < 7 {
                            let v = value(&mut rng);
                            b.merge(&k, &v[..v.len().min(8)]);
                            model_merge(&mut model, k, &v[..v.len().min(8)]);
                        } else if dice < 8 {
                            let (from, to) = delete_range_bounds(&mut rng);
                            b.delete_range(&from, &to);
                            model_delete_range(&mut model, &from, &to);
                        } else {
                            b.delete(&k);
                            model.remove(&k);
                        }
                    }
                    db.write(b).unwrap();
                }
                550..=809 => {
                    let k = key(&mut rng);
                    assert_eq!(
                        db.get(&k).unwrap(),
                        model.get(&k).cloned(),
                        "seed {seed} op {done}: get {k:?}"
                    );
                }
                810..=849 => {
                    let what = format!("seed {seed} op {done}");
                    match snapshots.is_empty() {
                        true => check_multi_get(&db, None, &model, &mut rng, &what),
                        false => {
                            let (snap, old) = &snapshots[rng.gen_range(0..snapshots.len())];
                            check_multi_get(&db, Some(snap), old, &mut rng, &what);
                        }
                    }
                }
                850..=929 => check_iteration(&db, &model, None, &mut rng, prefix_len),
                930..=949 => {
                    if snapshots.len() < 4 {
                        snapshots.push((db.snapshot(), model.clone()));
                    } else {
                        snapshots.remove(rng.gen_range(0..snapshots.len()));
                    }
                }
                950..=979 => {
                    if !snapshots.is_empty() {
                        let (snap, old) = &snapshots[rng.gen_range(0..snapshots.len())];
                        let k = key(&mut rng);
                        assert_eq!(
                            snap.get(&k).unwrap(),
                            old.get(&k).cloned(),
                            "seed {seed} op {done}: snapshot get"
                        );
                        check_iteration(&db, old, Some(snap), &mut rng, prefix_len);
                    }
                }
                980..=986 => db.flush().unwrap(),
                987..=988 => {
                    let (from, to) = delete_range_bounds(&mut rng);
                    if rng.gen_bool(0.05) && from < to {
                        // Reversed: refused, and nothing changes.
                        assert!(matches!(
                            db.delete_range(&to, &from),
                            Err(strata_kv::Error::InvalidArgument(_))
                        ));
                    } else {
                        db.delete_range(&from, &to).unwrap();
                        model_delete_range(&mut model, &from, &to);
                    }
                }
                989 => db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap(),
                990..=993 => check_idle_files(&db, &fs, &format!("seed {seed} op {done}")),
                994..=995 => {
                    if manifest_fault(&db, &fs, &model, &mut rng) {
                        break; // writes stop until a reopen
                    }
                }
                _ => break, // reopen
            }
        }
        drop(snapshots);
        drop(db);
    }
    // A final reopen sees exactly the model.
    let (opts, _) = options(&fs, &mut rng);
    let db = DB::open(&opts, "/db").unwrap();
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .iterator(strata_kv::IteratorMode::Start)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert!(
        all == model.into_iter().collect::<Vec<_>>(),
        "seed {seed}: final contents differ"
    );
}

#[test]
fn randomized_against_btreemap() {
    let ops = env_or("STRATA_MODEL_OPS", 5_000);
    if let Ok(seed) = std::env::var("STRATA_SEED") {
        let seed = seed.parse().expect("STRATA_SEED must be a number");
        println!("seed {seed}");
        run_seed(seed, ops);
        return;
    }
    let seeds = env_or("STRATA_MODEL_SEEDS", 24);
    let base: u64 = rand::random::<u32>() as u64;
    for s in 0..seeds {
        let seed = base + s;
        println!("seed {seed} ({ops} ops; replay with STRATA_SEED={seed})");
        run_seed(seed, ops);
    }
}
