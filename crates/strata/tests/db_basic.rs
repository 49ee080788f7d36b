//! Embedding the database through the public API: open, write, read,
//! iterate, snapshot, flush, reopen, and the errors of bad input.

use std::sync::Arc;

use strata_kv::env::{FileSystem, MemFileSystem};
use strata_kv::{
    BlockBasedOptions, Direction, Error, IteratorMode, Options, ReadOptions,
    ReverseBytewiseComparator, WriteBatch, WriteOptions, DB,
};

fn mem_opts(fs: &MemFileSystem) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    opts
}

fn small_opts(fs: &MemFileSystem) -> Options {
    let mut opts = mem_opts(fs);
    opts.set_write_buffer_size(32 << 10);
    opts.set_target_file_size_base(32 << 10);
    opts.set_max_bytes_for_level_base(128 << 10);
    opts.set_level_zero_file_num_compaction_trigger(2);
    let mut table = BlockBasedOptions::default();
    table.set_block_size(1024);
    table.set_bloom_filter(10.0, false);
    opts.set_block_based_table_factory(&table);
    opts
}

#[test]
fn put_get_delete_and_reopen() {
    let fs = MemFileSystem::new();
    let opts = mem_opts(&fs);
    {
        let db = DB::open(&opts, "/db").unwrap();
        db.put(b"apple", b"red").unwrap();
        db.put("banana", "yellow").unwrap();
        db.delete(b"apple").unwrap();
        assert_eq!(db.get(b"apple").unwrap(), None);
        assert_eq!(db.get(b"banana").unwrap().as_deref(), Some(&b"yellow"[..]));
        assert_eq!(&*db.get_pinned(b"banana").unwrap().unwrap(), b"yellow");
    }
    // Recovery from the log alone.
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(db.get(b"apple").unwrap(), None);
    assert_eq!(db.get(b"banana").unwrap().as_deref(), Some(&b"yellow"[..]));
    db.flush().unwrap();
    assert_eq!(
        db.property_value("strata.num-files-at-level0")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    drop(db);
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(db.get(b"banana").unwrap().as_deref(), Some(&b"yellow"[..]));
    assert_eq!(&*db.get_pinned(b"banana").unwrap().unwrap(), b"yellow");
}

#[test]
fn batches_snapshots_and_iterators() {
    let fs = MemFileSystem::new();
    let db = DB::open(&mem_opts(&fs), "/db").unwrap();
    let mut b = WriteBatch::default();
    for i in 0..10u8 {
        b.put([b'k', b'0' + i], [i]);
    }
    b.delete(b"k3");
    db.write(b).unwrap();
    let snap = db.snapshot();
    db.put(b"k0", b"new").unwrap();
    db.delete(b"k1").unwrap();
    assert_eq!(snap.get(b"k0").unwrap().as_deref(), Some(&[0u8][..]));
    assert_eq!(snap.get(b"k1").unwrap().as_deref(), Some(&[1u8][..]));
    assert_eq!(db.get(b"k1").unwrap(), None);
    db.flush().unwrap();
    assert_eq!(snap.get(b"k0").unwrap().as_deref(), Some(&[0u8][..]));

    let keys: Vec<Vec<u8>> = db
        .iterator(IteratorMode::Start)
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    assert_eq!(
        keys,
        vec![
            b"k0".to_vec(),
            b"k2".to_vec(),
            b"k4".to_vec(),
            b"k5".to_vec(),
            b"k6".to_vec(),
            b"k7".to_vec(),
            b"k8".to_vec(),
            b"k9".to_vec()
        ]
    );
    let back: Vec<Vec<u8>> = db
        .iterator(IteratorMode::From(b"k5", Direction::Reverse))
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    assert_eq!(
        back,
        vec![
            b"k5".to_vec(),
            b"k4".to_vec(),
            b"k2".to_vec(),
            b"k0".to_vec()
        ]
    );
    let snap_keys: Vec<_> = snap
        .iterator(IteratorMode::End)
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    assert_eq!(snap_keys.len(), 9);

    let mut ro = ReadOptions::default();
    ro.set_iterate_lower_bound(b"k2".to_vec());
    ro.set_iterate_upper_bound(b"k6".to_vec());
    let mut it = db.raw_iterator_opt(ro);
    it.seek_to_first();
    let mut seen = Vec::new();
    while let Some(k) = it.key() {
        seen.push(k.to_vec());
        it.next();
    }
    it.status().unwrap();
    assert_eq!(seen, vec![b"k2".to_vec(), b"k4".to_vec(), b"k5".to_vec()]);
    it.seek_to_last();
    assert_eq!(it.key(), Some(&b"k5"[..]));
}

#[test]
fn many_writes_make_levels_and_survive_reopen() {
    let fs = MemFileSystem::new();
    let opts = small_opts(&fs);
    {
        let db = DB::open(&opts, "/db").unwrap();
        for i in 0..20_000u32 {
            db.put(
                format!("key{:08}", (i * 7919) % 20_000),
                format!("value{i}"),
            )
            .unwrap();
        }
        db.flush().unwrap();
        let stats = db.property_value("strata.stats").unwrap().unwrap();
        assert!(stats.contains("Compaction Stats"), "{stats}");
        let deeper: usize = (1..7)
            .map(|l| {
                db.property_value(&format!("strata.num-files-at-level{l}"))
                    .unwrap()
                    .unwrap()
                    .parse::<usize>()
                    .unwrap()
            })
            .sum();
        assert!(deeper > 0, "{stats}");
    }
    let db = DB::open(&opts, "/db").unwrap();
    for i in (0..20_000u32).step_by(37) {
        let k = format!("key{:08}", (i * 7919) % 20_000);
        assert_eq!(
            db.get(&k).unwrap(),
            Some(format!("value{i}").into_bytes()),
            "{k}"
        );
    }
    assert_eq!(db.iterator(IteratorMode::Start).count(), 20_000);
}

#[test]
fn sync_and_disable_wal() {
    let fs = MemFileSystem::new();
    let opts = mem_opts(&fs);
    let db = DB::open(&opts, "/db").unwrap();
    let mut wo = WriteOptions::default();
    wo.set_sync(true);
    db.put_opt(b"durable", b"1", &wo).unwrap();
    let mut nowal = WriteOptions::default();
    nowal.disable_wal(true);
    db.put_opt(b"volatile", b"2", &nowal).unwrap();
    assert_eq!(db.get(b"volatile").unwrap().as_deref(), Some(&b"2"[..]));
    drop(db);
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(db.get(b"durable").unwrap().as_deref(), Some(&b"1"[..]));
    // A clean close flushed the write the log never saw (RocksDB does the
    // same unless avoid_flush_during_shutdown).
    assert_eq!(db.get(b"volatile").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn close_flushes_only_when_a_log_free_write_needs_it() {
    let fs = MemFileSystem::new();
    let opts = mem_opts(&fs);
    let table_files = || {
        fs.list(std::path::Path::new("/db"))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".sst"))
            .count()
    };
    let db = DB::open(&opts, "/db").unwrap();
    db.put(b"logged", b"1").unwrap();
    drop(db);
    assert_eq!(
        table_files(),
        0,
        "logged writes are recovered from the log, not flushed"
    );
    let db = DB::open(&opts, "/db").unwrap();
    let mut nowal = WriteOptions::default();
    nowal.disable_wal(true);
    for i in 0..100u32 {
        db.put_opt(i.to_be_bytes(), b"v", &nowal).unwrap();
    }
    drop(db);
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(db.iterator(IteratorMode::Start).count(), 101);
    assert_eq!(db.get(b"logged").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn reverse_comparator_orders_keys_backwards() {
    let fs = MemFileSystem::new();
    let mut opts = mem_opts(&fs);
    opts.set_comparator_object(Arc::new(ReverseBytewiseComparator));
    let db = DB::open(&opts, "/db").unwrap();
    for k in ["a", "b", "c"] {
        db.put(k, k).unwrap();
    }
    db.flush().unwrap();
    let keys: Vec<_> = db
        .iterator(IteratorMode::Start)
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    assert_eq!(keys, vec![b"c".to_vec(), b"b".to_vec(), b"a".to_vec()]);
    drop(db);
    let mut bytewise = mem_opts(&fs);
    bytewise.create_if_missing(false);
    let err = DB::open(&bytewise, "/db").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let db = DB::open(&opts, "/db").unwrap();
    assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"b"[..]));
}

#[test]
fn bad_input_gets_clear_errors() {
    let fs = MemFileSystem::new();
    let mut opts = mem_opts(&fs);
    opts.create_if_missing(false);
    let err = DB::open(&opts, "/nothing").unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("create_if_missing"),
        "{err}"
    );

    let mut bad = mem_opts(&fs);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(0);
    bad.set_block_based_table_factory(&t);
    assert!(matches!(
        DB::open(&bad, "/db").unwrap_err(),
        Error::InvalidArgument(_)
    ));

    fs.create_dir_all(std::path::Path::new("/f")).unwrap();
    fs.create(std::path::Path::new("/f/file")).unwrap();
    let err = DB::open(&mem_opts(&fs), "/f/file").unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");

    let db = DB::open(&mem_opts(&fs), "/db").unwrap();
    db.put(b"kept", b"yes").unwrap();
    let err = DB::open(&mem_opts(&fs), "/db").unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err}");
    let err = db
        .put(vec![0u8; strata_kv::limits::KEY_SIZE_BYTES_MAX + 1], b"")
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(db.get(b"kept").unwrap().as_deref(), Some(&b"yes"[..]));
}

