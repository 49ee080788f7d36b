//! Backups: create while writing, list, verify, restore any, purge; shared
//! tables between backups; a corrupted backup file is reported by verify
//! and by restore, and the other backups still restore.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::TempDir;
use strata_kv::backup::{BackupEngine, BackupEngineOptions, RestoreOptions};
use strata_kv::{Env, Error, IteratorMode, Options, DB};

fn opts() -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_write_buffer_size(64 << 10);
    o
}

fn contents(db: &DB) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iterator(IteratorMode::Start)
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

fn engine(dir: &Path) -> BackupEngine {
    BackupEngine::open(
        &BackupEngineOptions::new(dir).unwrap(),
        &Env::new().unwrap(),
    )
    .unwrap()
}

fn restore(engine: &mut BackupEngine, id: u32, to: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    engine
        .restore_from_backup(to, to, &RestoreOptions::default(), id)
        .unwrap();
    let db = DB::open(&opts(), to).unwrap();
    contents(&db)
}

#[test]
fn backups_restore_what_was_there_and_share_tables() {
    let dir = TempDir::new("backup_restore");
    let db = DB::open(&opts(), dir.0.join("db")).unwrap();
    let mut engine = engine(&dir.0.join("backups"));
    let mut states = Vec::new();
    for round in 0..4u32 {
        for i in 0..3000u32 {
            db.put(
                format!("k{:05}", (i * 7 + round) % 5000),
                format!("r{round}i{i}"),
            )
            .unwrap();
        }
        db.delete_range(
            format!("k{:05}", round * 100),
            format!("k{:05}", round * 100 + 50),
        )
        .unwrap();
        // The last round is backed up without a flush: its writes are in
        // the backup's logs.
        engine.create_new_backup_flush(&db, round != 3).unwrap();
        states.push(contents(&db));
    }
    let info = engine.get_backup_info();
    assert_eq!(
        info.iter().map(|i| i.backup_id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert!(info.iter().all(|i| i.num_files > 0 && i.size > 0));
    // Tables are shared: fewer shared files than the backups' tables.
    let shared = std::fs::read_dir(dir.0.join("backups/shared"))
        .unwrap()
        .count();
    let listed: u32 = info.iter().map(|i| i.num_files).sum();
    assert!(
        (shared as u32) < listed,
        "{shared} shared files, {listed} listed"
    );
    for id in 1..=4u32 {
        engine.verify_backup(id).unwrap();
        let to = dir.0.join(format!("restored{id}"));
        assert_eq!(
            restore(&mut engine, id, &to),
            states[id as usize - 1],
            "backup {id}"
        );
    }
    // The latest, into a directory holding another database.
    engine
        .restore_from_latest_backup(
            dir.0.join("restored1"),
            dir.0.join("restored1"),
            &RestoreOptions::default(),
        )
        .unwrap();
    let restored = DB::open(&opts(), dir.0.join("restored1")).unwrap();
    assert_eq!(contents(&restored), states[3]);
    drop(restored);
    // Purging keeps the newest two; their tables stay, the rest go.
    engine.purge_old_backups(2).unwrap();
    assert_eq!(
        engine
            .get_backup_info()
            .iter()
            .map(|i| i.backup_id)
            .collect::<Vec<_>>(),
        vec![3, 4]
    );
    assert!(matches!(engine.verify_backup(1), Err(Error::NotFound(_))));
    for id in [3u32, 4] {
        engine.verify_backup(id).unwrap();
        let to = dir.0.join(format!("again{id}"));
        assert_eq!(restore(&mut engine, id, &to), states[id as usize - 1]);
    }
    // A new engine on the directory numbers on from there.
    drop(engine);
    let mut engine = self::engine(&dir.0.join("backups"));
    engine.create_new_backup(&db).unwrap();
    assert_eq!(engine.get_backup_info().last().unwrap().backup_id, 5);
}

#[test]
fn a_corrupted_backup_is_reported_and_the_others_restore() {
    let dir = TempDir::new("backup_corrupt");
    let db = DB::open(&opts(), dir.0.join("db")).unwrap();
    let mut engine = engine(&dir.0.join("backups"));
    for i in 0..2000u32 {
        db.put(format!("a{i:05}"), vec![b'x'; 50]).unwrap();
    }
    engine.create_new_backup(&db).unwrap();
    let first = contents(&db);
    // The second backup's own table: written after the first backup.
    for i in 0..2000u32 {
        db.put(format!("b{i:05}"), vec![b'y'; 50]).unwrap();
    }
    engine.create_new_backup(&db).unwrap();
    let shared_of = |id: u32| -> Vec<String> {
        let text = std::fs::read_to_string(dir.0.join(format!("backups/meta/{id}"))).unwrap();
        text.lines()
            .filter_map(|l| l.strip_prefix("file shared/"))
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    };
    let only_second: Vec<String> = shared_of(2)
        .into_iter()
        .filter(|f| !shared_of(1).contains(f))
        .collect();
    assert!(!only_second.is_empty());
    let victim = dir.0.join("backups/shared").join(&only_second[0]);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[10] ^= 0x20;
    std::fs::write(&victim, bytes).unwrap();
    match engine.verify_backup(2) {
        Err(Error::Corruption { file, .. }) => assert!(file.contains(&only_second[0]), "{file}"),
        other => panic!("expected Corruption, got {other:?}"),
    }
    engine.verify_backup(1).unwrap();
    let to = dir.0.join("restored");
    let err = engine
        .restore_from_backup(&to, &to, &RestoreOptions::default(), 2)
        .unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    // Nothing openable was left behind.
    assert!(DB::open(&Options::default(), &to).is_err());
    assert_eq!(restore(&mut engine, 1, &to), first);
}

#[test]
fn bad_restores_are_refused() {
    let dir = TempDir::new("backup_bad");
    let db = DB::open(&opts(), dir.0.join("db")).unwrap();
    db.put(b"k", b"v").unwrap();
    let mut engine = engine(&dir.0.join("backups"));
    assert!(matches!(
        engine.restore_from_latest_backup(
            dir.0.join("x"),
            dir.0.join("x"),
            &RestoreOptions::default()
        ),
        Err(Error::NotFound(_))
    ));
    engine.create_new_backup(&db).unwrap();
    // Another log directory.
    assert!(matches!(
        engine.restore_from_backup(
            dir.0.join("x"),
            dir.0.join("y"),
            &RestoreOptions::default(),
            1
        ),
        Err(Error::InvalidArgument(_))
    ));
    // Into the directory of an open database: refused, the database intact.
    let err = engine
        .restore_from_backup(
            dir.0.join("db"),
            dir.0.join("db"),
            &RestoreOptions::default(),
            1,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err}");
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    // An unknown backup.
    assert!(matches!(engine.verify_backup(9), Err(Error::NotFound(_))));
}

#[test]
fn backups_hold_copies_and_restore_over_a_crashed_restore() {
    use std::os::unix::fs::MetadataExt;
    let dir = TempDir::new("backup_copies");
    let db = DB::open(&opts(), dir.0.join("db")).unwrap();
    for i in 0..3000u32 {
        db.put(format!("k{i:05}"), vec![b'v'; 40]).unwrap();
    }
    db.flush().unwrap();
    let mut engine = engine(&dir.0.join("backups"));
    engine.create_new_backup(&db).unwrap();
    // A second engine on the directory is refused while one is open.
    assert!(matches!(
        BackupEngine::open(
            &BackupEngineOptions::new(dir.0.join("backups")).unwrap(),
            &Env::new().unwrap()
        ),
        Err(Error::Busy(_))
    ));
    // Shared tables are copies, not links to the live tables.
    for e in std::fs::read_dir(dir.0.join("backups/shared")).unwrap() {
        let m = e.unwrap().metadata().unwrap();
        assert_eq!(m.nlink(), 1, "a backed-up table shares its bytes");
    }
    // What a restore interrupted by a crash leaves: tables, no CURRENT.
    let to = dir.0.join("restored");
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join("000009.sst"), b"half a table").unwrap();
    std::fs::write(to.join("000010.log"), b"half a log").unwrap();
    let want = contents(&db);
    assert_eq!(restore(&mut engine, 1, &to), want);
}
