//! Column families: the `rocksdb` crate's API, each family's own options
//! and levels, atomic batches across families, the shared log kept until
//! every family with data in it has flushed, drops and reopens, bad input,
//! a randomized test against one `BTreeMap` per family, and a kill -9 test
//! of cross-family batches.
//!
//! Every seed of the model test is printed; replay one with
//! `STRATA_SEED=<seed>`. Scale with `STRATA_CF_SEEDS`, `STRATA_CF_OPS` and
//! `STRATA_CF_CRASH_CYCLES`.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::MemFileSystem;
use strata_kv::{
    checkpoint::Checkpoint, ColumnFamilyDescriptor, Error, IteratorMode, Options, ReadOptions,
    ReverseBytewiseComparator, WriteBatch, WriteOptions, DB,
};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mem_options(fs: &Arc<MemFileSystem>) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_file_system(fs.clone());
    opts
}

fn keys(db: &DB, cf: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    let cf = db.cf_handle(cf).unwrap();
    db.iterator_cf(cf, IteratorMode::Start)
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

#[test]
fn families_are_independent_keyspaces_that_survive_reopen() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = mem_options(&fs);
    {
        let db = DB::open_cf(&opts, "/db", ["users", "orders"]).unwrap();
        let users = db.cf_handle("users").unwrap();
        let orders = db.cf_handle("orders").unwrap();
        db.put(b"k", b"default").unwrap();
        db.put_cf(users, b"k", b"users").unwrap();
        db.put_cf(&orders, b"k", b"orders").unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
        assert_eq!(
            db.get_cf(users, b"k").unwrap().as_deref(),
            Some(&b"users"[..])
        );
        assert_eq!(
            db.get_pinned_cf(orders, b"k").unwrap().as_deref(),
            Some(&b"orders"[..])
        );
        db.delete_cf(users, b"k").unwrap();
        assert_eq!(db.get_cf(users, b"k").unwrap(), None);
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
        // One family flushed, the other still in the log.
        db.put_cf(users, b"flushed", b"1").unwrap();
        db.flush_cf(users).unwrap();
        db.put_cf(orders, b"logged", b"2").unwrap();
        assert_eq!(
            db.property_value_cf(users, "rocksdb.num-files-at-level0")
                .unwrap()
                .as_deref(),
            Some("1")
        );
        assert_eq!(
            db.property_value_cf(orders, "rocksdb.num-files-at-level0")
                .unwrap()
                .as_deref(),
            Some("0")
        );
    }
    let mut names = DB::list_cf(&opts, "/db").unwrap();
    assert_eq!(names[0], "default");
    names.sort();
    assert_eq!(names, ["default", "orders", "users"]);
    let db = DB::open_cf(&opts, "/db", ["orders", "users"]).unwrap();
    let users = db.cf_handle("users").unwrap();
    let orders = db.cf_handle("orders").unwrap();
    assert_eq!(db.get_cf(users, b"k").unwrap(), None);
    assert_eq!(
        db.get_cf(users, b"flushed").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        db.get_cf(orders, b"logged").unwrap().as_deref(),
        Some(&b"2"[..])
    );
    assert_eq!(
        db.get_cf(orders, b"k").unwrap().as_deref(),
        Some(&b"orders"[..])
    );
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
}

#[test]
fn a_batch_across_families_is_atomic_and_multi_get_cf_answers_in_order() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = mem_options(&fs);
    let db = DB::open_cf(&opts, "/db", ["a", "b"]).unwrap();
    let a = db.cf_handle("a").unwrap();
    let b = db.cf_handle("b").unwrap();
    let mut batch = WriteBatch::default();
    batch.put_cf(a, b"x", b"1");
    batch.put_cf(b, b"x", b"2");
    batch.put(b"x", b"0");
    batch.delete_range_cf(b, b"y0", b"y9");
    db.write(batch).unwrap();
    let got = db.multi_get_cf([(a, &b"x"[..]), (b, b"x"), (a, b"missing"), (b, b"x")]);
    let got: Vec<Option<Vec<u8>>> = got.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(
        got,
        [
            Some(b"1".to_vec()),
            Some(b"2".to_vec()),
            None,
            Some(b"2".to_vec())
        ]
    );
    let pinned = db.batched_multi_get_cf(b, [&b"x"[..], b"nope"], false);
    assert_eq!(pinned[0].as_ref().unwrap().as_deref(), Some(&b"2"[..]));
    assert!(pinned[1].as_ref().unwrap().is_none());
    // A batch naming a dropped family is refused whole.
    db.create_cf("gone", &Options::default()).unwrap();
    let gone = db.cf_handle("gone").unwrap();
    let mut batch = WriteBatch::default();
    batch.put_cf(a, b"half", b"1");
    batch.put_cf(gone, b"half", b"1");
    db.drop_cf("gone").unwrap();
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get_cf(a, b"half").unwrap(), None, "half a batch landed");
}