#[test]
fn destroy_removes_the_database() {
    let fs = MemFileSystem::new();
    let opts = mem_opts(&fs);
    let db = DB::open(&opts, "/db").unwrap();
    db.put(b"a", b"b").unwrap();
    assert!(matches!(
        DB::destroy(&opts, "/db").unwrap_err(),
        Error::Busy(_)
    ));
    drop(db);
    DB::destroy(&opts, "/db").unwrap();
    let mut no_create = opts.clone();
    no_create.create_if_missing(false);
    assert!(DB::open(&no_create, "/db").is_err());
}

/// A second process cannot open a database another process holds.
#[test]
fn lock_held_by_another_process() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};
    if let Ok(dir) = std::env::var("STRATA_LOCK_CHILD_DIR") {
        let db = DB::open_default(&dir).unwrap();
        println!("locked");
        // Hold the database until the parent closes our stdin.
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        drop(db);
        return;
    }
    let dir = std::env::temp_dir().join(format!("strata-lock-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lock_held_by_another_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STRATA_LOCK_CHILD_DIR", &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.contains("locked") {
        line.clear();
    }
    assert!(line.contains("locked"), "child did not open the database");
    let err = DB::open_default(&dir).unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err}");
    assert!(err.to_string().contains("already open"), "{err}");
    drop(child.stdin.take());
    child.wait().unwrap();
    DB::open_default(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compact_range_moves_everything_down() {
    let fs = MemFileSystem::new();
    let mut opts = small_opts(&fs);
    opts.set_disable_auto_compactions(true);
    let db = DB::open(&opts, "/db").unwrap();
    for i in 0..5000u32 {
        db.put(format!("k{:06}", i * 31 % 5000), [i as u8; 30])
            .unwrap();
        if i % 1000 == 999 {
            db.flush().unwrap();
        }
    }
    for i in (0..5000u32).step_by(2) {
        db.delete(format!("k{i:06}")).unwrap();
    }
    let l0 = |db: &DB| {
        db.property_value("strata.num-files-at-level0")
            .unwrap()
            .unwrap()
    };
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    assert_eq!(l0(&db), "0");
    db.wait_for_compact().unwrap();
    assert_eq!(db.iterator(IteratorMode::Start).count(), 2500);
    for i in (0..5000u32).step_by(7) {
        assert_eq!(db.get(format!("k{i:06}")).unwrap().is_some(), i % 2 == 1);
    }
}

#[test]
fn keys_around_the_stack_lookup_size_are_found_in_tables() {
    // The get path builds its lookup key on the stack up to 128 bytes
    // (120-byte user keys) and on the heap beyond: both sides, in tables.
    let fs = MemFileSystem::new();
    let db = DB::open(&small_opts(&fs), "/db").unwrap();
    let lens = [0usize, 1, 8, 119, 120, 121, 128, 1000, 5000];
    let keys: Vec<Vec<u8>> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let mut key = vec![b'k'; len];
            if let Some(last) = key.last_mut() {
                *last = i as u8;
            }
            key
        })
        .collect();
    for (key, len) in keys.iter().zip(lens) {
        db.put(key, format!("v{len}")).unwrap();
    }
    db.flush().unwrap();
    for (mut key, len) in keys.into_iter().zip(lens) {
        assert_eq!(
            db.get(&key).unwrap().as_deref(),
            Some(format!("v{len}").as_bytes()),
            "key of {len} bytes"
        );
        key.push(0);
        assert_eq!(
            db.get(&key).unwrap(),
            None,
            "absent key of {} bytes",
            len + 1
        );
    }
}

