//! I/O errors during flush, compaction, log writes and manifest writes, on
//! the fault-injecting file system: the error is reported to the caller,
//! later writes fail with the same error, reads keep working, and after a
//! reopen on a healthy file system nothing acknowledged is lost. Read
//! errors are reported and never returned as data, and do not stop writes.
//! `DB::resume` clears a flush, compaction or manifest failure without a
//! reopen, but not a failure of the log.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_kv::env::{FaultInjectionFileSystem, FaultRule, FileOp, MemFileSystem};
use strata_kv::{Error, IteratorMode, Options, WriteOptions, DB};

const DB_DIR: &str = "/db";

fn setup() -> (FaultInjectionFileSystem, Options) {
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    opts.set_write_buffer_size(64 << 10);
    opts.set_target_file_size_base(16 << 10);
    opts.set_disable_auto_compactions(true);
    (fs, opts)
}

/// Acknowledged contents, as the test wrote them.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn put_range(db: &DB, model: &mut Model, tag: &str, range: std::ops::Range<u32>) {
    for i in range {
        let (k, v) = (format!("k{i:05}"), format!("{tag}-{i}"));
        db.put(&k, &v).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
}

fn assert_injected(e: &Error, what: &str) {
    assert!(
        e.to_string().contains("injected"),
        "{what}: expected the injected error, got {e}"
    );
}

/// Every acknowledged key reads back, by get and by scan.
fn assert_contents(db: &DB, model: &Model, what: &str) {
    for (k, v) in model {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get {}: {e}", String::from_utf8_lossy(k)));
        assert_eq!(
            got.as_ref(),
            Some(v),
            "{what}: {}",
            String::from_utf8_lossy(k)
        );
    }
    let scanned: Model = db
        .iterator(IteratorMode::Start)
        .map(|r| {
            let (k, v) = r.unwrap_or_else(|e| panic!("{what}: scan: {e}"));
            (k.to_vec(), v.to_vec())
        })
        .filter(|(k, _)| model.contains_key(k))
        .collect();
    assert_eq!(scanned.len(), model.len(), "{what}: scan misses keys");
}

/// After `e` was reported: writes fail with it, reads work, and a reopen
/// on the healthy file system has everything acknowledged.
fn check_after_error(
    fs: &FaultInjectionFileSystem,
    opts: &Options,
    db: DB,
    model: &Model,
    e: Error,
    what: &str,
) {
    assert_injected(&e, what);
    let later = db
        .put(b"after-error", b"x")
        .expect_err(&format!("{what}: a write after {e}"));
    assert_eq!(
        later.to_string(),
        e.to_string(),
        "{what}: later writes fail with it"
    );
    let flush = db.flush().unwrap_err();
    assert_eq!(
        flush.to_string(),
        e.to_string(),
        "{what}: flush fails with it"
    );
    assert_contents(&db, model, &format!("{what}, before reopen"));
    drop(db);
    fs.clear_faults();
    let db = DB::open(opts, DB_DIR).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    assert_contents(&db, model, &format!("{what}, after reopen"));
    assert_eq!(db.get(b"after-error").unwrap(), None, "{what}");
    // And the reopened database works.
    db.put(b"after-reopen", b"y").unwrap();
    db.flush().unwrap();
}

#[test]
fn flush_errors() {
    let cases: [(&[FileOp], &str); 4] = [
        (&[FileOp::Create], ".sst"),
        (&[FileOp::Append], ".sst"),
        (&[FileOp::Sync], ".sst"),
        (&[FileOp::SyncDir], ""),
    ];
    for (ops, path) in cases {
        let what = format!("flush, {ops:?} on {path:?}");
        let (fs, opts) = setup();
        let db = DB::open(&opts, DB_DIR).unwrap();
        let mut model = Model::new();
        put_range(&db, &mut model, "a", 0..500);
        fs.inject(FaultRule::new(ops).path_contains(path).times(1));
        let e = db.flush().unwrap_err();
        check_after_error(&fs, &opts, db, &model, e, &what);
    }
}

