//! Reopen after each kind of operation, recovery from logs alone, and a
//! background write failure that stops writes without losing acknowledged
//! data.

use std::path::Path;
use std::sync::Arc;

use strata_kv::env::{FaultInjectionFileSystem, FaultRule, FileOp, FileSystem, MemFileSystem};
use strata_kv::{IteratorMode, Options, WriteBatch, DB};

fn opts_for(fs: Arc<dyn FileSystem>) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(fs);
    opts.set_write_buffer_size(16 << 10);
    opts.set_target_file_size_base(16 << 10);
    opts.set_max_bytes_for_level_base(64 << 10);
    opts.set_level_zero_file_num_compaction_trigger(2);
    opts
}

/// One step of the reopen test: an operation and its effect on the model.
type Step = Box<dyn Fn(&DB, &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>)>;

fn contents(db: &DB) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iterator(IteratorMode::Start)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect()
}

#[test]
fn reopen_after_each_kind_of_operation() {
    let fs = MemFileSystem::new();
    let opts = opts_for(Arc::new(fs.clone()));
    let mut expected = std::collections::BTreeMap::new();
    let steps: Vec<(&str, Step)> = vec![
        (
            "put",
            Box::new(|db, m| {
                db.put(b"a", b"1").unwrap();
                m.insert(b"a".to_vec(), b"1".to_vec());
            }),
        ),
        (
            "overwrite",
            Box::new(|db, m| {
                db.put(b"a", b"2").unwrap();
                m.insert(b"a".to_vec(), b"2".to_vec());
            }),
        ),
        (
            "delete",
            Box::new(|db, m| {
                db.delete(b"a").unwrap();
                m.remove(&b"a"[..]);
            }),
        ),
        (
            "batch",
            Box::new(|db, m| {
                let mut b = WriteBatch::default();
                for i in 0..100u32 {
                    b.put(i.to_be_bytes(), i.to_le_bytes());
                    m.insert(i.to_be_bytes().to_vec(), i.to_le_bytes().to_vec());
                }
                b.delete(7u32.to_be_bytes());
                m.remove(&7u32.to_be_bytes()[..]);
                db.write(b).unwrap();
            }),
        ),
        ("flush", Box::new(|db, _| db.flush().unwrap())),
        (
            "delete after flush",
            Box::new(|db, m| {
                db.delete(8u32.to_be_bytes()).unwrap();
                m.remove(&8u32.to_be_bytes()[..]);
            }),
        ),
        (
            "many writes (switches, flushes, compactions)",
            Box::new(|db, m| {
                for i in 0..5000u32 {
                    let k = format!("bulk{:05}", i * 13 % 5000).into_bytes();
                    let v = vec![i as u8; 40];
                    db.put(&k, &v).unwrap();
                    m.insert(k, v);
                }
            }),
        ),
        (
            "snapshot taken and dropped",
            Box::new(|db, m| {
                let s = db.snapshot();
                db.put(b"after-snap", b"x").unwrap();
                m.insert(b"after-snap".to_vec(), b"x".to_vec());
                assert_eq!(s.get(b"after-snap").unwrap(), None);
            }),
        ),
        (
            "empty batch",
            Box::new(|db, _| db.write(WriteBatch::default()).unwrap()),
        ),
    ];
    for (name, step) in &steps {
        {
            let db = DB::open(&opts, "/db").unwrap();
            step(&db, &mut expected);
            assert_eq!(
                contents(&db),
                expected.clone().into_iter().collect::<Vec<_>>(),
                "before reopen, after {name}"
            );
        }
        let db = DB::open(&opts, "/db").unwrap();
        assert_eq!(
            contents(&db),
            expected.clone().into_iter().collect::<Vec<_>>(),
            "after reopen, after {name}"
        );
        for (k, v) in &expected {
            assert_eq!(
                db.get(k).unwrap().as_ref(),
                Some(v),
                "get after reopen, after {name}"
            );
        }
    }
}

#[test]
fn recovery_from_logs_only() {
    let fs = MemFileSystem::new();
    let mut opts = opts_for(Arc::new(fs.clone()));
    opts.set_write_buffer_size(64 << 20);
    {
        let db = DB::open(&opts, "/db").unwrap();
        for i in 0..3000u32 {
            db.put(format!("k{i}"), format!("v{i}")).unwrap();
        }
        for i in (0..3000u32).step_by(3) {
            db.delete(format!("k{i}")).unwrap();
        }
        assert_eq!(
            db.property_value("strata.num-files-at-level0")
                .unwrap()
                .as_deref(),
            Some("0")
        );
    }
    let names = fs.list(Path::new("/db")).unwrap();
    assert!(
        !names.iter().any(|n| n.ends_with(".sst")),
        "no table before reopen: {names:?}"
    );
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..3000u32 {
        let want = (i % 3 != 0).then(|| format!("v{i}").into_bytes());
        assert_eq!(db.get(format!("k{i}")).unwrap(), want);
    }
}

#[test]
fn failed_flush_stops_writes_and_loses_nothing() {
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let opts = opts_for(Arc::new(fs.clone()));
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i}"), b"v").unwrap();
    }
    // Table creation fails from now on, as on a full disk.
    fs.inject(FaultRule::new(&[FileOp::Create]).path_contains(".sst"));
    let err = db.flush().unwrap_err();
    assert!(err.to_string().contains("injected I/O error"), "{err}");
    let err = db.put(b"later", b"x").unwrap_err();
    assert!(
        err.to_string().contains("injected I/O error"),
        "writes stop with the background error: {err}"
    );
    // Reads still work.
    assert_eq!(db.get(b"k5").unwrap().as_deref(), Some(&b"v"[..]));
    drop(db);
    fs.clear_faults();
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("k{i}")).unwrap().as_deref(),
            Some(&b"v"[..]),
            "k{i} lost"
        );
    }
    assert_eq!(db.get(b"later").unwrap(), None);
}