/// A write buffer below 64 KiB is clipped up at open (as RocksDB does),
/// and an empty memtable is never switched: writes complete, and make a
/// handful of tables, not one per attempt.
#[test]
fn tiny_write_buffer_is_clipped_and_writes_complete() {
    for size in [0usize, 1, 4096, 60 << 10] {
        let fs = MemFileSystem::new();
        let mut opts = mem_opts(&fs);
        opts.set_write_buffer_size(size);
        let db = DB::open(&opts, "/db").unwrap();
        for i in 0..2000u32 {
            db.put(format!("k{i:05}"), [b'v'; 100]).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compact().unwrap();
        let tables = db.live_files().unwrap().len();
        assert!(
            (1..=8).contains(&tables),
            "size {size}: {tables} tables for 250 KB of writes"
        );
        let names = fs.list(std::path::Path::new("/db")).unwrap();
        let logs = names.iter().filter(|n| n.ends_with(".log")).count();
        assert!(logs <= 2, "size {size}: logs left: {names:?}");
        assert_eq!(db.get("k01999").unwrap().as_deref(), Some(&[b'v'; 100][..]));
    }
}

/// A batch over the log's record limit is refused as bad input before
/// anything is written, and the database goes on taking writes.
#[test]
fn oversized_batch_fails_alone() {
    let fs = MemFileSystem::new();
    let db = DB::open(&mem_opts(&fs), "/db").unwrap();
    db.put(b"before", b"1").unwrap();
    let mut batch = WriteBatch::default();
    let value = vec![7u8; strata_kv::limits::VALUE_SIZE_BYTES_MAX];
    for i in 0..5 {
        batch.put(format!("big{i}"), &value);
    }
    let e = db.write(batch).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("write batch of"), "{e}");
    assert_eq!(db.get(b"big0").unwrap(), None);
    db.put(b"after", b"2").unwrap();
    db.flush().unwrap();
    drop(db);
    let db = DB::open(&mem_opts(&fs), "/db").unwrap();
    assert_eq!(db.get(b"before").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(b"big0").unwrap(), None);
}

