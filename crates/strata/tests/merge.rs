//! Merge operators: reads resolve operands (get, MultiGet, iterators both
//! ways, snapshots), compaction folds them (fully above a value, a deletion
//! or the bottom; partially across a snapshot), the operator's name guards
//! the tables, and a failing merge fails the read or compaction without
//! losing anything. The randomized model test (`db_model.rs`) mixes merges
//! into every other operation.

use std::path::Path;
use std::sync::Arc;

use strata_kv::env::{FileSystem, MemFileSystem};
use strata_kv::{Error, IteratorMode, MergeOperands, Options, PackedTableOptions, WriteBatch, DB};

fn add(_key: &[u8], base: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let mut sum = base.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
    for op in operands {
        sum += u64::from_le_bytes(op.try_into().ok()?);
    }
    Some(sum.to_le_bytes().to_vec())
}

fn n(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

fn options(fs: &Arc<MemFileSystem>) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(fs.clone());
    opts.set_disable_auto_compactions(true);
    opts.set_merge_operator_associative("add", add);
    opts
}

fn entries_in_tables(db: &DB) -> u64 {
    db.live_files().unwrap().iter().map(|f| f.num_entries).sum()
}

fn get_u64(db: &DB, key: &[u8]) -> Option<u64> {
    db.get(key)
        .unwrap()
        .map(|v| u64::from_le_bytes(v.try_into().unwrap()))
}

#[test]
fn counters_add_up_through_flushes_compactions_and_reopens() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(&fs);
    let mut packed = opts.clone();
    let mut p = PackedTableOptions::default();
    p.set_from_level(0);
    packed.set_packed_table_factory(&p);
    for (round, opts) in [&opts, &packed, &opts].into_iter().enumerate() {
        let db = DB::open(opts, "/db").unwrap();
        for i in 0..50u64 {
            let key = format!("c{i:02}");
            if i % 10 == 0 {
                db.put(&key, n(1000)).unwrap(); // a base below the operand
            }
            db.merge(&key, n(i + 1)).unwrap();
            if i % 7 == 0 {
                db.flush().unwrap();
            }
        }
        for i in 0..50u64 {
            let key = format!("c{i:02}");
            // A put resets the counter each round; the others add up.
            let want = if i % 10 == 0 {
                1000 + i + 1
            } else {
                (round as u64 + 1) * (i + 1)
            };
            assert_eq!(
                get_u64(&db, key.as_bytes()),
                Some(want),
                "round {round} {key}"
            );
        }
        if round == 1 {
            db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
            // Nothing older anywhere: every key is one value.
            assert_eq!(entries_in_tables(&db), 50, "round {round}");
        }
    }
}

#[test]
fn reads_resolve_operands_every_way() {
    let fs = Arc::new(MemFileSystem::new());
    let db = DB::open(&options(&fs), "/db").unwrap();
    db.put(b"b", n(100)).unwrap();
    db.flush().unwrap();
    let before = db.snapshot();
    let mut batch = WriteBatch::default();
    batch.merge(b"a", n(1));
    batch.merge(b"b", n(2));
    batch.merge(b"b", n(3));
    db.write(batch).unwrap();
    db.flush().unwrap();
    db.merge(b"c", n(7)).unwrap();
    db.delete(b"a").unwrap();
    db.merge(b"a", n(5)).unwrap(); // after the deletion: 5, not 6
    let want = vec![
        (b"a".to_vec(), n(5).to_vec()),
        (b"b".to_vec(), n(105).to_vec()),
        (b"c".to_vec(), n(7).to_vec()),
    ];
    let forward: Vec<_> = db
        .iterator(IteratorMode::Start)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(forward, want);
    let mut backward: Vec<_> = db
        .iterator(IteratorMode::End)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    backward.reverse();
    assert_eq!(backward, want);
    // Turning around on a merged key.
    let mut it = db.raw_iterator();
    it.seek(b"b");
    assert_eq!(it.value(), Some(&n(105)[..]));
    it.prev();
    assert_eq!((it.key(), it.value()), (Some(&b"a"[..]), Some(&n(5)[..])));
    it.next();
    it.next();
    assert_eq!((it.key(), it.value()), (Some(&b"c"[..]), Some(&n(7)[..])));
    it.prev();
    assert_eq!((it.key(), it.value()), (Some(&b"b"[..]), Some(&n(105)[..])));
    let got: Vec<_> = db
        .multi_get([&b"a"[..], b"b", b"c", b"d"])
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        got,
        vec![
            Some(n(5).to_vec()),
            Some(n(105).to_vec()),
            Some(n(7).to_vec()),
            None
        ]
    );
    assert_eq!(before.get(b"b").unwrap(), Some(n(100).to_vec()));
    assert_eq!(before.get(b"a").unwrap(), None);
}