#[test]
fn each_family_has_its_own_comparator_and_merge_operator() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = mem_options(&fs);
    let descriptors = || {
        let mut rev = Options::default();
        rev.set_comparator_object(Arc::new(ReverseBytewiseComparator));
        let mut counters = Options::default();
        counters.set_merge_operator_associative("add", |_, existing, ops| {
            let mut n = existing.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
            for op in ops {
                n += u64::from_le_bytes(op.try_into().unwrap());
            }
            Some(n.to_le_bytes().to_vec())
        });
        vec![
            ColumnFamilyDescriptor::new("rev", rev),
            ColumnFamilyDescriptor::new("counters", counters),
        ]
    };
    {
        let db = DB::open_cf_descriptors(&opts, "/db", descriptors()).unwrap();
        let rev = db.cf_handle("rev").unwrap();
        let counters = db.cf_handle("counters").unwrap();
        for k in [b"a", b"b", b"c"] {
            db.put_cf(rev, k, k).unwrap();
            db.put(k, k).unwrap();
        }
        db.merge_cf(counters, b"n", 5u64.to_le_bytes()).unwrap();
        db.flush_cf(counters).unwrap();
        db.merge_cf(counters, b"n", 2u64.to_le_bytes()).unwrap();
        // The default family has no operator.
        assert!(matches!(db.merge(b"n", b"x"), Err(Error::NotSupported(_))));
        db.flush_cf(rev).unwrap();
    }
    let db = DB::open_cf_descriptors(&opts, "/db", descriptors()).unwrap();
    let rev = db.cf_handle("rev").unwrap();
    let order: Vec<Vec<u8>> = keys(&db, "rev").into_iter().map(|(k, _)| k).collect();
    assert_eq!(order, [b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]);
    let order: Vec<Vec<u8>> = keys(&db, "default").into_iter().map(|(k, _)| k).collect();
    assert_eq!(order, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    // delete_range under the family's own order: [c, a) holds b.
    db.delete_range_cf(rev, b"c", b"a").unwrap();
    let left: Vec<Vec<u8>> = keys(&db, "rev").into_iter().map(|(k, _)| k).collect();
    assert_eq!(left, [b"a".to_vec()]);
    let counters = db.cf_handle("counters").unwrap();
    assert_eq!(
        db.get_cf(counters, b"n").unwrap(),
        Some(7u64.to_le_bytes().to_vec())
    );
    drop(db);
    // Opening a family with another comparator is refused, naming it.
    let mut wrong = descriptors();
    wrong[0] = ColumnFamilyDescriptor::new("rev", Options::default());
    let e = DB::open_cf_descriptors(&opts, "/db", wrong).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("\"rev\""), "{e}");
}

