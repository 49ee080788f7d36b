//! Range deletions (`delete_range`): reads through memtables and tables,
//! snapshots, both iteration directions, MultiGet, merges, flush and
//! compaction (tombstones cut at file boundaries, dropped at the bottom),
//! recovery from the log, bad input and a corrupted range-deletion block.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::TempDir;
use strata_kv::env::{FileSystem, PosixFileSystem};
use strata_kv::{Error, IteratorMode, Options, ReadOptions, WriteBatch, DB};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn opts() -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o
}

fn keys(db: &DB) -> Vec<Vec<u8>> {
    db.iterator(IteratorMode::Start)
        .map(|r| r.unwrap().0.to_vec())
        .collect()
}

fn keys_reverse(db: &DB) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = db
        .iterator(IteratorMode::End)
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    v.reverse();
    v
}

fn expect_between(db: &DB, n: u32, deleted: impl Fn(u32) -> bool, what: &str) {
    let want: Vec<Vec<u8>> = (0..n).filter(|&i| !deleted(i)).map(key).collect();
    assert_eq!(keys(db), want, "{what}: forward");
    assert_eq!(keys_reverse(db), want, "{what}: reverse");
    for i in 0..n {
        let got = db.get(key(i)).unwrap();
        assert_eq!(got.is_some(), !deleted(i), "{what}: get {i}");
    }
    let all: Vec<Vec<u8>> = (0..n).map(key).collect();
    let got = db.multi_get(&all);
    for (i, r) in got.into_iter().enumerate() {
        assert_eq!(
            r.unwrap().is_some(),
            !deleted(i as u32),
            "{what}: multi_get {i}"
        );
    }
}

fn fill(db: &DB, n: u32) {
    for i in 0..n {
        db.put(key(i), format!("v{i}")).unwrap();
    }
}

#[test]
fn deletes_a_range_in_memtable_tables_and_after_reopen() {
    let dir = TempDir::new("range_del_0");
    let db = DB::open(&opts(), &dir.0).unwrap();
    fill(&db, 1000);
    db.delete_range(key(100), key(200)).unwrap();
    let gone = |i: u32| (100..200).contains(&i);
    expect_between(&db, 1000, gone, "memtable");
    db.flush().unwrap();
    expect_between(&db, 1000, gone, "after flush");
    // A second tombstone overlapping the first, and newer writes inside.
    db.delete_range(key(150), key(300)).unwrap();
    db.put(key(160), b"back").unwrap();
    let gone = |i: u32| (100..300).contains(&i) && i != 160;
    expect_between(&db, 1000, gone, "overlapping, memtable");
    db.flush().unwrap();
    expect_between(&db, 1000, gone, "overlapping, flushed");
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    expect_between(&db, 1000, gone, "compacted");
    assert_eq!(db.get(key(160)).unwrap().as_deref(), Some(&b"back"[..]));
    drop(db);
    let db = DB::open(&opts(), &dir.0).unwrap();
    expect_between(&db, 1000, gone, "reopened");
}

#[test]
fn recovered_from_the_log() {
    let dir = TempDir::new("range_del_1");
    {
        let db = DB::open(&opts(), &dir.0).unwrap();
        fill(&db, 500);
        db.flush().unwrap();
        let mut b = WriteBatch::default();
        b.delete_range(key(10), key(20));
        b.put(key(15), b"kept");
        db.write(b).unwrap();
        // No flush: the tombstone lives only in the log.
    }
    let db = DB::open(&opts(), &dir.0).unwrap();
    expect_between(&db, 500, |i| (10..20).contains(&i) && i != 15, "recovered");
}

