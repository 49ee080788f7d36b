//! Packed tables in a database: written by flushes and compactions to the
//! configured levels, read by every read path, side by side with
//! block-based tables in one database and one level, across reopens that
//! change the format, with snapshots of older versions; and a damaged
//! packed table on disk is a Corruption naming the file.

use std::collections::BTreeMap;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::{Direction, Error, IteratorMode, Options, PackedTableOptions, ReadOptions, DB};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-packed-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn options(packed_from: Option<i32>, lazy: bool) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(256 << 10);
    opts.set_target_file_size_base(64 << 10);
    opts.set_max_bytes_for_level_base(256 << 10);
    opts.set_max_bytes_for_level_multiplier(4.0);
    if let Some(level) = packed_from {
        let mut p = PackedTableOptions::default();
        p.set_from_level(level);
        p.set_lazy_checksums(lazy);
        opts.set_packed_table_factory(&p);
    }
    opts
}

/// (level, packed?) of every live table.
fn table_formats(db: &DB, dir: &Path) -> Vec<(i32, bool)> {
    db.live_files()
        .unwrap()
        .iter()
        .map(|f| {
            let bytes = std::fs::read(dir.join(f.name.trim_start_matches('/'))).unwrap();
            (f.level, bytes.ends_with(b"STRATAP1"))
        })
        .collect()
}

fn check(db: &DB, model: &Model, rng: &mut StdRng, what: &str) {
    for _ in 0..2000 {
        let k = key(rng.gen_range(0..12_000));
        assert_eq!(
            db.get(&k).unwrap(),
            model.get(&k).cloned(),
            "{what}: get {k:?}"
        );
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .iterator(IteratorMode::Start)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all.len(), want.len(), "{what}: forward scan length");
    assert!(all == want, "{what}: forward scan");
    let back: Vec<Vec<u8>> = db
        .iterator(IteratorMode::End)
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    assert!(back.iter().rev().eq(model.keys()), "{what}: backward scan");
    for _ in 0..200 {
        let from = key(rng.gen_range(0..12_000));
        let dir = if rng.gen_bool(0.5) {
            Direction::Forward
        } else {
            Direction::Reverse
        };
        let got: Vec<Vec<u8>> = db
            .iterator(IteratorMode::From(&from, dir))
            .take(5)
            .map(|r| r.unwrap().0.to_vec())
            .collect();
        let want: Vec<Vec<u8>> = match dir {
            Direction::Forward => model
                .range(from.clone()..)
                .take(5)
                .map(|(k, _)| k.clone())
                .collect(),
            Direction::Reverse => model
                .range(..=from.clone())
                .rev()
                .take(5)
                .map(|(k, _)| k.clone())
                .collect(),
        };
        assert_eq!(got, want, "{what}: seek {from:?} {dir:?}");
    }
    let keys: Vec<Vec<u8>> = (0..300).map(|_| key(rng.gen_range(0..12_000))).collect();
    let got = db.multi_get(&keys);
    for (k, r) in keys.iter().zip(got) {
        assert_eq!(r.unwrap(), model.get(k).cloned(), "{what}: multi_get {k:?}");
    }
}

/// Dense big-endian integers, so most tables get the all-one index.
fn key(i: u64) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