#[test]
fn bad_input_gets_clear_errors_and_loses_nothing() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = mem_options(&fs);
    {
        let db = DB::open_cf(&opts, "/db", ["a"]).unwrap();
        db.put_cf(db.cf_handle("a").unwrap(), b"k", b"v").unwrap();
        // Dropping the default family, a missing one; creating a twin.
        assert!(matches!(
            db.drop_cf("default"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(db.drop_cf("nope"), Err(Error::InvalidArgument(_))));
        let e = db.create_cf("a", &Options::default()).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(db.cf_handle("nope").is_none());
        // Names over the limit, or empty, fail alone: writes go on.
        let long = "n".repeat(strata_kv::limits::COLUMN_FAMILY_NAME_BYTES_MAX + 1);
        for name in [long.as_str(), ""] {
            let e = db.create_cf(name, &Options::default()).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        db.put(b"still", b"writable").unwrap();
    }
    // Opening without naming a family on record names it.
    let e = DB::open(&opts, "/db").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains('a'), "{e}");
    // A family not on record without create_missing_column_families.
    let mut strict = opts.clone();
    strict.create_missing_column_families(false);
    let before = common::files_ending(fs.as_ref(), "/db", "");
    let e = DB::open_cf(&strict, "/db", ["a", "b"]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains('b'), "{e}");
    // Refused before anything is written (no new manifest).
    assert_eq!(common::files_ending(fs.as_ref(), "/db", ""), before);
    // The same name twice.
    let e = DB::open_cf(&opts, "/db", ["a", "a"]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    // Nothing was lost on the way.
    let db = DB::open_cf(&strict, "/db", ["a"]).unwrap();
    assert_eq!(
        db.get_cf(db.cf_handle("a").unwrap(), b"k")
            .unwrap()
            .as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn dropped_family_is_gone_its_handle_fails_and_its_files_are_deleted() {
    let fs = Arc::new(MemFileSystem::new());
    let mut opts = mem_options(&fs);
    opts.set_write_buffer_size(64 << 10);
    let db = DB::open(&opts, "/db").unwrap();
    db.create_cf("tmp", &opts).unwrap();
    {
        let tmp = db.cf_handle("tmp").unwrap();
        for i in 0..2000u32 {
            db.put_cf(tmp, format!("key{i:06}"), [7u8; 100]).unwrap();
        }
        db.flush_cf(tmp).unwrap();
        db.put_cf(tmp, b"unflushed", b"x").unwrap();
    }
    db.put(b"kept", b"1").unwrap();
    let tables_before = common::files_ending(fs.as_ref(), "/db", ".sst").len();
    assert!(tables_before > 0);
    let tmp = db.cf_handle("tmp").unwrap();
    db.drop_cf("tmp").unwrap();
    assert!(db.cf_handle("tmp").is_none());
    assert!(matches!(
        db.get_cf(tmp, b"unflushed"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.put_cf(tmp, b"k", b"v"),
        Err(Error::InvalidArgument(_))
    ));
    let mut it = db.raw_iterator_cf(tmp);
    it.seek_to_first();
    assert!(!it.valid());
    assert!(matches!(it.status(), Err(Error::InvalidArgument(_))));
    drop(it);
    assert!(
        common::files_ending(fs.as_ref(), "/db", ".sst").is_empty(),
        "the dropped family's tables stay"
    );
    db.flush().unwrap();
    common::assert_files_are_live(fs.as_ref(), "/db", &db, "after the drop");
    drop(db);
    assert_eq!(DB::list_cf(&opts, "/db").unwrap(), ["default"]);
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"1"[..]));
    // The name can be used again, for a new, empty family.
    db.create_cf("tmp", &opts).unwrap();
    assert_eq!(
        db.get_cf(db.cf_handle("tmp").unwrap(), b"unflushed")
            .unwrap(),
        None
    );
    assert_eq!(
        db.get_cf(db.cf_handle("tmp").unwrap(), b"key000001")
            .unwrap(),
        None
    );
}

/// A family written once and never flushed keeps the logs it has data in,
/// and only those: while another family fills and flushes many memtables,
/// the log count stays bounded once the idle family flushes, and
/// nothing of either is lost across a reopen.
#[test]
fn logs_are_kept_until_every_family_with_data_in_them_flushed() {
    let fs = Arc::new(MemFileSystem::new());
    let mut opts = mem_options(&fs);
    opts.set_write_buffer_size(64 << 10);
    // `open_cf` gives each family default options: the descriptors give
    // them the small buffer.
    let descriptors =
        || ["busy", "idle", "empty"].map(|n| ColumnFamilyDescriptor::new(n, opts.clone()));
    let db = DB::open_cf_descriptors(&opts, "/db", descriptors()).unwrap();
    let busy = db.cf_handle("busy").unwrap();
    let idle = db.cf_handle("idle").unwrap();
    db.put_cf(idle, b"early", b"kept").unwrap();
    for i in 0..5000u32 {
        db.put_cf(busy, format!("key{i:06}"), [1u8; 100]).unwrap();
    }
    db.flush_cf(busy).unwrap();
    let logs = common::files_ending(fs.as_ref(), "/db", ".log").len();
    assert!(logs > 2, "the idle family's log went early ({logs} logs)");
    drop(db);
    let db = DB::open_cf_descriptors(&opts, "/db", descriptors()).unwrap();
    let idle = db.cf_handle("idle").unwrap();
    let busy = db.cf_handle("busy").unwrap();
    assert_eq!(
        db.get_cf(idle, b"early").unwrap().as_deref(),
        Some(&b"kept"[..])
    );
    assert_eq!(
        db.get_cf(busy, b"key004999").unwrap().map(|v| v.len()),
        Some(100)
    );
    // Recovery put the logged writes in tables: one log is left.
    for i in 0..5000u32 {
        db.put_cf(busy, format!("key{i:06}"), [2u8; 100]).unwrap();
    }
    db.flush_cf(busy).unwrap();
    assert!(common::files_ending(fs.as_ref(), "/db", ".log").len() <= 2);
}

#[test]
fn iterators_snapshots_compaction_and_checkpoints_per_family() {
    let dir = common::TempDir::new("cf-checkpoint");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_write_buffer_size(64 << 10);
    let db = DB::open_cf(&opts, &dir.0, ["a"]).unwrap();
    let a = db.cf_handle("a").unwrap();
    for i in 0..3000u32 {
        db.put_cf(a, format!("k{i:05}"), i.to_string()).unwrap();
    }
    let snap = db.snapshot();
    db.delete_range_cf(a, b"k00000", b"k01000").unwrap();
    db.compact_range_cf(a, None::<&[u8]>, None::<&[u8]>)
        .unwrap();
    assert_eq!(
        snap.get_cf(a, b"k00005").unwrap().as_deref(),
        Some(&b"5"[..])
    );
    assert_eq!(db.get_cf(a, b"k00005").unwrap(), None);
    assert_eq!(db.iterator_cf(a, IteratorMode::Start).count(), 2000);
    assert_eq!(snap.iterator_cf(a, IteratorMode::Start).count(), 3000);
    let mut ro = ReadOptions::default();
    ro.set_iterate_upper_bound(b"k01010".to_vec());
    assert_eq!(db.iterator_cf_opt(a, ro, IteratorMode::Start).count(), 10);
    drop(snap);
    let cp = dir.0.with_extension("cp");
    let _ = std::fs::remove_dir_all(&cp);
    Checkpoint::new(&db)
        .unwrap()
        .create_checkpoint(&cp)
        .unwrap();
    db.put_cf(a, b"after", b"x").unwrap();
    let copy = DB::open_cf(&opts, &cp, ["a"]).unwrap();
    let ca = copy.cf_handle("a").unwrap();
    assert_eq!(copy.iterator_cf(ca, IteratorMode::Start).count(), 2000);
    assert_eq!(copy.get_cf(ca, b"after").unwrap(), None);
    drop(copy);
    let _ = std::fs::remove_dir_all(&cp);
}

/// Random puts, deletes, range deletions and cross-family batches over
/// three families (one ordered in reverse), with gets, scans, flushes of
/// one family, compactions, drops and re-creations and reopens, checked
/// against one `BTreeMap` per family.
#[test]
fn random_operations_match_a_model_per_family() {
    let seeds = env_or("STRATA_CF_SEEDS", 6);
    let ops = env_or("STRATA_CF_OPS", 1500);
    let fixed = std::env::var("STRATA_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let seeds: Vec<u64> = match fixed {
        Some(s) => vec![s],
        None => (0..seeds).map(|i| 0xcf00 + i).collect(),
    };
    for seed in seeds {
        println!("seed {seed}");
        run_model(seed, ops);
    }
}

const FAMILIES: [&str; 3] = ["default", "fwd", "rev"];

fn family_options(name: &str, rng: &mut StdRng) -> Options {
    let mut o = Options::default();
    if name == "rev" {
        o.set_comparator_object(Arc::new(ReverseBytewiseComparator));
    }
    o.set_write_buffer_size(rng.gen_range(16..64) << 10);
    o.set_target_file_size_base(rng.gen_range(16..64) << 10);
    o.set_max_bytes_for_level_base(rng.gen_range(64..256) << 10);
    o.set_level_zero_file_num_compaction_trigger(rng.gen_range(2..5));
    o
}

fn open_model_db(fs: &Arc<MemFileSystem>, rng: &mut StdRng, live: &[bool; 3]) -> DB {
    let mut opts = family_options("default", rng);
    opts.create_if_missing(true);
    opts.set_file_system(fs.clone());
    let descriptors: Vec<ColumnFamilyDescriptor> = FAMILIES
        .iter()
        .zip(live)
        .skip(1)
        .filter(|(_, &l)| l)
        .map(|(&n, _)| ColumnFamilyDescriptor::new(n, family_options(n, rng)))
        .collect();
    DB::open_cf_descriptors(&opts, "/db", descriptors).unwrap()
}

fn run_model(seed: u64, ops: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = Arc::new(MemFileSystem::new());
    let mut live = [true, false, false];
    let mut models: [BTreeMap<Vec<u8>, Vec<u8>>; 3] = Default::default();
    let mut db = open_model_db(&fs, &mut rng, &live);
    let key = |rng: &mut StdRng| format!("k{:04}", rng.gen_range(0..400)).into_bytes();
    for op in 0..ops {
        let f = rng.gen_range(0..3usize);
        let what = rng.gen_range(0..100);
        if !live[f] {
            let o = family_options(FAMILIES[f], &mut rng);
            db.create_cf(FAMILIES[f], &o).unwrap();
            live[f] = true;
            continue;
        }
        let cf = db.cf_handle(FAMILIES[f]).unwrap();
        match what {
            0..=39 => {
                let (k, v) = (
                    key(&mut rng),
                    format!("v{op}-{}", "x".repeat(rng.gen_range(0..200))),
                );
                db.put_cf(cf, &k, &v).unwrap();
                models[f].insert(k, v.into_bytes());
            }
            40..=49 => {
                let k = key(&mut rng);
                db.delete_cf(cf, &k).unwrap();
                models[f].remove(&k);
            }
            50..=54 => {
                let (mut a, mut b) = (key(&mut rng), key(&mut rng));
                // The family's order: reverse for "rev".
                if (a > b) != (FAMILIES[f] == "rev") {
                    std::mem::swap(&mut a, &mut b);
                }
                db.delete_range_cf(cf, &a, &b).unwrap();
                let (lo, hi) = if a <= b {
                    (a, b)
                } else {
                    (b.clone(), a.clone())
                };
                let rev = FAMILIES[f] == "rev";
                models[f].retain(|k, _| {
                    if rev {
                        !(k > &lo && k <= &hi)
                    } else {
                        !(k >= &lo && k < &hi)
                    }
                });
            }
            55..=64 => {
                // A batch over every live family.
                let mut batch = WriteBatch::default();
                let mut staged = Vec::new();
                for g in 0..3 {
                    if !live[g] || rng.gen_bool(0.3) {
                        continue;
                    }
                    let k = key(&mut rng);
                    let v = format!("b{op}").into_bytes();
                    batch.put_cf(db.cf_handle(FAMILIES[g]).unwrap(), &k, &v);
                    staged.push((g, k, v));
                }
                db.write(batch).unwrap();
                for (g, k, v) in staged {
                    models[g].insert(k, v);
                }
            }
            65..=79 => {
                let k = key(&mut rng);
                assert_eq!(
                    db.get_cf(cf, &k).unwrap().as_deref(),
                    models[f].get(&k).map(Vec::as_slice),
                    "seed {seed} op {op}: get {} in {}",
                    String::from_utf8_lossy(&k),
                    FAMILIES[f]
                );
            }
            80..=84 => {
                let got: Vec<Vec<u8>> = db
                    .iterator_cf(cf, IteratorMode::Start)
                    .map(|r| r.unwrap().0.to_vec())
                    .collect();
                let mut want: Vec<Vec<u8>> = models[f].keys().cloned().collect();
                if FAMILIES[f] == "rev" {
                    want.reverse();
                }
                assert_eq!(got, want, "seed {seed} op {op}: scan of {}", FAMILIES[f]);
            }
            85..=89 => db.flush_cf(cf).unwrap(),
            90..=92 => db
                .compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>)
                .unwrap(),
            93..=94 if f != 0 => {
                db.drop_cf(FAMILIES[f]).unwrap();
                live[f] = false;
                models[f].clear();
            }
            _ => {
                drop(db);
                db = open_model_db(&fs, &mut rng, &live);
            }
        }
    }
    // A last full check after a reopen.
    drop(db);
    let db = open_model_db(&fs, &mut rng, &live);
    for f in 0..3 {
        if !live[f] {
            assert!(db.cf_handle(FAMILIES[f]).is_none());
            continue;
        }
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = models[f]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if FAMILIES[f] == "rev" {
            want.reverse();
        }
        assert_eq!(
            keys(&db, FAMILIES[f]),
            want,
            "seed {seed}: final {}",
            FAMILIES[f]
        );
    }
    db.wait_for_compact().unwrap();
    common::assert_files_are_live(fs.as_ref(), "/db", &db, &format!("seed {seed}"));
}

/// The child of the crash test: writes batches `i` = 1, 2, ... that put
/// key `i` in families "a" and "b" and the counter in the default family,
/// each synced; after each is acknowledged, appends `i` to `acked`.
/// Flushes family "a" now and then, so the log must be kept for "b".
fn crash_child(dir: &Path, acked: &Path) {
    use std::io::Write;
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_write_buffer_size(64 << 10);
    let db = DB::open_cf(&opts, dir, ["a", "b"]).unwrap();
    let a = db.cf_handle("a").unwrap();
    let b = db.cf_handle("b").unwrap();
    let mut next = db
        .get(b"counter")
        .unwrap()
        .map_or(1, |v| u64::from_le_bytes(v.try_into().unwrap()) + 1);
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(acked)
        .unwrap();
    let mut wo = WriteOptions::default();
    wo.set_sync(true);
    loop {
        let k = format!("key{next:010}");
        let mut batch = WriteBatch::default();
        batch.put_cf(a, &k, [b'a'; 200]);
        batch.put_cf(b, &k, [b'b'; 200]);
        batch.put(b"counter", next.to_le_bytes());
        db.write_opt(batch, &wo).unwrap();
        // One write call: a kill never leaves half a line.
        out.write_all(format!("{next}\n").as_bytes()).unwrap();
        if next.is_multiple_of(97) {
            db.flush_cf(a).unwrap();
        }
        next += 1;
    }
}

/// Kills a writer of cross-family batches with SIGKILL at random moments;
/// after each kill the database opens with every acknowledged batch and
/// never half of one: families "a" and "b" hold exactly the same keys,
/// 1..=n for the counter n, and n is at least the last acknowledged.
#[cfg(unix)]
#[test]
fn kill_9_never_leaves_half_a_cross_family_batch() {
    if let Ok(dir) = std::env::var("STRATA_CF_CRASH_CHILD") {
        let acked = std::env::var("STRATA_CF_CRASH_ACKED").unwrap();
        crash_child(Path::new(&dir), Path::new(&acked));
        return;
    }
    let dir = common::TempDir::new("cf-crash");
    let acked = dir.0.with_extension("acked");
    let _ = std::fs::remove_file(&acked);
    let cycles = env_or("STRATA_CF_CRASH_CYCLES", 12);
    let mut rng = StdRng::seed_from_u64(env_or("STRATA_SEED", 7));
    let exe = std::env::current_exe().unwrap();
    let mut opts = Options::default();
    opts.create_missing_column_families(true);
    for cycle in 0..cycles {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "kill_9_never_leaves_half_a_cross_family_batch",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("STRATA_CF_CRASH_CHILD", &dir.0)
            .env("STRATA_CF_CRASH_ACKED", &acked)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(rng.gen_range(150..700)));
        child.kill().unwrap();
        child.wait().unwrap();
        let last_acked: u64 = std::fs::read_to_string(&acked)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.parse().ok())
            .max()
            .unwrap_or(0);
        let db = DB::open_cf(&opts, &dir.0, ["a", "b"]).unwrap();
        let n = db
            .get(b"counter")
            .unwrap()
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
        assert!(
            n >= last_acked,
            "cycle {cycle}: counter {n} behind the acknowledged {last_acked}"
        );
        for cf in ["a", "b"] {
            let got = keys(&db, cf);
            assert_eq!(
                got.len() as u64,
                n,
                "cycle {cycle}: family {cf} holds {} keys, counter {n}",
                got.len()
            );
            for (i, (k, _)) in got.iter().enumerate() {
                assert_eq!(
                    k,
                    format!("key{:010}", i + 1).as_bytes(),
                    "cycle {cycle}: {cf}"
                );
            }
        }
        db.wait_for_compact().unwrap();
        let fs = strata_kv::env::PosixFileSystem::new();
        let tables = common::assert_files_are_live(
            &fs,
            dir.0.to_str().unwrap(),
            &db,
            &format!("cycle {cycle}"),
        );
        println!("cycle {cycle}: {n} batches, {last_acked} acknowledged, {tables} tables");
    }
    let _ = std::fs::remove_file(&acked);
}