#[test]
fn snapshots_see_what_was_there() {
    let dir = TempDir::new("range_del_2");
    let db = DB::open(&opts(), &dir.0).unwrap();
    fill(&db, 300);
    db.flush().unwrap();
    let snap = db.snapshot();
    db.delete_range(key(0), key(300)).unwrap();
    assert!(keys(&db).is_empty());
    for round in 0..3 {
        // The snapshot still sees every key, through flush and compaction.
        let mut ro = ReadOptions::default();
        ro.set_snapshot(&snap);
        let n = db.iterator_opt(IteratorMode::Start, ro).count();
        assert_eq!(n, 300, "round {round}");
        assert_eq!(
            snap.get(key(7)).unwrap().as_deref(),
            Some(&b"v7"[..]),
            "round {round}"
        );
        assert_eq!(db.get(key(7)).unwrap(), None, "round {round}");
        match round {
            0 => db.flush().unwrap(),
            _ => db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap(),
        }
    }
    drop(snap);
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    assert!(keys(&db).is_empty());
    // With no snapshot left, the bottom-level compaction dropped the
    // tombstone and every key under it.
    let live = db.live_files().unwrap();
    let entries: u64 = live.iter().map(|f| f.num_entries).sum();
    assert_eq!(entries, 0, "{live:?}");
}

#[test]
fn merges_under_a_range_deletion_start_over() {
    let dir = TempDir::new("range_del_3");
    let mut o = opts();
    o.set_merge_operator_associative("append", |_k, base, ops| {
        let mut v = base.map(<[u8]>::to_vec).unwrap_or_default();
        for op in ops {
            v.extend_from_slice(op);
        }
        Some(v)
    });
    let db = DB::open(&o, &dir.0).unwrap();
    db.put(b"k", b"a").unwrap();
    db.merge(b"k", b"b").unwrap();
    db.flush().unwrap();
    db.delete_range(&b"j"[..], &b"l"[..]).unwrap();
    db.merge(b"k", b"c").unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"c"[..]));
    let it: Vec<_> = db
        .iterator(IteratorMode::End)
        .map(|r| r.unwrap().1.to_vec())
        .collect();
    assert_eq!(it, vec![b"c".to_vec()]);
    db.flush().unwrap();
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"c"[..]));
    assert_eq!(
        db.multi_get([b"k", b"x"])[0].as_ref().unwrap().as_deref(),
        Some(&b"c"[..])
    );
}

#[test]
fn compaction_cuts_tombstones_at_file_boundaries() {
    let dir = TempDir::new("range_del_4");
    let mut o = opts();
    o.set_write_buffer_size(64 << 10);
    o.set_target_file_size_base(32 << 10);
    let db = DB::open(&o, &dir.0).unwrap();
    // Values that do not compress, so that the files are many.
    let mut x: u64 = 1;
    for i in 0..20_000 {
        let value: Vec<u8> = (0..100)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 56) as u8
            })
            .collect();
        db.put(key(i), &value).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    // Every 1,000 keys, a range of 300 deleted; one deletion spans many
    // files; keep a snapshot so that the tombstones survive compaction.
    for i in (0..20_000).step_by(1000) {
        db.delete_range(key(i), key(i + 300)).unwrap();
    }
    db.delete_range(key(5_100), key(12_900)).unwrap();
    let snap = db.snapshot();
    db.put(key(5_000), b"after").unwrap();
    db.flush().unwrap();
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    let gone = |i: u32| (i % 1000 < 300 && i != 5_000) || (5_100..12_900).contains(&i);
    expect_between(&db, 20_000, gone, "compacted with a snapshot");
    let files = db.live_files().unwrap();
    assert!(files.len() > 4, "{} files", files.len());
    // Files of one level stay disjoint although tombstones span them.
    let mut by_level: std::collections::BTreeMap<i32, Vec<_>> = Default::default();
    for f in &files {
        by_level.entry(f.level).or_default().push(f);
    }
    for (level, mut fs) in by_level {
        if level == 0 {
            continue;
        }
        fs.sort_by(|a, b| a.start_key.cmp(&b.start_key));
        for w in fs.windows(2) {
            assert!(
                w[0].end_key <= w[1].start_key,
                "L{level}: {:?} and {:?} overlap",
                w[0].name,
                w[1].name
            );
        }
    }
    drop(snap);
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    expect_between(&db, 20_000, gone, "compacted without a snapshot");
    drop(db);
    let db = DB::open(&o, &dir.0).unwrap();
    expect_between(&db, 20_000, gone, "reopened");
}

