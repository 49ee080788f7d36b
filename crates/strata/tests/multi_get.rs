//! MultiGet against a loop of `get`: over databases with every level
//! populated, L0 files, memtable data, deletions, overwrites and snapshots;
//! batches of 1 to 1000 keys, unsorted, with duplicates and absent keys;
//! under several table configurations (index and filter in a small block
//! cache among them) and both built-in comparators. And
//! with a read error injected on one table: only the keys whose lookup
//! needed that table fail.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::{FaultInjectionFileSystem, FaultRule, FileOp, MemFileSystem};
use strata_kv::{
    BlockBasedOptions, DataBlockIndexType, Error, Options, ReadOptions, ReverseBytewiseComparator,
    Snapshot, DB,
};

type Answers = Vec<Result<Option<Vec<u8>>, Error>>;
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(fs: Arc<dyn strata_kv::env::FileSystem>, config: u32) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(fs);
    opts.set_write_buffer_size(64 << 10);
    opts.set_target_file_size_base(16 << 10);
    opts.set_max_bytes_for_level_base(64 << 10);
    opts.set_max_bytes_for_level_multiplier(4.0);
    opts.set_disable_auto_compactions(true);
    let mut t = BlockBasedOptions::default();
    t.set_block_size([256, 1024, 4096][config as usize % 3]);
    t.set_block_restart_interval([1, 4, 16][config as usize % 3]);
    t.set_bloom_filter(if config.is_multiple_of(2) { 10.0 } else { 0.0 }, false);
    if config % 4 >= 2 {
        t.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
    }
    if config % 3 == 1 {
        // Index and filter in a cache too small to keep them all.
        t.set_cache_index_and_filter_blocks(true);
        t.set_pin_l0_filter_and_index_blocks_in_cache(config.is_multiple_of(2));
        t.set_block_cache(&strata_kv::Cache::new_lru_cache(16 << 10));
    }
    opts.set_block_based_table_factory(&t);
    if config % 5 == 4 {
        opts.set_comparator_object(Arc::new(ReverseBytewiseComparator));
    }
    opts
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A random key: mostly in the written range (so in tables or gaps
/// between them), some far outside it on either side.
fn probe_key(rng: &mut StdRng) -> Vec<u8> {
    match rng.gen_range(0..20) {
        0 => b"a-before-everything".to_vec(),
        1 => b"z-after-everything".to_vec(),
        _ => key(rng.gen_range(0..12_000)),
    }
}

/// Writes so that several levels hold tables (compact_range pushes the
/// first rounds down), L0 holds a few unflushed-then-flushed files, and the
/// memtable holds the last writes; overwrites and deletions in every layer.
/// Returns the model (newest values) and a snapshot's model.
fn build<'a>(db: &'a DB, rng: &mut StdRng) -> (Model, Snapshot<'a>, Model) {
    let mut model = BTreeMap::new();
    let write = |db: &DB, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut StdRng, n: u32| {
        for _ in 0..n {
            let k = key(rng.gen_range(0..10_000));
            if rng.gen_bool(0.1) {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("v{}-{}", rng.gen::<u32>(), "x".repeat(rng.gen_range(0..60)));
                db.put(&k, &v).unwrap();
                model.insert(k, v.into_bytes());
            }
        }
    };
    for _ in 0..3 {
        write(db, &mut model, rng, 4000);
        db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    }
    write(db, &mut model, rng, 3000);
    let snapshot = db.snapshot();
    let at_snapshot = model.clone();
    for _ in 0..3 {
        write(db, &mut model, rng, 800);
        db.flush().unwrap();
    }
    write(db, &mut model, rng, 500);
    (model, snapshot, at_snapshot)
}

fn copied(r: Vec<Result<Option<strata_kv::DBPinnableSlice>, Error>>) -> Answers {
    r.into_iter()
        .map(|r| r.map(|v| v.map(|v| v.to_vec())))
        .collect()
}

fn assert_same(got: &Answers, want: &[Option<Vec<u8>>], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: answer count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        match g {
            Ok(v) => assert_eq!(v, w, "{what}: key {i}"),
            Err(e) => panic!("{what}: key {i}: {e}"),
        }
    }
}