fn write_some(db: &DB, model: &mut Model, rng: &mut StdRng, n: usize) {
    for _ in 0..n {
        let k = key(rng.gen_range(0..10_000));
        if rng.gen_bool(0.1) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v: Vec<u8> = (0..rng.gen_range(0..50)).map(|_| rng.gen()).collect();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

#[test]
fn packed_tables_serve_every_read_and_coexist_with_block_tables() {
    let dir = temp_dir("coexist");
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = Model::new();
    for lazy in [false, true] {
        let db = DB::open(&options(Some(1), lazy), &dir).unwrap();
        // A dense run loaded in order, then random overwrites and deletes.
        for i in 0..10_000u64 {
            db.put(key(i), i.to_le_bytes()).unwrap();
            model.insert(key(i), i.to_le_bytes().to_vec());
        }
        write_some(&db, &mut model, &mut rng, 6000);
        let snap_model = model.clone();
        let snap = db.snapshot();
        write_some(&db, &mut model, &mut rng, 3000);
        db.flush().unwrap();
        db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
        let formats = table_formats(&db, &dir);
        assert!(
            formats.iter().any(|&(_, p)| p),
            "no packed table: {formats:?}"
        );
        assert!(
            formats.iter().all(|&(level, p)| p == (level >= 1)),
            "packed exactly from level 1: {formats:?}"
        );
        check(&db, &model, &mut rng, "packed from L1");
        // The snapshot still reads the versions it saw.
        for _ in 0..1000 {
            let k = key(rng.gen_range(0..10_000));
            assert_eq!(snap.get(&k).unwrap(), snap_model.get(&k).cloned());
        }
        drop(snap);
        drop(db);

        // Reopened block-based: the packed tables stay readable, new L0
        // tables are block-based, compaction output is block-based again.
        let db = DB::open(&options(None, false), &dir).unwrap();
        check(&db, &model, &mut rng, "reopened without packed tables");
        write_some(&db, &mut model, &mut rng, 3000);
        db.flush().unwrap();
        let formats = table_formats(&db, &dir);
        assert!(formats.contains(&(0, false)) && formats.iter().any(|&(_, p)| p));
        check(&db, &model, &mut rng, "both formats");
        db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
        assert!(table_formats(&db, &dir).iter().all(|&(_, p)| !p));
        check(&db, &model, &mut rng, "rewritten block-based");
        drop(db);

        // Every level packed, L0 included.
        let db = DB::open(&options(Some(0), lazy), &dir).unwrap();
        write_some(&db, &mut model, &mut rng, 3000);
        db.flush().unwrap();
        assert!(table_formats(&db, &dir).contains(&(0, true)));
        check(&db, &model, &mut rng, "packed L0");
        drop(db);
        let db = DB::open(&options(Some(0), lazy), &dir).unwrap();
        check(&db, &model, &mut rng, "packed L0 reopened");
        db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
        check(&db, &model, &mut rng, "packed everywhere");
        // No snapshot and nothing below: the last level's entries lost
        // their sequence numbers (so packed tables store no version tags).
        let files = db.live_files().unwrap();
        let last = files.iter().map(|f| f.level).max().unwrap();
        assert!(files
            .iter()
            .filter(|f| f.level == last)
            .all(|f| f.largest_seqno == 0 && f.smallest_seqno == 0));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_packed_table_is_corruption_naming_the_file() {
    for lazy in [false, true] {
        let dir = temp_dir(&format!("damaged-{lazy}"));
        let db = DB::open(&options(Some(0), lazy), &dir).unwrap();
        for i in 0..2000u64 {
            db.put(key(i), [7u8; 30]).unwrap();
        }
        db.flush().unwrap();
        let files = db.live_files().unwrap();
        assert_eq!(files.len(), 1);
        drop(db);
        let path = dir.join(files[0].name.trim_start_matches('/'));
        let mut bytes = std::fs::read(&path).unwrap();
        // A byte inside the values.
        bytes[1000] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let db = DB::open(&options(Some(0), lazy), &dir).unwrap();
        match db.get(key(5)) {
            Err(Error::Corruption { file, what, .. }) => {
                assert!(file.ends_with(&files[0].name), "{file}");
                assert!(what.contains("values"), "{what}");
            }
            other => panic!("lazy={lazy}: {other:?}"),
        }
        let mut it = db.raw_iterator_opt(ReadOptions::default());
        it.seek_to_first();
        assert!(!it.valid());
        assert!(matches!(it.status(), Err(Error::Corruption { .. })));
        drop(it);
        drop(db);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn invalid_packed_options_are_refused() {
    let dir = temp_dir("invalid");
    let mut p = PackedTableOptions::default();
    p.set_from_level(7);
    let mut opts = options(None, false);
    opts.set_packed_table_factory(&p);
    assert!(matches!(
        DB::open(&opts, &dir),
        Err(Error::InvalidArgument(_))
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn packed_tables_under_the_reverse_comparator() {
    let dir = temp_dir("reverse");
    let mut opts = options(Some(0), false);
    opts.set_comparator_object(std::sync::Arc::new(strata_kv::ReverseBytewiseComparator));
    let db = DB::open(&opts, &dir).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = Model::new();
    write_some(&db, &mut model, &mut rng, 8000);
    db.flush().unwrap();
    db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
    assert!(table_formats(&db, &dir).iter().all(|&(_, p)| p));
    for _ in 0..2000 {
        let k = key(rng.gen_range(0..12_000));
        assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
    }
    // Largest key first.
    let scan: Vec<Vec<u8>> = db
        .iterator(IteratorMode::Start)
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    assert!(scan.iter().eq(model.keys().rev()));
    let from = key(5000);
    let got: Vec<Vec<u8>> = db
        .iterator(IteratorMode::From(&from, Direction::Forward))
        .take(3)
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    let want: Vec<Vec<u8>> = model
        .range(..=from.clone())
        .rev()
        .take(3)
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(got, want);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