#[test]
fn compaction_folds_within_a_snapshot_stripe_only() {
    let fs = Arc::new(MemFileSystem::new());
    let db = DB::open(&options(&fs), "/db").unwrap();
    db.put(b"k", n(10)).unwrap();
    db.merge(b"k", n(1)).unwrap();
    db.flush().unwrap();
    let s1 = db.snapshot();
    db.merge(b"k", n(2)).unwrap();
    db.merge(b"k", n(3)).unwrap();
    db.flush().unwrap();
    // Two overlapping L0 files: rewritten, not moved.
    db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
    // Below the snapshot: 10 + 1 as one value; above it, the two operands
    // as one (the associative operator's partial merge).
    assert_eq!(entries_in_tables(&db), 2);
    assert_eq!(s1.get(b"k").unwrap(), Some(n(11).to_vec()));
    assert_eq!(get_u64(&db, b"k"), Some(16));
    drop(s1);
    db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
    assert_eq!(entries_in_tables(&db), 1);
    assert_eq!(get_u64(&db, b"k"), Some(16));
}

#[test]
fn flush_folds_the_operands_each_snapshot_separates() {
    let fs = Arc::new(MemFileSystem::new());
    let db = DB::open(&options(&fs), "/db").unwrap();
    db.put(b"a", n(10)).unwrap();
    db.merge(b"a", n(1)).unwrap();
    db.merge(b"a", n(2)).unwrap();
    db.merge(b"b", n(1)).unwrap(); // no base in the memtable: one operand
    db.merge(b"b", n(2)).unwrap();
    let s = db.snapshot();
    db.merge(b"c", n(5)).unwrap();
    db.merge(b"a", n(4)).unwrap(); // above the snapshot: kept apart
    db.flush().unwrap();
    // a: 13 and the operand 4; b: one operand 3; c: one operand.
    assert_eq!(entries_in_tables(&db), 4);
    assert_eq!(get_u64(&db, b"a"), Some(17));
    assert_eq!(s.get(b"a").unwrap(), Some(n(13).to_vec()));
    assert_eq!(get_u64(&db, b"b"), Some(3));
    assert_eq!(get_u64(&db, b"c"), Some(5));
    assert_eq!(s.get(b"c").unwrap(), None);
}

/// A read walks a key's operands through one search per source: across
/// the data blocks of a table (snapshots keep every operand apart, and
/// blocks are small), across tables and the memtable, down to a base, a
/// deletion or a range deletion, and stops at the next key.
#[test]
fn a_read_walks_operands_across_blocks_tables_and_memtables() {
    let fs = Arc::new(MemFileSystem::new());
    let mut opts = options(&fs);
    let mut t = strata_kv::BlockBasedOptions::default();
    t.set_block_size(256);
    opts.set_block_based_table_factory(&t);
    let db = DB::open(&opts, "/db").unwrap();
    db.put(b"a", n(7)).unwrap();
    db.put(b"b", n(1_000_000)).unwrap();
    db.put(b"c", n(9)).unwrap();
    let mut snapshots = Vec::new();
    let mut want = vec![1_000_000u64];
    for i in 1..=300u64 {
        db.merge(b"b", n(i)).unwrap();
        snapshots.push(db.snapshot());
        want.push(want.last().unwrap() + i);
        if i % 100 == 0 {
            db.flush().unwrap(); // 100 operands, many 256-byte blocks
        }
        if i == 250 {
            db.merge(b"a", n(1)).unwrap();
        }
    }
    assert!(db.live_files().unwrap().len() >= 3);
    assert_eq!(get_u64(&db, b"b"), Some(*want.last().unwrap()));
    for (i, s) in snapshots.iter().enumerate() {
        let got = s
            .get(b"b")
            .unwrap()
            .map(|v| u64::from_le_bytes(v.try_into().unwrap()));
        assert_eq!(got, Some(want[i + 1]), "snapshot after merge {}", i + 1);
    }
    assert_eq!(get_u64(&db, b"a"), Some(8));
    assert_eq!(get_u64(&db, b"c"), Some(9));
    let got = db.multi_get([b"a", b"b", b"c"]);
    assert_eq!(
        got[1].as_ref().unwrap().as_deref(),
        Some(&n(*want.last().unwrap())[..])
    );

    // A deletion under later operands ends the walk: only they add up.
    db.delete(b"b").unwrap();
    for i in 1..=150u64 {
        db.merge(b"b", n(i)).unwrap();
        snapshots.push(db.snapshot());
        if i == 100 {
            db.flush().unwrap();
        }
    }
    assert_eq!(get_u64(&db, b"b"), Some(150 * 151 / 2));
    // So does a range deletion, in the memtable, over the flushed ones.
    db.delete_range(&b"b"[..], &b"b\0"[..]).unwrap();
    db.merge(b"b", n(5)).unwrap();
    assert_eq!(get_u64(&db, b"b"), Some(5));
    db.flush().unwrap();
    assert_eq!(get_u64(&db, b"b"), Some(5));
    assert_eq!(get_u64(&db, b"a"), Some(8));
    assert_eq!(get_u64(&db, b"c"), Some(9));
    // The oldest snapshots still see the first run of operands.
    let got = snapshots[0].get(b"b").unwrap().unwrap();
    assert_eq!(u64::from_le_bytes(got.try_into().unwrap()), want[1]);
}