#[test]
fn multi_get_equals_a_loop_of_gets() {
    for config in 0..10u32 {
        let mut rng = StdRng::seed_from_u64(u64::from(config) * 7919);
        let fs: Arc<dyn strata_kv::env::FileSystem> = Arc::new(MemFileSystem::new());
        let opts = options(fs, config);
        let db = DB::open(&opts, "/db").unwrap();
        let (model, snapshot, at_snapshot) = build(&db, &mut rng);
        let files = common::files_per_level(&db);
        assert!(files[0] >= 2, "config {config}: L0 files {files:?}");
        assert!(
            files[1..].iter().filter(|&&n| n > 0).count() >= 1,
            "config {config}: deeper levels {files:?}"
        );
        let mut out = vec![Ok(None)];
        for &n in &[1usize, 2, 3, 7, 16, 32, 100, 1000] {
            let mut keys: Vec<Vec<u8>> = (0..n).map(|_| probe_key(&mut rng)).collect();
            if n > 2 {
                // Duplicates, not adjacent.
                keys[n - 1] = keys[0].clone();
                keys[n / 2] = keys[1].clone();
            }
            let what = format!("config {config} batch {n}");
            let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| db.get(k).unwrap()).collect();
            let modeled: Vec<Option<Vec<u8>>> =
                keys.iter().map(|k| model.get(k).cloned()).collect();
            assert_eq!(want, modeled, "{what}: get against the model");
            assert_same(&db.multi_get(&keys), &want, &format!("{what}: multi_get"));
            assert_same(
                &copied(db.batched_multi_get(&keys, false)),
                &want,
                &format!("{what}: batched"),
            );
            // A wrong sorted_input hint still gives the right answers.
            assert_same(
                &copied(db.batched_multi_get(&keys, true)),
                &want,
                &format!("{what}: batched, wrong hint"),
            );
            let mut sorted = keys.clone();
            sorted.sort_by(|a, b| opts_cmp(config, a, b));
            let want_sorted: Vec<Option<Vec<u8>>> =
                sorted.iter().map(|k| db.get(k).unwrap()).collect();
            assert_same(
                &copied(db.batched_multi_get(&sorted, true)),
                &want_sorted,
                &format!("{what}: batched, sorted"),
            );
            // The snapshot's view.
            let old: Vec<Option<Vec<u8>>> =
                keys.iter().map(|k| at_snapshot.get(k).cloned()).collect();
            assert_same(
                &snapshot.multi_get(&keys),
                &old,
                &format!("{what}: snapshot multi_get"),
            );
            assert_same(
                &copied(snapshot.batched_multi_get(&keys, false)),
                &old,
                &format!("{what}: snapshot batched"),
            );
            let mut ro = ReadOptions::default();
            ro.fill_cache(false);
            assert_same(
                &db.multi_get_opt(&keys, &ro),
                &want,
                &format!("{what}: no fill_cache"),
            );
            // Into the caller's vector: what it held before is gone.
            db.batched_multi_get_into(&keys, false, &ro, &mut out);
            assert_same(
                &copied(std::mem::take(&mut out)),
                &want,
                &format!("{what}: into"),
            );
            out.push(Ok(None));
            snapshot.batched_multi_get_into(&keys, false, ReadOptions::default(), &mut out);
            assert_same(
                &copied(std::mem::take(&mut out)),
                &old,
                &format!("{what}: snapshot into"),
            );
            out.push(Ok(None));
        }
        db.batched_multi_get_into(
            &Vec::<Vec<u8>>::new(),
            false,
            &ReadOptions::default(),
            &mut out,
        );
        assert!(out.is_empty());
        assert!(db.multi_get(Vec::<Vec<u8>>::new()).is_empty());
        assert!(db
            .batched_multi_get(&Vec::<Vec<u8>>::new(), false)
            .is_empty());
        assert!(snapshot.multi_get(Vec::<Vec<u8>>::new()).is_empty());
        assert!(snapshot
            .batched_multi_get(&Vec::<Vec<u8>>::new(), true)
            .is_empty());
    }
}

fn opts_cmp(config: u32, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if config % 5 == 4 {
        b.cmp(a)
    } else {
        a.cmp(b)
    }
}

