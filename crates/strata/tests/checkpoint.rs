//! Checkpoints: an openable copy of a live database, taken while writes go
//! on, holding exactly a prefix of the writes.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use strata_kv::checkpoint::Checkpoint;
use strata_kv::env::{FaultInjectionFileSystem, FaultRule, FileOp, FileSystem, MemFileSystem};
use strata_kv::{DBRecoveryMode, Error, IteratorMode, Options, WriteOptions, DB};

mod common;

/// A fresh directory holding the source database and its checkpoints.
fn temp(name: &str) -> common::TempDir {
    let t = common::TempDir::new(&format!("ckpt-{name}"));
    std::fs::create_dir_all(&t.0).unwrap();
    t
}

fn options() -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(64 << 10);
    opts.set_target_file_size_base(64 << 10);
    opts.set_max_bytes_for_level_base(256 << 10);
    opts
}

fn contents(db: &DB) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iterator(IteratorMode::Start)
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

#[test]
fn checkpoint_opens_with_the_same_data_and_lives_on_its_own() {
    let tmp = temp("basic");
    let db = DB::open(&options(), tmp.0.join("db")).unwrap();
    for i in 0..20_000u32 {
        db.put(format!("key{i:06}"), format!("value{i}")).unwrap();
    }
    db.delete(b"key000007").unwrap();
    let unflushed = b"written just before the checkpoint";
    db.put(b"last", unflushed).unwrap();
    let want = contents(&db);
    Checkpoint::new(&db)
        .unwrap()
        .create_checkpoint(tmp.0.join("copy"))
        .unwrap();

    // The source goes on; the copy does not see it.
    db.put(b"after", b"x").unwrap();
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    let copy = DB::open(&options(), tmp.0.join("copy")).unwrap();
    assert_eq!(contents(&copy), want);
    assert_eq!(copy.get(b"last").unwrap().as_deref(), Some(&unflushed[..]));
    assert_eq!(copy.get(b"key000007").unwrap(), None);
    assert_eq!(copy.get(b"after").unwrap(), None);
    // And the copy takes writes of its own.
    copy.put(b"only in the copy", b"y").unwrap();
    assert_eq!(db.get(b"only in the copy").unwrap(), None);
    copy.verify_checksum().unwrap();
    drop(copy);
    let copy = DB::open(&options(), tmp.0.join("copy")).unwrap();
    assert_eq!(
        copy.get(b"only in the copy").unwrap().as_deref(),
        Some(&b"y"[..])
    );
}

#[cfg(unix)]
#[test]
fn tables_are_hard_links() {
    use std::os::unix::fs::MetadataExt;
    let tmp = temp("links");
    let db = DB::open(&options(), tmp.0.join("db")).unwrap();
    for i in 0..5000u32 {
        db.put(format!("k{i:05}"), [7u8; 100]).unwrap();
    }
    Checkpoint::new(&db)
        .unwrap()
        .create_checkpoint(tmp.0.join("copy"))
        .unwrap();
    let mut shared = 0;
    for entry in std::fs::read_dir(tmp.0.join("copy")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.ends_with(".sst") {
            let src = std::fs::metadata(tmp.0.join("db").join(&name)).unwrap();
            assert_eq!(entry.metadata().unwrap().ino(), src.ino(), "{name}");
            shared += 1;
        }
    }
    assert!(shared > 0, "no table files in the checkpoint");
}

#[test]
fn into_an_existing_directory_is_an_error() {
    let tmp = temp("exists");
    let db = DB::open(&options(), tmp.0.join("db")).unwrap();
    db.put(b"k", b"v").unwrap();
    let target = tmp.0.join("taken");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("precious"), b"mine").unwrap();
    let err = Checkpoint::new(&db)
        .unwrap()
        .create_checkpoint(&target)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(std::fs::read(target.join("precious")).unwrap(), b"mine");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 1);
}