#[test]
fn compaction_errors() {
    let cases: [(&[FileOp], &str, bool); 5] = [
        (&[FileOp::Create], ".sst", false),
        (&[FileOp::Append], ".sst", false),
        (&[FileOp::Sync], ".sst", false),
        (&[FileOp::Sync], ".sst", true),
        (&[FileOp::Sync], "MANIFEST", true),
    ];
    for (ops, path, automatic) in cases {
        let what = format!("compaction (automatic: {automatic}), {ops:?} on {path:?}");
        let (fs, mut opts) = setup();
        opts.set_level_zero_file_num_compaction_trigger(4);
        let db = DB::open(&opts, DB_DIR).unwrap();
        let mut model = Model::new();
        // Data below every round, so that no level-0 file can go down by a
        // trivial move and the compaction writes tables.
        put_range(&db, &mut model, "base", 0..700);
        db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
        for round in 0..3 {
            put_range(
                &db,
                &mut model,
                &format!("r{round}"),
                round * 100..round * 100 + 400,
            );
            db.flush().unwrap();
        }
        let rule = FaultRule::new(ops).path_contains(path).times(1);
        if automatic {
            drop(db);
            opts.set_disable_auto_compactions(false);
            let db = DB::open(&opts, DB_DIR).unwrap();
            // The fourth L0 file triggers a compaction, which fails.
            put_range(&db, &mut model, "r3", 300..700);
            // The flush syncs one table and the manifest once; the
            // compaction's syncs come next.
            fs.inject(rule.after(1));
            let e = db.flush().and_then(|()| db.wait_for_compact()).unwrap_err();
            check_after_error(&fs, &opts, db, &model, e, &what);
        } else {
            fs.inject(rule);
            let e = db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap_err();
            check_after_error(&fs, &opts, db, &model, e, &what);
        }
    }
}

#[test]
fn log_write_errors() {
    for (op, sync) in [
        (FileOp::Append, false),
        (FileOp::Append, true),
        (FileOp::Sync, true),
    ] {
        let what = format!("log {op:?}, sync = {sync}");
        let (fs, opts) = setup();
        let db = DB::open(&opts, DB_DIR).unwrap();
        let mut model = Model::new();
        put_range(&db, &mut model, "a", 0..300);
        fs.inject(FaultRule::new(&[op]).path_contains(".log").times(1));
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        let e = db.put_opt(b"failed-write", b"?", &wo).unwrap_err();
        // The failed write may or may not be there after a reopen; leave it
        // out of the model and out of the checks.
        let model_check = model.clone();
        assert_injected(&e, &what);
        let later = db.put(b"after-error", b"x").unwrap_err();
        assert_eq!(later.to_string(), e.to_string(), "{what}");
        assert_contents(&db, &model_check, &what);
        drop(db);
        fs.clear_faults();
        let db = DB::open(&opts, DB_DIR).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        assert_contents(&db, &model, &format!("{what}, after reopen"));
        assert_eq!(db.get(b"after-error").unwrap(), None);
    }
}

#[test]
fn manifest_write_errors() {
    for op in [FileOp::Append, FileOp::Sync] {
        let what = format!("manifest {op:?}");
        let (fs, opts) = setup();
        let db = DB::open(&opts, DB_DIR).unwrap();
        let mut model = Model::new();
        put_range(&db, &mut model, "a", 0..500);
        fs.inject(FaultRule::new(&[op]).path_contains("MANIFEST").times(1));
        let e = db.flush().unwrap_err();
        check_after_error(&fs, &opts, db, &model, e, &what);
    }
}