#[test]
fn merge_without_an_operator_is_not_supported() {
    let fs = Arc::new(MemFileSystem::new());
    let mut opts = options(&fs);
    opts.set_merge_operator_associative("add", add);
    let mut plain = Options::default();
    plain.create_if_missing(true);
    plain.set_file_system(fs.clone());
    let db = DB::open(&plain, "/plain").unwrap();
    let e = db.merge(b"k", n(1)).unwrap_err();
    assert!(matches!(e, Error::NotSupported(_)), "{e}");
    let mut batch = WriteBatch::default();
    batch.put(b"x", b"1");
    batch.merge(b"k", n(1));
    assert!(matches!(db.write(batch), Err(Error::NotSupported(_))));
    assert_eq!(db.get(b"x").unwrap(), None, "half a refused batch landed");
}

#[test]
fn the_operator_name_guards_operands_across_reopens() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(&fs);
    {
        let db = DB::open(&opts, "/db").unwrap();
        db.merge(b"flushed", n(1)).unwrap();
        db.flush().unwrap();
        db.merge(b"logged", n(2)).unwrap();
    }
    // Another name: refused at open for writing, naming both operators
    // (operands of two operators would leave tables no operator can read).
    let mut other = opts.clone();
    other.set_merge_operator_associative("concat", add);
    let e = DB::open(&other, "/db").unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(
        msg.contains("\"add\"") && msg.contains("\"concat\""),
        "{msg}"
    );
    // No operator: the logged operands are refused, naming the log.
    let mut none = Options::default();
    none.set_file_system(fs.clone());
    let e = DB::open(&none, "/db").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(".log") && msg.contains("opened with none"),
        "{msg}"
    );
    // Once the logged operands are in a table: no operator opens the
    // database, and writes what it can; the tables holding operands are
    // refused, naming both (a read-only open under another name too).
    drop(DB::open(&opts, "/db").unwrap());
    let db = DB::open(&none, "/db").unwrap();
    db.put(b"plain", b"v").unwrap();
    assert!(matches!(
        db.merge(b"flushed", n(1)),
        Err(Error::NotSupported(_))
    ));
    let e = db.get(b"flushed").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("opened with none"), "{e}");
    drop(db);
    let db = DB::open_for_read_only(&other, "/db", false).unwrap();
    let e = db.get(b"logged").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(".sst") && msg.contains("\"add\"") && msg.contains("\"concat\""),
        "{msg}"
    );
    drop(db);
    // The right operator again: nothing was lost.
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(get_u64(&db, b"flushed"), Some(1));
    assert_eq!(get_u64(&db, b"logged"), Some(2));
    assert_eq!(db.get(b"plain").unwrap(), Some(b"v".to_vec()));
}

fn picky(_key: &[u8], base: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    if operands.iter().any(|op| op == b"bad") {
        return None;
    }
    let mut out = base.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands {
        out.extend_from_slice(op);
    }
    Some(out)
}

fn tolerant(_key: &[u8], base: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let mut out = base.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands {
        out.extend_from_slice(op);
    }
    Some(out)
}

#[test]
fn a_failing_merge_fails_reads_and_compaction_and_loses_nothing() {
    let fs = Arc::new(MemFileSystem::new());
    let mut opts = options(&fs);
    opts.set_merge_operator_associative("append", picky);
    {
        let db = DB::open(&opts, "/db").unwrap();
        db.put(b"k", b"base-").unwrap();
        db.flush().unwrap(); // two overlapping files: compaction rewrites them
        db.merge(b"k", b"bad").unwrap();
        db.put(b"other", b"fine").unwrap();
        let e = db.get(b"k").unwrap_err();
        assert!(matches!(e, Error::MergeFailed(_)), "{e}");
        assert!(e.to_string().contains("\"append\""), "{e}");
        let mut it = db.raw_iterator();
        it.seek_to_first();
        assert!(!it.valid());
        assert!(matches!(it.status(), Err(Error::MergeFailed(_))));
        // The failure belongs to that key: a seek elsewhere starts afresh.
        it.seek(b"other");
        assert_eq!(it.value(), Some(&b"fine"[..]));
        assert!(it.status().is_ok());
        db.flush().unwrap();
        let e = db.compact_range::<&[u8], &[u8]>(None, None).unwrap_err();
        assert!(matches!(e, Error::MergeFailed(_)), "{e}");
        assert_eq!(db.get(b"other").unwrap(), Some(b"fine".to_vec()));
    }
    let mut fixed = opts.clone();
    fixed.set_merge_operator_associative("append", tolerant);
    let db = DB::open(&fixed, "/db").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"base-bad".to_vec()));
    db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"base-bad".to_vec()));
    assert_eq!(db.get(b"other").unwrap(), Some(b"fine".to_vec()));
    assert!(fs.exists(Path::new("/db/CURRENT")));
}
