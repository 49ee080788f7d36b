//! Bulk loading: `SstFileWriter` writes a file, `DB::ingest_external_file`
//! adds it. Ingested keys are newer than everything written before (and
//! older than everything after), snapshots taken before do not see them,
//! memtables holding their range are flushed first, and they survive a
//! reopen. Bad files and bad orders are clear errors.

use std::path::Path;
use std::sync::Arc;

use strata_kv::env::{FileSystem, MemFileSystem};
use strata_kv::{Error, IteratorMode, MergeOperands, Options, SstFileWriter, DB};

fn options(fs: &Arc<MemFileSystem>) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(fs.clone());
    opts.set_merge_operator_associative("append", append);
    opts
}

fn append(_key: &[u8], base: Option<&[u8]>, operands: &MergeOperands) -> Option<Vec<u8>> {
    let mut out = base.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands {
        out.extend_from_slice(op);
    }
    Some(out)
}

fn write_file(opts: &Options, path: &str, entries: &[(&str, Option<&str>)]) {
    let mut w = SstFileWriter::create(opts);
    w.open(path).unwrap();
    for (k, v) in entries {
        match v {
            Some(v) => w.put(k, v).unwrap(),
            None => w.delete(k).unwrap(),
        }
    }
    w.finish().unwrap();
    assert!(w.file_size() > 0);
}

fn get(db: &DB, k: &str) -> Option<String> {
    db.get(k).unwrap().map(|v| String::from_utf8(v).unwrap())
}