/// `DB::resume` after a failed flush (table write, table sync, manifest
/// write): the held-up memtable is flushed, writes work again, the files on
/// disk are exactly the live ones, and a reopen finds everything.
#[test]
fn resume_clears_a_flush_or_manifest_failure() {
    let cases: [(&[FileOp], &str); 4] = [
        (&[FileOp::Create], ".sst"),
        (&[FileOp::Append], ".sst"),
        (&[FileOp::Sync], ".sst"),
        (&[FileOp::Append], "MANIFEST"),
    ];
    for (ops, path) in cases {
        let what = format!("resume after {ops:?} on {path:?}");
        let (fs, opts) = setup();
        let db = DB::open(&opts, DB_DIR).unwrap();
        let mut model = Model::new();
        put_range(&db, &mut model, "a", 0..500);
        fs.inject(FaultRule::new(ops).path_contains(path).times(1));
        let e = db.flush().unwrap_err();
        assert_injected(&e, &what);
        assert!(db.put(b"while-stopped", b"x").is_err(), "{what}");
        db.resume()
            .unwrap_or_else(|e| panic!("{what}: resume: {e}"));
        db.resume().unwrap(); // nothing left to clear
        put_range(&db, &mut model, "b", 500..700);
        db.flush().unwrap();
        assert_contents(&db, &model, &what);
        common::assert_files_are_live(&fs, DB_DIR, &db, &what);
        drop(db);
        let db = DB::open(&opts, DB_DIR).unwrap();
        assert_contents(&db, &model, &format!("{what}, after reopen"));
    }
}

/// A failed log write is not resumed: the log's end is unknown, so resume
/// returns the error and writes keep failing until a reopen.
#[test]
fn resume_leaves_a_log_failure_to_a_reopen() {
    let (fs, opts) = setup();
    let db = DB::open(&opts, DB_DIR).unwrap();
    let mut model = Model::new();
    put_range(&db, &mut model, "a", 0..100);
    fs.inject(
        FaultRule::new(&[FileOp::Append])
            .path_contains(".log")
            .times(1),
    );
    let e = db.put(b"failed", b"?").unwrap_err();
    assert_injected(&e, "log append");
    let r = db.resume().unwrap_err();
    assert_eq!(r.to_string(), e.to_string());
    assert!(db.put(b"after", b"x").is_err());
    drop(db);
    let db = DB::open(&opts, DB_DIR).unwrap();
    assert_contents(&db, &model, "after reopen");
}

/// The manifest switch at open (new manifest, CURRENT through a temporary
/// file and a rename, directory sync): a failure fails the open, and the
/// next open on a healthy file system recovers everything.
#[test]
fn manifest_switch_errors_at_open() {
    let cases: [(&[FileOp], &str); 5] = [
        (&[FileOp::Create], "MANIFEST"),
        (&[FileOp::Sync], "MANIFEST"),
        (&[FileOp::Create, FileOp::Append, FileOp::Sync], "dbtmp"),
        (&[FileOp::Rename], "CURRENT"),
        (&[FileOp::SyncDir], ""),
    ];
    for (ops, path) in cases {
        let what = format!("open, {ops:?} on {path:?}");
        let (fs, opts) = setup();
        let mut model = Model::new();
        {
            let db = DB::open(&opts, DB_DIR).unwrap();
            put_range(&db, &mut model, "a", 0..300);
            db.flush().unwrap();
            put_range(&db, &mut model, "b", 200..400);
        }
        fs.inject(FaultRule::new(ops).path_contains(path).times(1));
        let e = DB::open(&opts, DB_DIR).unwrap_err();
        assert_injected(&e, &what);
        fs.clear_faults();
        let db = DB::open(&opts, DB_DIR).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
        assert_contents(&db, &model, &what);
    }
}

#[test]
fn read_errors_are_reported_not_returned_as_data() {
    let (fs, mut opts) = setup();
    let mut table = strata_kv::BlockBasedOptions::default();
    table.disable_cache();
    opts.set_block_based_table_factory(&table);
    let db = DB::open(&opts, DB_DIR).unwrap();
    let mut model = Model::new();
    put_range(&db, &mut model, "a", 0..500);
    db.flush().unwrap();
    fs.inject(FaultRule::new(&[FileOp::Read]).path_contains(".sst"));
    for k in model.keys().take(20) {
        let e = db.get(k).unwrap_err();
        assert_injected(&e, "get");
    }
    let mut it = db.iterator(IteratorMode::Start);
    let first = it.next().expect("the scan reports the error");
    assert_injected(&first.unwrap_err(), "scan");
    // Reads do not stop writes.
    put_range(&db, &mut model, "b", 1000..1010);
    fs.clear_faults();
    assert_contents(&db, &model, "after read errors");
    assert!(fs.stats().injected(FileOp::Read) >= 21);
}