/// One-record writes reuse their thread's batch buffer: a `put` refused
/// for an oversized key fails alone, and the thread's next writes hold
/// their own record only, nothing of the refused one.
#[test]
fn refused_put_leaves_nothing_in_the_next_write() {
    let fs = MemFileSystem::new();
    let db = DB::open(&mem_opts(&fs), "/db").unwrap();
    db.put(b"a", b"1").unwrap();
    let big_key = vec![b'k'; strata_kv::limits::KEY_SIZE_BYTES_MAX + 1];
    let e = db.put(&big_key, b"x").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    db.put(b"b", b"2").unwrap();
    db.delete(b"a").unwrap();
    let e = db.merge(b"m", b"x").unwrap_err();
    assert!(matches!(e, Error::NotSupported(_)), "{e}");
    db.put(b"c", b"3").unwrap();
    let all: Vec<_> = db
        .iterator(IteratorMode::Start)
        .map(|kv| kv.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(
        all,
        vec![
            (b"b".to_vec(), b"2".to_vec()),
            (b"c".to_vec(), b"3".to_vec())
        ]
    );
    drop(db);
    let db = DB::open(&mem_opts(&fs), "/db").unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(&big_key).unwrap(), None);
    assert_eq!(db.get(b"m").unwrap(), None);
}