/// A writer puts keys 0, 1, 2, ... one at a time (every fourth synced)
/// while checkpoints are taken. Each checkpoint must hold exactly keys 0..m
/// for some m at least the number acknowledged before it began, and open
/// under the strictest recovery mode (its logs end at whole records).
#[test]
fn checkpoint_under_writes_holds_a_prefix() {
    let tmp = temp("prefix");
    let mut strict = options();
    strict.set_wal_recovery_mode(DBRecoveryMode::AbsoluteConsistency);
    let db = Arc::new(DB::open(&strict, tmp.0.join("db")).unwrap());
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut sync = WriteOptions::default();
            sync.set_sync(true);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let wo = if i.is_multiple_of(4) {
                    sync.clone()
                } else {
                    WriteOptions::default()
                };
                db.put_opt(format!("{i:08}"), i.to_le_bytes(), &wo).unwrap();
                i += 1;
                acked.store(i, Ordering::Release);
            }
        })
    };
    for round in 0..5 {
        while acked.load(Ordering::Acquire) < 2000 * (round + 1) {
            std::thread::yield_now();
        }
        let before = acked.load(Ordering::Acquire);
        let path = tmp.0.join(format!("copy{round}"));
        Checkpoint::new(&db)
            .unwrap()
            .create_checkpoint(&path)
            .unwrap();
        let copy = DB::open(&strict, &path).unwrap();
        let got = contents(&copy);
        assert!(
            got.len() as u64 >= before,
            "round {round}: {} keys, {before} acknowledged before the checkpoint",
            got.len()
        );
        for (i, (k, v)) in got.iter().enumerate() {
            assert_eq!(
                k,
                format!("{i:08}").as_bytes(),
                "round {round}: not a prefix"
            );
            assert_eq!(v, &(i as u64).to_le_bytes());
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}

#[test]
fn checkpoint_of_a_read_only_handle() {
    let tmp = temp("readonly");
    {
        let db = DB::open(&options(), tmp.0.join("db")).unwrap();
        for i in 0..3000u32 {
            db.put(format!("k{i:05}"), b"v").unwrap();
        }
    }
    let ro = DB::open_for_read_only(&options(), tmp.0.join("db"), false).unwrap();
    Checkpoint::new(&ro)
        .unwrap()
        .create_checkpoint(tmp.0.join("copy"))
        .unwrap();
    let copy = DB::open(&options(), tmp.0.join("copy")).unwrap();
    assert_eq!(contents(&copy), contents(&ro));
}

/// A checkpoint that fails part way (its manifest's sync) while the source
/// has a snapshot and an iterator open: the error comes back, the partial
/// directory is gone, the source is whole and usable, and the next
/// checkpoint works.
#[test]
fn failed_checkpoint_leaves_nothing_and_the_source_whole() {
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let mut opts = options();
    opts.set_file_system(Arc::new(fs.clone()));
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}"), format!("v{i}")).unwrap();
    }
    let snapshot = db.snapshot();
    let mut it = db.raw_iterator();
    it.seek_to_first();
    db.put(b"k00000", b"newer").unwrap();
    let want = contents(&db);

    fs.inject(
        FaultRule::new(&[FileOp::Sync])
            .path_contains("/copy/MANIFEST")
            .times(1),
    );
    let err = Checkpoint::new(&db)
        .unwrap()
        .create_checkpoint("/copy")
        .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(
        !fs.exists(std::path::Path::new("/copy")),
        "partial checkpoint left behind"
    );

    // The source: the snapshot, the iterator and the data as before.
    assert_eq!(
        snapshot.get(b"k00000").unwrap().as_deref(),
        Some(&b"v0"[..])
    );
    assert_eq!(it.key(), Some(&b"k00000"[..]));
    assert_eq!(it.value(), Some(&b"v0"[..]));
    assert_eq!(contents(&db), want);
    db.put(b"after", b"x").unwrap();
    drop((it, snapshot));
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    db.verify_checksum().unwrap();

    Checkpoint::new(&db)
        .unwrap()
        .create_checkpoint("/copy")
        .unwrap();
    let copy = DB::open(&opts, "/copy").unwrap();
    assert_eq!(copy.get(b"after").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(copy.get(b"k02999").unwrap().as_deref(), Some(&b"v2999"[..]));
    drop(copy);
    drop(db);
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(db.get(b"k00000").unwrap().as_deref(), Some(&b"newer"[..]));
}