/// A manifest sync fails while an iterator holds an old version. The
/// failed edit may be on disk, so releasing the iterator must not delete
/// the table it adds (or any other): the reopen finds every table the
/// manifest names and every acknowledged write.
#[test]
fn failed_manifest_write_then_reader_release_deletes_nothing() {
    for op in [FileOp::Append, FileOp::Sync] {
        for compaction in [false, true] {
            let what = format!("manifest {op:?}, compaction {compaction}");
            let (fs, opts) = setup();
            let db = DB::open(&opts, DB_DIR).unwrap();
            let mut model = Model::new();
            put_range(&db, &mut model, "a", 0..100);
            db.flush().unwrap();
            let mut it = db.raw_iterator();
            let snapshot = db.snapshot();
            put_range(&db, &mut model, "b", 100..200);
            db.flush().unwrap();
            put_range(&db, &mut model, "c", 200..300);
            fs.inject(FaultRule::new(&[op]).path_contains("MANIFEST").times(1));
            let e = if compaction {
                db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap_err()
            } else {
                db.flush().unwrap_err()
            };
            assert_injected(&e, &what);
            let tables_before = common::files_ending(fs.inner().as_ref(), DB_DIR, ".sst");
            it.seek_to_first();
            assert_eq!(it.key(), Some(&b"k00000"[..]), "{what}");
            drop(it);
            drop(snapshot);
            assert_eq!(
                common::files_ending(fs.inner().as_ref(), DB_DIR, ".sst"),
                tables_before,
                "{what}: a table was deleted after the manifest write failed"
            );
            drop(db);
            fs.clear_faults();
            let db = DB::open(&opts, DB_DIR).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            assert_contents(&db, &model, &format!("{what}, after reopen"));
            // The reopen sorts out what the failed edit left behind.
            common::assert_files_are_live(fs.inner().as_ref(), DB_DIR, &db, &what);
        }
    }
}