#[test]
fn bad_ranges() {
    let dir = TempDir::new("range_del_5");
    let db = DB::open(&opts(), &dir.0).unwrap();
    fill(&db, 10);
    // Reversed: InvalidArgument, and the batch holding it is not applied.
    let mut b = WriteBatch::default();
    b.put(key(100), b"x");
    b.delete_range(key(5), key(2));
    assert!(matches!(db.write(b), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get(key(100)).unwrap(), None);
    assert!(matches!(
        db.delete_range(key(5), key(2)),
        Err(Error::InvalidArgument(_))
    ));
    // Empty: deletes nothing.
    db.delete_range(key(3), key(3)).unwrap();
    expect_between(&db, 10, |_| false, "empty range");
    // Oversized bounds: InvalidArgument.
    let huge = vec![b'k'; strata_kv::limits::KEY_SIZE_BYTES_MAX + 1];
    assert!(matches!(
        db.delete_range(&key(1)[..], &huge[..]),
        Err(Error::InvalidArgument(_))
    ));
}

/// Flips one byte of the range-deletion block of the only table file:
/// opening the table is `Corruption` naming the file, never a wrong answer.
#[test]
fn corrupted_range_deletion_block_is_corruption() {
    let dir = TempDir::new("range_del_6");
    {
        let db = DB::open(&opts(), &dir.0).unwrap();
        db.put(key(1), b"v").unwrap();
        db.delete_range(key(2), key(9)).unwrap();
        db.flush().unwrap();
    }
    let table = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let file = PosixFileSystem::new().open_random_access(&table).unwrap();
    let cmp: Arc<dyn strata_kv::Comparator> = Arc::new(strata_kv::BytewiseComparator);
    let layout = strata_kv::sst::describe_table(file, "t", cmp).unwrap();
    let part = layout
        .parts
        .iter()
        .find(|p| p.kind == "range_del")
        .unwrap_or_else(|| panic!("no range_del part in {layout:?}"));
    flip(&table, part.offset + 2);
    let db = DB::open(&opts(), &dir.0).unwrap();
    let err = db.get(key(1)).unwrap_err();
    match &err {
        Error::Corruption { file, .. } => {
            assert!(file.contains(".sst"), "{err}");
        }
        other => panic!("expected Corruption, got {other:?}"),
    }
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

/// A compaction drops a table wholly under a newer range deletion without
/// reading it: reads of that table fail here, and the compaction succeeds.
#[test]
fn a_covered_table_is_dropped_unread() {
    use strata_kv::env::{FaultInjectionFileSystem, FaultRule, FileOp, MemFileSystem};
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut o = opts();
    o.set_file_system(Arc::new(fs.clone()));
    // Tables opened when read, so that a read of the covered one opens it.
    o.set_max_open_files(16);
    let db = DB::open(&o, "/db").unwrap();
    fill(&db, 2000);
    db.flush().unwrap();
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    let covered = db.live_files().unwrap();
    assert_eq!(covered.len(), 1, "{covered:?}");
    db.delete_range(key(0), key(5000)).unwrap();
    db.put(key(7000), b"after").unwrap();
    db.flush().unwrap();
    fs.inject(FaultRule::new(&[FileOp::Read, FileOp::Open]).path_contains(&covered[0].name));
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    assert_eq!(
        db.property_value("strata.num-tables-dropped-unread")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    let live = db.live_files().unwrap();
    assert!(live.iter().all(|f| f.name != covered[0].name), "{live:?}");
    assert_eq!(keys(&db), vec![key(7000)]);
}