#[test]
fn a_read_error_fails_only_the_keys_that_needed_that_table() {
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut opts = options(Arc::new(fs.clone()), 1); // no bloom filter
    opts.set_write_buffer_size(1 << 20);
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..6000 {
        db.put(key(i * 2), format!("value-{i}")).unwrap();
    }
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    // Newer versions of a few keys in an L0 file: they are found before the
    // broken table is needed.
    for i in (0..6000).step_by(50) {
        db.put(key(i * 2), format!("newer-{i}")).unwrap();
    }
    db.flush().unwrap();
    let tables = db.live_files().unwrap();
    let deep: Vec<_> = tables.iter().filter(|f| f.level > 0).collect();
    assert!(deep.len() >= 4, "tables: {}", deep.len());
    let broken = deep[deep.len() / 2];
    // Open every table reader first (without caching blocks), so that the
    // fault meets data-block reads only.
    let mut ro = ReadOptions::default();
    ro.fill_cache(false);
    let all: Vec<Vec<u8>> = (0..12_000).map(key).collect();
    for r in db.multi_get_opt(&all, &ro) {
        r.unwrap();
    }
    fs.inject(FaultRule::new(&[FileOp::Read]).path_contains(broken.name.trim_start_matches('/')));
    let answers = copied(db.batched_multi_get_opt(&all, false, &ro));
    let (lo, hi) = (
        broken.start_key.clone().unwrap(),
        broken.end_key.clone().unwrap(),
    );
    let (mut failed, mut found) = (0, 0);
    for (k, a) in all.iter().zip(&answers) {
        let single = db.get_opt(k, &ro);
        match (a, &single) {
            (Err(e), Err(_)) => {
                assert!(e.to_string().contains("injected"), "{e}");
                assert!(
                    *k >= lo && *k <= hi,
                    "{} failed outside the broken table",
                    String::from_utf8_lossy(k)
                );
                failed += 1;
            }
            (Ok(v), Ok(w)) => {
                assert_eq!(v, w, "{}", String::from_utf8_lossy(k));
                found += usize::from(v.is_some());
            }
            _ => panic!(
                "{}: multi_get {:?} but get {:?}",
                String::from_utf8_lossy(k),
                a.as_ref().map(|_| ()),
                single.as_ref().map(|_| ())
            ),
        }
    }
    assert!(failed > 0, "no key met the broken table");
    assert!(found > 4000, "found {found}");
    fs.clear_faults();
    // The error was the read's alone: everything reads again.
    for (k, r) in all.iter().zip(db.multi_get(&all)) {
        assert_eq!(r.unwrap(), db.get(k).unwrap());
    }
}

/// Flushes fail (no table can be created), so the full memtables stay
/// immutable: MultiGet must see them, newest first, as `get` does.
#[test]
fn multi_get_reads_immutable_memtables() {
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut opts = options(Arc::new(fs.clone()), 0);
    opts.set_max_write_buffer_number(4);
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..3000 {
        db.put(key(i), format!("table-{i}")).unwrap();
    }
    db.flush().unwrap();
    fs.inject(FaultRule::new(&[FileOp::Create]).path_contains(".sst"));
    // Overwrite and delete until a memtable switch has queued a flush that
    // failed: writes then fail with that background error.
    let mut round = 0;
    'writing: loop {
        for i in (0..3000).step_by(3) {
            let r = if i % 2 == 0 {
                db.put(key(i), format!("round{round}-{i}-{}", "v".repeat(40)))
            } else {
                db.delete(key(i))
            };
            if r.is_err() {
                break 'writing;
            }
        }
        round += 1;
        assert!(round < 100, "no flush was attempted");
    }
    let stats = db.property_value("strata.stats").unwrap().unwrap();
    let immutable: usize = stats
        .split("Memtables: ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no memtable line in {stats}"));
    assert!(immutable >= 1, "{stats}");
    let keys: Vec<Vec<u8>> = (0..3100).rev().map(key).collect();
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| db.get(k).unwrap()).collect();
    assert!(
        want.iter()
            .any(|v| v.as_deref().is_some_and(|v| v.starts_with(b"round"))),
        "the memtables hold newer values"
    );
    assert_same(&db.multi_get(&keys), &want, "immutable memtables");
    assert_same(
        &copied(db.batched_multi_get(&keys, false)),
        &want,
        "immutable memtables, batched",
    );
}