#[test]
fn ingested_keys_are_newer_than_what_came_before() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(&fs);
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = DB::open(&opts, "/db").unwrap();
    db.put("a", "old").unwrap();
    db.put("c", "old").unwrap();
    db.put("z", "kept").unwrap();
    db.flush().unwrap();
    db.put("b", "in memtable").unwrap(); // inside the file's range: flushed first
    let before = db.snapshot();
    write_file(
        &opts,
        "/in/1.sst",
        &[
            ("a", Some("new")),
            ("b", Some("new")),
            ("c", None),
            ("d", Some("new")),
        ],
    );
    // A second file over the first's keys: the later file wins.
    write_file(&opts, "/in/2.sst", &[("d", Some("newer"))]);
    db.ingest_external_file(vec!["/in/1.sst", "/in/2.sst"])
        .unwrap();
    assert_eq!(get(&db, "a").as_deref(), Some("new"));
    assert_eq!(get(&db, "b").as_deref(), Some("new"));
    assert_eq!(
        get(&db, "c"),
        None,
        "the file's deletion hides the old value"
    );
    assert_eq!(get(&db, "d").as_deref(), Some("newer"));
    assert_eq!(get(&db, "z").as_deref(), Some("kept"));
    // The snapshot taken before sees none of it.
    assert_eq!(before.get("a").unwrap(), Some(b"old".to_vec()));
    assert_eq!(before.get("b").unwrap(), Some(b"in memtable".to_vec()));
    assert_eq!(before.get("d").unwrap(), None);
    drop(before);
    // Writes after the ingestion are newer still.
    db.put("a", "after").unwrap();
    db.merge("d", "+").unwrap();
    let all: Vec<(String, String)> = db
        .iterator(IteratorMode::Start)
        .map(|r| {
            let (k, v) = r.unwrap();
            (
                String::from_utf8(k.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect();
    let want = [("a", "after"), ("b", "new"), ("d", "newer+"), ("z", "kept")];
    assert_eq!(
        all,
        want.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>()
    );
    // The source files are left as they were.
    assert!(fs.exists(Path::new("/in/1.sst")));
    drop(db);
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(get(&db, "a").as_deref(), Some("after"));
    assert_eq!(get(&db, "b").as_deref(), Some("new"));
    assert_eq!(get(&db, "c"), None);
    assert_eq!(get(&db, "d").as_deref(), Some("newer+"));
    db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
    assert_eq!(get(&db, "d").as_deref(), Some("newer+"));
    assert_eq!(get(&db, "c"), None);
}

#[test]
fn bad_orders_and_bad_files_are_clear_errors() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(&fs);
    fs.create_dir_all(Path::new("/in")).unwrap();
    let mut w = SstFileWriter::create(&opts);
    assert!(
        matches!(w.put("a", "1"), Err(Error::InvalidArgument(_))),
        "not open"
    );
    w.open("/in/x.sst").unwrap();
    w.put("b", "1").unwrap();
    let e = w.put("a", "1").unwrap_err();
    assert!(e.to_string().contains("increasing order"), "{e}");
    assert!(w.put("b", "again").is_err(), "a key twice");
    w.finish().unwrap();
    let mut empty = SstFileWriter::create(&opts);
    empty.open("/in/empty.sst").unwrap();
    assert!(matches!(empty.finish(), Err(Error::InvalidArgument(_))));

    let db = DB::open(&opts, "/db").unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    // A table of the database itself: its entries carry sequence numbers.
    let table = db.live_files().unwrap().pop().unwrap().name;
    let e = db
        .ingest_external_file(vec![format!("/db{table}")])
        .unwrap_err();
    assert!(e.to_string().contains("sequence numbers"), "{e}");
    // Not a table at all.
    fs.create(Path::new("/in/junk.sst"))
        .unwrap()
        .append(b"not a table")
        .unwrap();
    assert!(db.ingest_external_file(vec!["/in/junk.sst"]).is_err());
    // A file ordered by another comparator.
    let mut reverse = opts.clone();
    reverse.set_comparator(
        "leveldb.ReverseBytewiseComparator",
        Box::new(|a: &[u8], b: &[u8]| b.cmp(a)),
    );
    write_file(
        &reverse,
        "/in/rev.sst",
        &[("b", Some("1")), ("a", Some("2"))],
    );
    let e = db.ingest_external_file(vec!["/in/rev.sst"]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(get(&db, "k").as_deref(), Some("v"), "nothing was lost");
    // The good file still goes in.
    db.ingest_external_file(vec!["/in/x.sst"]).unwrap();
    assert_eq!(get(&db, "b").as_deref(), Some("1"));
}

/// A file whose range nothing holds, with no snapshot open, is copied as it
/// is to the last level; a snapshot (which must not see it) makes it a
/// rewrite into level 0 instead.
#[test]
fn a_file_nothing_overlaps_is_copied_to_the_last_level() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(&fs);
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = DB::open(&opts, "/db").unwrap();
    db.put("m", "existing").unwrap();
    write_file(&opts, "/in/low.sst", &[("a", Some("1")), ("b", Some("2"))]);
    db.ingest_external_file(vec!["/in/low.sst"]).unwrap();
    let levels: Vec<(i32, u64)> = db
        .live_files()
        .unwrap()
        .iter()
        .map(|f| (f.level, f.largest_seqno))
        .collect();
    assert_eq!(levels, vec![(6, 0)], "copied as it is, to the last level");
    db.put("a", "later").unwrap();
    assert_eq!(get(&db, "a").as_deref(), Some("later"));
    assert_eq!(get(&db, "b").as_deref(), Some("2"));
    let snap = db.snapshot();
    write_file(&opts, "/in/high.sst", &[("x", Some("1"))]);
    db.ingest_external_file(vec!["/in/high.sst"]).unwrap();
    assert_eq!(snap.get("x").unwrap(), None);
    assert_eq!(get(&db, "x").as_deref(), Some("1"));
    let l0 = db
        .live_files()
        .unwrap()
        .iter()
        .filter(|f| f.level == 0)
        .count();
    assert_eq!(l0, 1, "rewritten into level 0 under a snapshot");
    drop(snap);
    drop(db);
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(get(&db, "b").as_deref(), Some("2"));
    assert_eq!(get(&db, "x").as_deref(), Some("1"));
    assert_eq!(get(&db, "m").as_deref(), Some("existing"));
}

/// Two faults at once: the manifest write of an ingestion fails while an
/// iterator holds the old version. The ingestion fails alone, reads go on,
/// nothing live is deleted, and a reopen has every acknowledged write (and
/// the ingested keys or none of them).
#[test]
fn a_failed_manifest_write_during_ingestion_loses_nothing() {
    use strata_kv::env::{FaultInjectionFileSystem, FaultRule, FileOp};
    let mem = Arc::new(MemFileSystem::new());
    let fs = FaultInjectionFileSystem::new(mem.clone());
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), "v").unwrap();
    }
    db.flush().unwrap();
    let mut held = db.raw_iterator();
    held.seek_to_first();
    // Overlapping keys, under a snapshot: the rewrite path takes a sequence number.
    let snap = db.snapshot();
    write_file(
        &opts,
        "/in/f.sst",
        &[("k005", Some("new")), ("k500", Some("new"))],
    );
    fs.inject(
        FaultRule::new(&[FileOp::Append])
            .path_contains("MANIFEST")
            .times(1),
    );
    let e = db.ingest_external_file(vec!["/in/f.sst"]).unwrap_err();
    assert!(e.to_string().contains("injected"), "{e}");
    // Reads go on, the held iterator included.
    assert_eq!(get(&db, "k005").as_deref(), Some("v"));
    assert_eq!(snap.get("k050").unwrap(), Some(b"v".to_vec()));
    let mut n = 0;
    while held.valid() {
        n += 1;
        held.next();
    }
    assert_eq!(n, 100);
    drop(held);
    drop(snap);
    drop(db);
    fs.clear_faults();
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..100 {
        let want = if i == 5 { None } else { Some("v") };
        let got = get(&db, &format!("k{i:03}"));
        if i == 5 {
            assert!(matches!(got.as_deref(), Some("v") | Some("new")), "{got:?}");
        } else {
            assert_eq!(got.as_deref(), want, "k{i:03}");
        }
    }
    db.put("after", "x").unwrap();
    db.flush().unwrap();
}