/// Waits (up to 10 s) until `f` succeeds; the errors it meets meanwhile
/// must be those of a full disk.
fn eventually(what: &str, mut f: impl FnMut() -> Result<(), Error>) {
    let start = std::time::Instant::now();
    while let Err(e) = f() {
        assert!(e.is_no_space(), "{what}: {e}");
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "{what}: never recovered"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// A full disk during a flush, a compaction or a manifest write stops
/// writes with an error that says so (`is_no_space`), loses nothing, and
/// clears itself once space returns: the database retries the work it
/// failed (RocksDB's automatic recovery), without `resume`.
#[test]
fn a_full_disk_stops_writes_and_recovers_by_itself_when_space_returns() {
    let cases: [(&[FileOp], &str, bool); 4] = [
        (&[FileOp::Append], ".sst", false),
        (&[FileOp::Create], ".sst", false),
        (&[FileOp::Append], "MANIFEST", false),
        (&[FileOp::Append], ".sst", true),
    ];
    for (ops, path, in_compaction) in cases {
        let what = format!("ENOSPC on {ops:?} of {path:?}, compaction {in_compaction}");
        let (fs, mut opts) = setup();
        opts.set_bgerror_resume_retry_interval(20_000);
        let db = DB::open(&opts, DB_DIR).unwrap();
        let mut model = Model::new();
        put_range(&db, &mut model, "a", 0..500);
        db.flush().unwrap();
        put_range(&db, &mut model, "b", 250..750);
        if in_compaction {
            db.flush().unwrap();
        }
        // The disk is full for the next few writes of the kind.
        fs.inject(FaultRule::new(ops).path_contains(path).times(3).no_space());
        let e = if in_compaction {
            db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap_err()
        } else {
            db.flush().unwrap_err()
        };
        assert!(e.is_no_space(), "{what}: {e}");
        assert!(e.to_string().contains("No space left"), "{what}: {e}");
        // Writes stop with it, then go on by themselves once the disk has
        // room (after three failed writes here); until then, a flush or a
        // compaction may meet the full disk again.
        eventually(&what, || db.put(b"probe", b"x"));
        model.insert(b"probe".to_vec(), b"x".to_vec());
        eventually(&what, || db.flush());
        eventually(&what, || db.compact_range(None::<&[u8]>, None::<&[u8]>));
        assert_eq!(fs.stats().total_injected(), 3, "{what}");
        assert_contents(&db, &model, &what);
        common::assert_files_are_live(&fs, DB_DIR, &db, &what);
        drop(db);
        let db = DB::open(&opts, DB_DIR).unwrap();
        assert_contents(&db, &model, &format!("{what}, after reopen"));
    }
}

/// With `set_max_bgerror_resume_count(0)` a full disk stays an error
/// until `resume`; other I/O errors are never cleared by themselves.
#[test]
fn without_automatic_recovery_a_full_disk_waits_for_resume() {
    for (no_space, max) in [(true, 0), (false, i32::MAX)] {
        let what = format!("no_space {no_space}, max {max}");
        let (fs, mut opts) = setup();
        opts.set_bgerror_resume_retry_interval(10_000);
        opts.set_max_bgerror_resume_count(max);
        let db = DB::open(&opts, DB_DIR).unwrap();
        let mut model = Model::new();
        put_range(&db, &mut model, "a", 0..300);
        let mut rule = FaultRule::new(&[FileOp::Append])
            .path_contains(".sst")
            .times(1);
        if no_space {
            rule = rule.no_space();
        }
        fs.inject(rule);
        let e = db.flush().unwrap_err();
        assert_eq!(e.is_no_space(), no_space, "{what}: {e}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(db.put(b"k", b"v").is_err(), "{what}: cleared by itself");
        db.resume().unwrap();
        db.put(b"k", b"v").unwrap();
        model.insert(b"k".to_vec(), b"v".to_vec());
        assert_contents(&db, &model, &what);
    }
}

/// A full disk under the log fails the write that met it, with the error
/// that says so; as any log failure, only a reopen clears it, and nothing
/// acknowledged is lost.
#[test]
fn a_full_disk_under_the_log_fails_the_write_and_a_reopen_recovers() {
    let (fs, mut opts) = setup();
    opts.set_bgerror_resume_retry_interval(10_000);
    let db = DB::open(&opts, DB_DIR).unwrap();
    let mut model = Model::new();
    put_range(&db, &mut model, "a", 0..200);
    fs.inject(
        FaultRule::new(&[FileOp::Append])
            .path_contains(".log")
            .times(1)
            .no_space(),
    );
    let e = db.put(b"lost", b"x").unwrap_err();
    assert!(e.is_no_space(), "{e}");
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(db.put(b"k", b"v").is_err(), "a log failure cleared itself");
    drop(db);
    let db = DB::open(&opts, DB_DIR).unwrap();
    assert_contents(&db, &model, "after the reopen");
    db.put(b"k", b"v").unwrap();
}

/// A memtable switch leaves the directory unsynced until the next synced
/// write. That write's directory sync failing, while a snapshot and an
/// iterator hold the old state: the write fails alone, later writes fail
/// with the same error, the readers read on, no file is lost, and a reopen
/// has everything acknowledged.
#[test]
fn a_failed_directory_sync_under_a_synced_write() {
    let what = "directory sync under a synced write";
    let (fs, opts) = setup();
    let db = DB::open(&opts, DB_DIR).unwrap();
    let mut model = Model::new();
    put_range(&db, &mut model, "a", 0..300);
    // Switches the memtable (a new log, the directory not synced) and
    // waits for the flush, so that no table's creation meets the fault.
    db.flush().unwrap();
    put_range(&db, &mut model, "b", 300..400);
    let snapshot = db.snapshot();
    let mut it = db.iterator(IteratorMode::Start);
    fs.inject(FaultRule::new(&[FileOp::SyncDir]).times(1));
    let mut wo = WriteOptions::default();
    wo.set_sync(true);
    let e = db.put_opt(b"failed-write", b"?", &wo).unwrap_err();
    let first = it.next().expect("a key").unwrap();
    assert_eq!(&*first.0, b"k00000", "{what}: the iterator reads on");
    let seen: Model = snapshot
        .iterator(IteratorMode::Start)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(seen, model, "{what}: the snapshot reads on");
    drop(it);
    drop(snapshot);
    check_after_error(&fs, &opts, db, &model, e, what);
}