/// Automatic compactions run in every family, not only the default one.
#[test]
fn every_family_compacts_its_level_0() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = mem_options(&fs);
    let db = DB::open_cf(&opts, "/db", ["a", "b"]).unwrap();
    for cf in ["a", "b"] {
        let h = db.cf_handle(cf).unwrap();
        for f in 0..12 {
            for i in 0..50 {
                db.put_cf(h, format!("k{:04}", (i * 7 + f) % 100), [f as u8; 50])
                    .unwrap();
            }
            db.flush_cf(h).unwrap();
        }
    }
    db.wait_for_compact().unwrap();
    for cf in ["a", "b"] {
        let h = db.cf_handle(cf).unwrap();
        let l0: usize = db
            .property_value_cf(h, "rocksdb.num-files-at-level0")
            .unwrap()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            l0 < 4,
            "family {cf}: {l0} files in L0 after wait_for_compact"
        );
    }
}

/// Table files ingested into a family are that family's; snapshots read
/// several families as of one moment.
#[test]
fn ingestion_and_snapshots_are_per_family() {
    let dir = common::TempDir::new("cf-ingest");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    let db = DB::open_cf(&opts, &dir.0, ["a", "b"]).unwrap();
    let a = db.cf_handle("a").unwrap();
    let b = db.cf_handle("b").unwrap();
    let file = dir.0.with_extension("ext.sst");
    let mut w = strata_kv::SstFileWriter::create(&Options::default());
    w.open(&file).unwrap();
    for i in 0..100u32 {
        w.put(format!("ext{i:03}"), b"x").unwrap();
    }
    w.finish().unwrap();
    db.ingest_external_file_cf(a, vec![&file]).unwrap();
    assert_eq!(db.get_cf(a, b"ext042").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(db.get_cf(b, b"ext042").unwrap(), None);
    assert_eq!(db.get(b"ext042").unwrap(), None);
    db.put_cf(a, b"k", b"a1").unwrap();
    db.put_cf(b, b"k", b"b1").unwrap();
    let snap = db.snapshot();
    let mut batch = WriteBatch::default();
    batch.put_cf(a, b"k", b"a2");
    batch.put_cf(b, b"k", b"b2");
    db.write(batch).unwrap();
    let old: Vec<Option<Vec<u8>>> = snap
        .multi_get_cf([(a, &b"k"[..]), (b, b"k")])
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(old, [Some(b"a1".to_vec()), Some(b"b1".to_vec())]);
    assert_eq!(db.get_cf(b, b"k").unwrap().as_deref(), Some(&b"b2"[..]));
    drop(snap);
    let _ = std::fs::remove_file(&file);
}

/// Past `max_total_wal_size`, a family whose few writes hold the oldest log
/// is switched and flushed with the next switch, so the logs stay bounded
/// while another family writes on; nothing of either is lost.
#[test]
fn max_total_wal_size_bounds_the_logs_a_rarely_written_family_keeps() {
    let fs = Arc::new(MemFileSystem::new());
    let mut opts = mem_options(&fs);
    opts.set_write_buffer_size(64 << 10);
    opts.set_max_total_wal_size(256 << 10);
    let descriptors = || ["busy", "idle"].map(|n| ColumnFamilyDescriptor::new(n, opts.clone()));
    let db = DB::open_cf_descriptors(&opts, "/db", descriptors()).unwrap();
    let busy = db.cf_handle("busy").unwrap();
    let idle = db.cf_handle("idle").unwrap();
    db.put_cf(idle, b"early", b"kept").unwrap();
    let mut most_logs = 0;
    for i in 0..30_000u32 {
        db.put_cf(busy, format!("key{i:06}"), [1u8; 100]).unwrap();
        if i % 1000 == 0 {
            db.wait_for_compact().unwrap();
            most_logs = most_logs.max(common::files_ending(fs.as_ref(), "/db", ".log").len());
        }
    }
    assert!(most_logs <= 8, "{most_logs} logs alive at once");
    let idle_tables: usize = db
        .property_value_cf(idle, "rocksdb.num-files-at-level0")
        .unwrap()
        .unwrap()
        .parse()
        .unwrap();
    assert!(idle_tables >= 1, "the idle family was never flushed");
    drop(db);
    let db = DB::open_cf_descriptors(&opts, "/db", descriptors()).unwrap();
    let idle = db.cf_handle("idle").unwrap();
    let busy = db.cf_handle("busy").unwrap();
    assert_eq!(
        db.get_cf(idle, b"early").unwrap().as_deref(),
        Some(&b"kept"[..])
    );
    assert_eq!(
        db.get_cf(busy, b"key029999").unwrap().map(|v| v.len()),
        Some(100)
    );
}

/// A family dropped while other threads flush it, write to it and ingest
/// into it: they end with success or `InvalidArgument`, never a panic or
/// a hang; the other families are untouched.
#[test]
fn dropping_a_family_while_others_use_it_ends_them_cleanly() {
    let dir = common::TempDir::new("cf-drop-race");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(64 << 10);
    let db = DB::open(&opts, &dir.0).unwrap();
    let file = dir.0.with_extension("race.sst");
    let mut w = strata_kv::SstFileWriter::create(&Options::default());
    w.open(&file).unwrap();
    for i in 0..50u32 {
        w.put(format!("ext{i:03}"), b"x").unwrap();
    }
    w.finish().unwrap();
    for round in 0..8 {
        db.create_cf("x", &opts).unwrap();
        let x = db.cf_handle("x").unwrap();
        let ok_or_dropped = |r: Result<(), Error>, what: &str| match r {
            Ok(()) | Err(Error::InvalidArgument(_)) => {}
            Err(e) => panic!("round {round}: {what}: {e}"),
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..3000u32 {
                    if let Err(e) = db.put_cf(x, format!("k{i:05}"), [0u8; 64]) {
                        ok_or_dropped(Err(e), "put");
                        break;
                    }
                }
            });
            s.spawn(|| {
                for _ in 0..20 {
                    ok_or_dropped(db.flush_cf(x), "flush");
                }
            });
            s.spawn(|| {
                for _ in 0..5 {
                    ok_or_dropped(db.ingest_external_file_cf(x, vec![&file]), "ingest");
                }
            });
            std::thread::sleep(std::time::Duration::from_millis(5 * round));
            db.drop_cf("x").unwrap();
        });
        db.put(b"default", round.to_string()).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.get(b"default").unwrap().as_deref(), Some(&b"7"[..]));
    drop(db);
    assert_eq!(DB::list_cf(&opts, &dir.0).unwrap(), ["default"]);
    let _ = std::fs::remove_file(&file);
}