#[test]
fn ingestion_options_move_and_refuse() {
    use strata_kv::IngestExternalFileOptions;
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(&fs);
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = DB::open(&opts, "/db").unwrap();
    // Moved: the original name is gone, the keys are in.
    write_file(&opts, "/in/a.sst", &[("a", Some("1")), ("b", Some("2"))]);
    let mut moving = IngestExternalFileOptions::default();
    moving.set_move_files(true);
    db.ingest_external_file_opts(&moving, vec!["/in/a.sst"])
        .unwrap();
    assert!(!fs.exists(Path::new("/in/a.sst")));
    assert_eq!(get(&db, "b").as_deref(), Some("2"));
    // Overlapping a table: refused without a sequence number of its own.
    write_file(&opts, "/in/b.sst", &[("b", Some("new"))]);
    let mut strict = IngestExternalFileOptions::default();
    strict.set_allow_global_seqno(false);
    let err = db
        .ingest_external_file_opts(&strict, vec!["/in/b.sst"])
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(get(&db, "b").as_deref(), Some("2"));
    assert!(fs.exists(Path::new("/in/b.sst")), "a refused file stays");
    // Overlapping the memtable: refused without a flush.
    db.put("q", "mem").unwrap();
    write_file(&opts, "/in/c.sst", &[("p", Some("x")), ("r", Some("y"))]);
    let mut no_flush = IngestExternalFileOptions::default();
    no_flush.set_allow_blocking_flush(false);
    let err = db
        .ingest_external_file_opts(&no_flush, vec!["/in/c.sst"])
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(get(&db, "p"), None);
    // With the defaults both go in, and survive a reopen.
    db.ingest_external_file(vec!["/in/b.sst", "/in/c.sst"])
        .unwrap();
    drop(db);
    let db = DB::open(&opts, "/db").unwrap();
    for (k, v) in [
        ("a", "1"),
        ("b", "new"),
        ("p", "x"),
        ("q", "mem"),
        ("r", "y"),
    ] {
        assert_eq!(get(&db, k).as_deref(), Some(v), "{k}");
    }
}

/// A range deletion in the memtable over a file's range: the file's keys
/// are newer than it and stay visible.
#[test]
fn ingested_keys_are_newer_than_a_range_deletion_in_the_memtable() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(&fs);
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = DB::open(&opts, "/db").unwrap();
    db.put("m", "old").unwrap();
    db.flush().unwrap();
    db.delete_range("a", "z").unwrap();
    assert_eq!(get(&db, "m"), None);
    write_file(
        &opts,
        "/in/1.sst",
        &[("b", Some("in")), ("m", Some("back"))],
    );
    db.ingest_external_file(vec!["/in/1.sst"]).unwrap();
    assert_eq!(get(&db, "b").as_deref(), Some("in"));
    assert_eq!(get(&db, "m").as_deref(), Some("back"));
    // No table holds a key of the next file's range; only the memtable's
    // range deletion covers it.
    db.delete_range("5", "8").unwrap();
    write_file(&opts, "/in/2.sst", &[("6", Some("six"))]);
    db.ingest_external_file(vec!["/in/2.sst"]).unwrap();
    assert_eq!(get(&db, "6").as_deref(), Some("six"));
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    assert_eq!(get(&db, "6").as_deref(), Some("six"));
    drop(db);
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(get(&db, "b").as_deref(), Some("in"));
    assert_eq!(get(&db, "m").as_deref(), Some("back"));
}
