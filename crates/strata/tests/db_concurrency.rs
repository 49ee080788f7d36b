//! Four writer threads and two reader threads share one database for a
//! few seconds; every acknowledged write is visible afterwards and after a
//! reopen. Runs on the real file system.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_kv::{BlockBasedOptions, Options, WriteBatch, WriteOptions, DB};

mod common;
use common::TempDir;

fn options() -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(64 << 10);
    opts.set_target_file_size_base(64 << 10);
    opts.set_max_bytes_for_level_base(256 << 10);
    opts.set_level_zero_file_num_compaction_trigger(2);
    let mut t = BlockBasedOptions::default();
    t.set_bloom_filter(10.0, false);
    opts.set_block_based_table_factory(&t);
    opts
}

#[test]
fn four_writers_two_readers() {
    let dir = TempDir::new("concurrency");
    let opts = options();
    let db = Arc::new(DB::open(&opts, &dir.0).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let run_for = Duration::from_millis(
        std::env::var("STRATA_STRESS_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3000),
    );
    let start = Instant::now();

    let writers: Vec<_> = (0..4u32)
        .map(|w| {
            let db = db.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                // Each writer owns its keys; the last acknowledged value of
                // each key is what must survive.
                let mut acked: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
                let mut sync = WriteOptions::default();
                sync.set_sync(true);
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let k = format!("w{w}-{:06}", i % 5000).into_bytes();
                    let v = format!("{w}:{i}").into_bytes();
                    if i.is_multiple_of(10) {
                        let mut b = WriteBatch::default();
                        b.put(&k, &v);
                        let k2 = format!("w{w}-{:06}", (i + 1) % 5000).into_bytes();
                        b.delete(&k2);
                        db.write(b).unwrap();
                        acked.remove(&k2);
                    } else if i.is_multiple_of(97) {
                        db.put_opt(&k, &v, &sync).unwrap();
                    } else {
                        db.put(&k, &v).unwrap();
                    }
                    acked.insert(k, v);
                    i += 1;
                }
                // Keys deleted and never rewritten must read as absent.
                (acked, i)
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let db = db.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let k = format!("w{}-{:06}", reads % 4, (reads * 31 + r) % 5000);
                    if let Some(v) = db.get(&k).unwrap() {
                        // A value is always one its writer wrote for this key.
                        let s = String::from_utf8(v).unwrap();
                        let (w, i) = s.split_once(':').unwrap();
                        assert_eq!(format!("w{w}"), k.split('-').next().unwrap());
                        assert_eq!(
                            i.parse::<u64>().unwrap() % 5000,
                            k[3..].parse::<u64>().unwrap()
                        );
                    }
                    if reads.is_multiple_of(500) {
                        let mut it = db.raw_iterator();
                        it.seek(k.as_bytes());
                        let mut last: Option<Vec<u8>> = None;
                        for _ in 0..100 {
                            let Some(key) = it.key() else { break };
                            if let Some(l) = &last {
                                assert!(l.as_slice() < key, "iterator out of order");
                            }
                            last = Some(key.to_vec());
                            it.next();
                        }
                        it.status().unwrap();
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    while start.elapsed() < run_for {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    let mut expected = HashMap::new();
    let mut writes = 0;
    for w in writers {
        let (acked, n) = w.join().unwrap();
        writes += n;
        expected.extend(acked);
    }
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    println!("{writes} writes, {reads} reads in {:?}", start.elapsed());
    let check = |db: &DB| {
        for (k, v) in &expected {
            assert_eq!(
                db.get(k).unwrap().as_ref(),
                Some(v),
                "{}",
                String::from_utf8_lossy(k)
            );
        }
        let n = db.iterator(strata_kv::IteratorMode::Start).count();
        assert_eq!(n, expected.len());
    };
    check(&db);
    drop(Arc::try_unwrap(db).expect("threads joined"));
    let db = DB::open(&opts, &dir.0).unwrap();
    check(&db);
}

/// Sixteen writers with mixed write options (groups break where the log or
/// sync settings differ; waiting writers spin, then sleep): every write
/// lands exactly once, with its own sequence number.
#[test]
fn sixteen_writers_mixed_options_all_land() {
    for pipelined in [false, true] {
        sixteen_writers(pipelined);
    }
}

/// Sixteen writers mixing sync, unsynced and log-less writes, single puts
/// and batches, over a 64 KiB write buffer (memtable switches while
/// groups are in flight); `pipelined`: with `enable_pipelined_write`.
fn sixteen_writers(pipelined: bool) {
    let dir = TempDir::new("sixteen");
    let mut opts = options();
    opts.set_enable_pipelined_write(pipelined);
    let db = Arc::new(DB::open(&opts, &dir.0).unwrap());
    let per_thread = 1500u64;
    let threads: Vec<_> = (0..16u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    let mut wo = WriteOptions::default();
                    wo.disable_wal(t % 4 == 1 && i % 3 == 0);
                    wo.set_sync(t % 4 == 2 && i % 50 == 0);
                    let k = format!("t{t:02}-{i:05}");
                    if i % 7 == 0 {
                        let mut b = WriteBatch::default();
                        b.put(&k, k.as_bytes());
                        b.put(format!("{k}-b"), b"b");
                        db.write_opt(b, &wo).unwrap();
                    } else {
                        db.put_opt(&k, k.as_bytes(), &wo).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let batches = (0..per_thread).filter(|i| i % 7 == 0).count() as u64;
    assert_eq!(
        db.latest_sequence_number(),
        16 * (per_thread + batches),
        "every record got one sequence number"
    );
    for t in 0..16u64 {
        for i in 0..per_thread {
            let k = format!("t{t:02}-{i:05}");
            assert_eq!(db.get(&k).unwrap().as_deref(), Some(k.as_bytes()), "{k}");
        }
    }
}

/// Eight writers write overlapping keys (every key by several writers) in
/// batches of one to three records, with the writers of a group inserting
/// their own batches in parallel, and again with the leader inserting the
/// whole group. Afterwards the sequence count is exact, get and a scan
/// agree, and a reopen, which replays the log on one thread with the
/// sequence numbers its records carry, gives every key the same value: the
/// parallel inserts put each record at the sequence number the log gives
/// it.
///
/// Each way again with `enable_pipelined_write`: groups overlap (one
/// inserting while the next logs) and must still take their sequence
/// numbers in log order.
#[test]
fn parallel_memtable_inserts_match_log_replay() {
    for (parallel, pipelined) in [(true, false), (false, false), (true, true), (false, true)] {
        let dir = TempDir::new("parallel-insert");
        let mut opts = options();
        // Everything stays in the memtable and the log until the reopen.
        opts.set_write_buffer_size(64 << 20);
        opts.set_allow_concurrent_memtable_write(parallel);
        opts.set_enable_pipelined_write(pipelined);
        let db = Arc::new(DB::open(&opts, &dir.0).unwrap());
        let (threads, per_thread) = (8u64, 3000u64);
        // Rounds of the eight writers until the mode under test has shown
        // itself (groups of several writers inserting in parallel, or a
        // group handing the log on early); on a machine busy with other
        // tests one round can happen to make neither. Every round's
        // records are checked below.
        let mut records = 0u64;
        for round in 0..10u64 {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let db = db.clone();
                    std::thread::spawn(move || {
                        let mut records = 0u64;
                        for i in 0..per_thread {
                            let key = |j: u64| format!("k{:04}", (i * 31 + t * 7 + j * 101) % 700);
                            let mut b = WriteBatch::default();
                            for j in 0..1 + (i + t) % 3 {
                                if (i + j) % 11 == 0 {
                                    b.delete(key(j));
                                } else {
                                    b.put(key(j), format!("{round}:{t}:{i}:{j}"));
                                }
                                records += 1;
                            }
                            db.write(b).unwrap();
                        }
                        records
                    })
                })
                .collect();
            records += workers.into_iter().map(|w| w.join().unwrap()).sum::<u64>();
            let seen_parallel = common::prop(&db, "strata.num-parallel-write-groups") > 0;
            let seen_pipelined = common::prop(&db, "strata.num-pipelined-write-groups") > 0;
            if seen_parallel == parallel && seen_pipelined == pipelined {
                break;
            }
        }
        assert_eq!(
            db.latest_sequence_number(),
            records,
            "parallel={parallel} pipelined={pipelined}"
        );
        let groups = common::prop(&db, "strata.num-parallel-write-groups");
        assert_eq!(groups > 0, parallel, "{groups} groups inserted in parallel");
        let handed_on = common::prop(&db, "strata.num-pipelined-write-groups");
        assert_eq!(
            handed_on > 0,
            pipelined,
            "{handed_on} groups handed the log on early"
        );
        let before = common::contents(&db);
        assert!(
            before.windows(2).all(|w| w[0].0 < w[1].0),
            "scan out of order"
        );
        for (k, v) in &before {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
        }
        drop(Arc::try_unwrap(db).expect("threads joined"));
        let db = DB::open(&opts, &dir.0).unwrap();
        assert_eq!(
            common::contents(&db),
            before,
            "parallel={parallel} pipelined={pipelined}: replay disagrees"
        );
    }
}

/// With `enable_pipelined_write`, groups overlap but become visible whole
/// and in sequence order. Four writers each write batches setting their
/// keys `a` and `b` to the same rising counter; readers, through
/// snapshots, never see `a` and `b` of one writer differ (a group seen in
/// part) nor a counter go back, nor the latest sequence number go back.
/// A 64 KiB write buffer switches memtables under the pipeline.
#[test]
fn pipelined_groups_become_visible_whole_and_in_order() {
    let dir = TempDir::new("pipelined");
    let mut opts = options();
    opts.set_enable_pipelined_write(true);
    let db = Arc::new(DB::open(&opts, &dir.0).unwrap());
    // Writers still running: the readers stop when it reaches zero, also
    // when a writer panics (its guard counts it out while unwinding).
    let running = Arc::new(AtomicUsize::new(4));
    struct Done(Arc<AtomicUsize>);
    impl Drop for Done {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::Release);
        }
    }
    let writers: Vec<_> = (0..4u32)
        .map(|w| {
            let db = db.clone();
            let done = Done(running.clone());
            std::thread::spawn(move || {
                let _done = done;
                for i in 1..=4000u64 {
                    let mut b = WriteBatch::default();
                    let v = format!("{i:08}");
                    b.put(format!("a{w}"), &v);
                    // Filler between the two keys, so a group spans more
                    // of the memtable.
                    b.put(format!("f{w}-{}", i % 64), [7u8; 100]);
                    b.put(format!("b{w}"), &v);
                    db.write(b).unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let db = db.clone();
            let running = running.clone();
            std::thread::spawn(move || {
                let mut seen = [0u64; 4];
                let mut last_seq = 0;
                let mut checks = 0u64;
                while running.load(Ordering::Acquire) > 0 || checks == 0 {
                    let seq = db.latest_sequence_number();
                    assert!(seq >= last_seq, "latest sequence went back");
                    last_seq = seq;
                    let snap = db.snapshot();
                    for (w, seen) in seen.iter_mut().enumerate() {
                        let a = snap.get(format!("a{w}")).unwrap();
                        let b = snap.get(format!("b{w}")).unwrap();
                        assert_eq!(a, b, "writer {w}: a group seen in part");
                        let n = a.map_or(0, |v| String::from_utf8(v).unwrap().parse().unwrap());
                        assert!(n >= *seen, "writer {w}: {n} after {seen}");
                        *seen = n;
                    }
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    // A group given sequence numbers already taken can make the memtable
    // insert spin: fail rather than hang.
    let deadline = Instant::now() + Duration::from_secs(120);
    while running.load(Ordering::Acquire) > 0 {
        assert!(Instant::now() < deadline, "writers stuck for two minutes");
        std::thread::sleep(Duration::from_millis(10));
    }
    let writers: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    for w in writers {
        w.unwrap();
    }
    for w in 0..4 {
        assert_eq!(
            db.get(format!("a{w}")).unwrap().as_deref(),
            Some(&b"00004000"[..])
        );
        assert_eq!(
            db.get(format!("b{w}")).unwrap().as_deref(),
            Some(&b"00004000"[..])
        );
    }
    assert_eq!(db.latest_sequence_number(), 4 * 4000 * 3);
}

/// Options whose comparator panics the first time it meets the key `boom`,
/// as a buggy user comparator would: in the memtable insert of the group
/// that holds it. (Once only: a concurrent insert may have linked `boom` at
/// the lowest level before the panic, and later searches meet it.)
fn boom_options(pipelined: bool, parallel: bool) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let armed = AtomicBool::new(true);
    opts.set_comparator(
        "panics-on-boom",
        Box::new(move |a: &[u8], b: &[u8]| {
            if (a == b"boom" || b == b"boom") && armed.swap(false, Ordering::SeqCst) {
                panic!("comparator panicked on boom");
            }
            a.cmp(b)
        }),
    );
    opts.set_enable_pipelined_write(pipelined);
    opts.set_allow_concurrent_memtable_write(parallel);
    opts
}

/// Runs `f` on a thread and waits at most `secs` for it: a hang fails the
/// test instead of stopping the suite.
fn within<T: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()).unwrap());
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still waiting after {secs} s")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            panic!("{what}: the thread panicked (see above)")
        }
    }
}

#[test]
fn a_panicking_write_fails_the_writes_after_it_instead_of_hanging_them() {
    let dir = TempDir::new("leader-panic");
    let db = Arc::new(DB::open(&boom_options(false, false), &dir.0).unwrap());
    db.put(b"a", b"1").unwrap();
    let d = db.clone();
    let panicked = std::panic::catch_unwind(AssertUnwindSafe(move || d.put(b"boom", b"x")));
    assert!(
        panicked.is_err(),
        "the comparator's panic reaches the writer"
    );
    let d = db.clone();
    let after = within(30, "a write after the panic", move || d.put(b"b", b"2"));
    match after {
        Err(strata_kv::Error::Aborted(what)) => assert!(what.contains("panicked"), "{what}"),
        other => panic!("expected Aborted, got {other:?}"),
    }
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"b").unwrap(), None);
    within(30, "closing after the panic", move || drop(db));
}

#[test]
fn a_panicking_leader_does_not_hang_its_group_or_the_queue() {
    for (pipelined, parallel) in [(false, false), (true, false), (false, true), (true, true)] {
        let dir = TempDir::new("leader-panic-group");
        let opts = boom_options(pipelined, parallel);
        let db = Arc::new(DB::open(&opts, &dir.0).unwrap());
        db.put(b"a", b"1").unwrap();
        let panics = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let (db, panics) = (db.clone(), panics.clone());
                std::thread::spawn(move || {
                    for i in 0..2_000u32 {
                        let key = if t == 0 && i == 1_000 {
                            b"boom".to_vec()
                        } else {
                            format!("k{t}-{i:05}").into_bytes()
                        };
                        let db = db.clone();
                        match std::panic::catch_unwind(AssertUnwindSafe(move || db.put(&key, b"v")))
                        {
                            Err(_) => {
                                panics.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok(Ok(())) => {}
                            Ok(Err(strata_kv::Error::Aborted(_))) => return,
                            Ok(Err(e)) => panic!("unexpected error {e}"),
                        }
                    }
                })
            })
            .collect();
        within(60, "writers around a panicking leader", move || {
            for t in threads {
                t.join().unwrap();
            }
        });
        assert_eq!(
            panics.load(Ordering::SeqCst),
            1,
            "pipelined {pipelined}, parallel {parallel}: one put panics"
        );
        assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
        // Whether the leader or (in parallel mode) a follower inserting its
        // own batch panicked, the group is not published and writes stop.
        let d = db.clone();
        let after = within(30, "a write after the panic", move || d.put(b"z", b"2"));
        assert!(
            matches!(after, Err(strata_kv::Error::Aborted(_))),
            "{after:?}"
        );
        assert_eq!(db.get(b"boom").unwrap(), None);
        within(30, "closing after the panic", move || drop(db));
    }
}