/// `flush` waits for the memtables that held data when it was called,
/// not for every memtable that fills while it waits: with a writer
/// filling small buffers without pause, it still returns.
#[test]
fn flush_returns_under_steady_writes() {
    let fs = MemFileSystem::new();
    let mut opts = mem_opts(&fs);
    opts.set_write_buffer_size(64 << 10);
    opts.set_max_write_buffer_number(4);
    let db = Arc::new(DB::open(&opts, "/db").unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = {
        let (db, stop, written) = (db.clone(), stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                db.put(format!("k{:08}", i % 100_000), [b'w'; 200]).unwrap();
                i += 1;
                written.store(i, std::sync::atomic::Ordering::Relaxed);
            }
            i
        })
    };
    // The flushes must meet the writer at work: on a loaded machine the
    // thread may not have run yet.
    while written.load(std::sync::atomic::Ordering::Relaxed) < 1000 {
        std::thread::yield_now();
    }
    for round in 0..20u32 {
        db.put(format!("flushed{round}"), b"x").unwrap();
        db.flush().unwrap();
        assert_eq!(
            db.get(format!("flushed{round}")).unwrap().as_deref(),
            Some(&b"x"[..])
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 0);
}

/// `create_if_missing` on a directory that holds logs or tables but no
/// CURRENT refuses to make a new database over them, and leaves them be.
#[test]
fn create_refuses_a_directory_with_orphaned_logs() {
    let fs = MemFileSystem::new();
    let opts = mem_opts(&fs);
    {
        let db = DB::open(&opts, "/db").unwrap();
        db.put(b"old", b"data").unwrap();
    }
    fs.remove(std::path::Path::new("/db/CURRENT")).unwrap();
    let before = fs.list(std::path::Path::new("/db")).unwrap();
    let e = DB::open(&opts, "/db").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("no CURRENT"), "{e}");
    assert!(e.to_string().contains(".log"), "{e}");
    assert_eq!(fs.list(std::path::Path::new("/db")).unwrap(), before);
    // A directory with none of a database's data files is fine.
    let db = DB::open(&opts, "/fresh").unwrap();
    assert_eq!(db.get(b"old").unwrap(), None);
}

#[test]
fn destroy_refuses_a_directory_that_holds_no_database() {
    let fs = MemFileSystem::new();
    let opts = mem_opts(&fs);
    let dir = std::path::Path::new("/not-a-db");
    fs.create_dir_all(dir).unwrap();
    for name in ["000007.log", "000008.sst", "notes.txt"] {
        strata_kv::env::write_file_atomic(&fs, &dir.join(name), b"someone else's").unwrap();
    }
    let before = fs.list(dir).unwrap();
    let e = DB::destroy(&opts, dir).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(
        e.to_string().contains("no database (no CURRENT file)"),
        "{e}"
    );
    assert!(e.to_string().contains("000007.log"), "{e}");
    assert_eq!(fs.list(dir).unwrap(), before, "nothing deleted");
    // A real database is destroyed, and so is what a crashed creation
    // leaves (a lock and a manifest, no CURRENT); a missing directory is
    // fine.
    {
        let db = DB::open(&opts, "/db").unwrap();
        db.put(b"k", b"v").unwrap();
    }
    DB::destroy(&opts, "/db").unwrap();
    assert!(!fs.exists(std::path::Path::new("/db/CURRENT")));
    let crashed = std::path::Path::new("/crashed");
    fs.create_dir_all(crashed).unwrap();
    for name in ["LOCK", "MANIFEST-000001"] {
        strata_kv::env::write_file_atomic(&fs, &crashed.join(name), b"").unwrap();
    }
    DB::destroy(&opts, crashed).unwrap();
    assert!(!fs.exists(&crashed.join("MANIFEST-000001")));
    DB::destroy(&opts, "/never-created").unwrap();
}

/// `Error::NotSupported` is what a RocksDB compression name Strata does not
/// implement parses to; an unknown name is `InvalidArgument`.
#[test]
fn compression_names_strata_lacks_are_not_supported() {
    for name in ["zlib", "bzip2", "lz4hc", "xpress"] {
        let e = name.parse::<strata_kv::DBCompressionType>().unwrap_err();
        assert!(matches!(e, Error::NotSupported(_)), "{name}: {e}");
    }
    let e = "bogus".parse::<strata_kv::DBCompressionType>().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    for name in ["none", "snappy", "lz4", "zstd"] {
        assert!(
            name.parse::<strata_kv::DBCompressionType>().is_ok(),
            "{name}"
        );
    }
}