/// A read-only open of some families cannot make a checkpoint: the copy's
/// manifest would lose the others.
#[test]
fn a_checkpoint_of_a_partial_read_only_open_is_refused() {
    let dir = common::TempDir::new("cf-ro-checkpoint");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    drop(DB::open_cf(&opts, &dir.0, ["a", "b"]).unwrap());
    let cp = dir.0.with_extension("cp");
    let partial = DB::open_cf_for_read_only(&opts, &dir.0, ["a"], false).unwrap();
    let e = Checkpoint::new(&partial)
        .and_then(|c| c.create_checkpoint(&cp))
        .unwrap_err();
    assert!(matches!(e, Error::NotSupported(_)), "{e}");
    assert!(e.to_string().contains('b'), "{e}");
    assert!(!cp.exists());
    drop(partial);
    let whole = DB::open_cf_for_read_only(&opts, &dir.0, ["a", "b"], false).unwrap();
    Checkpoint::new(&whole)
        .unwrap()
        .create_checkpoint(&cp)
        .unwrap();
    drop(whole);
    assert_eq!(DB::list_cf(&opts, &cp).unwrap().len(), 3);
    let _ = std::fs::remove_dir_all(&cp);
}

/// Two faults at once: a manifest write fails under `drop_cf` while an
/// iterator holds the family's old version, and under `create_cf`. Each
/// fails alone, stops writes until `resume`, deletes nothing the iterator
/// reads, and leaves the database usable; a drop while writes are stopped
/// is refused rather than written.
#[test]
fn a_failed_manifest_write_under_create_or_drop_deletes_nothing_live() {
    use strata_kv::env::{FaultInjectionFileSystem, FaultRule, FileOp};
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    opts.set_file_system(Arc::new(fs.clone()));
    let db = DB::open_cf(&opts, "/db", ["a"]).unwrap();
    let a = db.cf_handle("a").unwrap();
    for i in 0..500u32 {
        db.put_cf(a, format!("k{i:04}"), b"v").unwrap();
    }
    db.flush_cf(a).unwrap();
    let mut it = db.raw_iterator_cf(a);
    it.seek_to_first();
    assert!(it.valid());
    let tables = common::files_ending(&fs, "/db", ".sst");
    fs.inject(
        FaultRule::new(&[FileOp::Append])
            .path_contains("MANIFEST")
            .times(1),
    );
    assert!(db.drop_cf("a").is_err());
    assert!(
        db.put(b"x", b"y").is_err(),
        "writes go on after a failed edit"
    );
    // Nothing was deleted; the iterator reads every key.
    assert_eq!(common::files_ending(&fs, "/db", ".sst"), tables);
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, 500);
    // A drop while writes are stopped is refused, not written.
    assert!(db.drop_cf("a").is_err());
    db.resume().unwrap();
    db.drop_cf("a").unwrap();
    // The iterator's view outlives the drop; its files go with it.
    it.seek_to_first();
    assert!(it.valid());
    drop(it);
    assert!(common::files_ending(&fs, "/db", ".sst").is_empty());
    // A failed create stops writes too; after resume the name is usable
    // (the failed edit may or may not have reached the disk).
    fs.inject(
        FaultRule::new(&[FileOp::Append])
            .path_contains("MANIFEST")
            .times(1),
    );
    assert!(db.create_cf("b", &Options::default()).is_err());
    assert!(db.put(b"x", b"y").is_err());
    db.resume().unwrap();
    if db.cf_handle("b").is_none() {
        db.create_cf("b", &Options::default()).unwrap();
    }
    db.put_cf(db.cf_handle("b").unwrap(), b"k", b"v").unwrap();
    drop(db);
    let db = DB::open_cf(&opts, "/db", ["b"]).unwrap();
    assert_eq!(
        db.get_cf(db.cf_handle("b").unwrap(), b"k")
            .unwrap()
            .as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(DB::list_cf(&opts, "/db").unwrap(), ["default", "b"]);
}