#[test]
fn read_and_background_counters() {
    let fs = MemFileSystem::new();
    let db = DB::open(&mem_opts(&fs), "/counters").unwrap();
    let prop = |name: &str| -> u64 { db.property_value(name).unwrap().unwrap().parse().unwrap() };
    for i in 0..10u8 {
        db.put([i], [i]).unwrap();
    }
    assert_eq!(prop("strata.num-point-reads"), 0);
    for i in 0..5u8 {
        db.get([i]).unwrap();
    }
    db.multi_get([[1u8], [2], [99]]);
    db.multi_get([[1u8]]);
    assert_eq!(prop("strata.num-point-reads"), 5 + 3 + 1);
    {
        let mut it = db.raw_iterator();
        it.seek_to_first();
        for _ in 0..3 {
            it.next();
        }
        assert_eq!(prop("rocksdb.num-iterator-steps"), 0, "counted in runs");
    }
    assert_eq!(prop("strata.num-iterator-steps"), 4, "added when it drops");
    assert_eq!(prop("strata.num-flushes"), 0);
    db.flush().unwrap();
    assert_eq!(prop("strata.num-flushes"), 1);
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    assert!(prop("strata.num-compactions") >= 1);
}

/// `estimate-table-readers-mem` counts the indexes and filters the table
/// readers keep (and the index arrays once a lookup built them), not what
/// lives in the block cache, pinned there (a flushed table is in L0) or
/// not; `block-cache-usage` counts that.
#[test]
fn table_readers_memory_is_what_they_hold_outside_the_cache() {
    for (cached, pinned) in [(false, false), (true, false), (true, true)] {
        let fs = MemFileSystem::new();
        let mut opts = mem_opts(&fs);
        let mut table = BlockBasedOptions::default();
        table.set_block_size(256);
        table.set_bloom_filter(10.0, false);
        table.set_block_cache(&strata_kv::Cache::new_lru_cache(8 << 20));
        table.set_cache_index_and_filter_blocks(cached);
        table.set_pin_l0_filter_and_index_blocks_in_cache(pinned);
        opts.set_block_based_table_factory(&table);
        let db = DB::open(&opts, "/readers-mem").unwrap();
        let prop =
            |name: &str| -> usize { db.property_value(name).unwrap().unwrap().parse().unwrap() };
        assert_eq!(prop("strata.estimate-table-readers-mem"), 0, "no tables");
        assert_eq!(prop("rocksdb.block-cache-capacity"), 8 << 20);
        for i in 0..2_000u32 {
            db.put(format!("key{i:06}"), [7u8; 50]).unwrap();
        }
        db.flush().unwrap();
        db.get(b"key000010").unwrap().unwrap();
        let readers = prop("rocksdb.estimate-table-readers-mem");
        let cache = prop("strata.block-cache-usage");
        if cached {
            assert_eq!(readers, 0, "index and filter are the cache's");
        } else {
            // 2,000 keys of about 70 bytes in 256-byte blocks: hundreds of
            // index entries, and a filter of 2,000 keys at 10 bits each.
            assert!(readers > 2_000 * 10 / 8 + 300 * 16, "{readers} bytes");
        }
        assert!(cache > 256, "the data block the get read: {cache} bytes");
    }
}

/// Write buffers of 16 MiB and more build memtables of 2 MiB mapped
/// blocks, which a flushed memtable hands to the next ones of its database
/// (still holding its old entries). Across several such memtables, keys
/// rewritten in each, every read answers the newest write.
#[test]
fn memtables_on_a_flushed_memtables_blocks_read_their_own_writes() {
    let fs = MemFileSystem::new();
    let mut opts = mem_opts(&fs);
    opts.set_write_buffer_size(16 << 20);
    let db = DB::open(&opts, "/db").unwrap();
    let keys = 20_000u32;
    let mut model = std::collections::BTreeMap::new();
    // Four rounds of about 11 MB each: a memtable switch and flush in each
    // of the later rounds, every key rewritten with the round's value.
    for round in 0..4u32 {
        for i in 0..keys {
            let key = format!("key{:06}", (i * 7919) % keys);
            let value = format!("{round}:{i}:{}", "v".repeat(500));
            db.put(key.as_bytes(), value.as_bytes()).unwrap();
            model.insert(key.into_bytes(), value.into_bytes());
        }
        if round % 2 == 1 {
            db.flush().unwrap();
        }
    }
    let got: Vec<(Vec<u8>, Vec<u8>)> = db
        .iterator(IteratorMode::Start)
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    assert!(got == model.clone().into_iter().collect::<Vec<_>>());
    for (k, v) in model.iter().step_by(101) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
}
