//! A write allocates nothing of its own (issue 26), and neither does a
//! point lookup served from the block cache: counted by a global
//! allocator that tallies each thread's allocations. What may allocate on
//! a write is the memtable's arena (a 4 KiB block per few dozen entries);
//! a write that allocated its batch or its queue entry would show at least
//! one allocation per write, and a lookup that built its key in a heap
//! buffer would show two per lookup.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::{Arc, Barrier};

use strata_kv::{Options, ReadOptions, WriteBatch, WriteOptions, DB};

mod common;
use common::TempDir;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // Not counted while the thread is exiting.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Room for every write of a test in one memtable: no switch, no flush.
fn options() -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(64 << 20);
    opts
}

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

const VALUE: [u8; 100] = [7; 100];

/// At most this many allocations per write (the arena's share is about
/// 0.04 for these entries).
const PER_WRITE_MAX: f64 = 0.1;

/// At most this many allocations per get served by cached blocks.
const PER_GET_MAX: f64 = 0.1;

#[test]
fn one_record_writes_allocate_nothing_of_their_own() {
    let dir = TempDir::new("allocations-writes");
    let db = DB::open(&options(), &dir.0).unwrap();
    let mut no_log = WriteOptions::default();
    no_log.disable_wal(true);
    for i in 0..100 {
        db.put(key(i), VALUE).unwrap();
    }
    let writes = 20_000u64;
    let before = allocations();
    for i in 0..writes {
        match i % 4 {
            0 | 1 => db.put(key(i), VALUE).unwrap(),
            2 => db.delete(key(i - 1)).unwrap(),
            _ => db.put_opt(key(i), VALUE, &no_log).unwrap(),
        }
    }
    let per_write = (allocations() - before) as f64 / writes as f64;
    assert!(
        per_write < PER_WRITE_MAX,
        "{per_write:.3} allocations per write"
    );
    assert_eq!(
        db.get(key(writes - 1)).unwrap().as_deref(),
        Some(&VALUE[..])
    );
    assert_eq!(db.get(key(writes - 3)).unwrap(), None);
}

#[test]
fn a_reused_batch_allocates_nothing() {
    // The user's own batch is the user's allocation; the write adds none.
    let dir = TempDir::new("allocations-batch");
    let db = DB::open(&options(), &dir.0).unwrap();
    let writes = 5_000u64;
    let mut batches: Vec<WriteBatch> = (0..writes)
        .map(|i| {
            let mut b = WriteBatch::default();
            for j in 0..4 {
                b.put(key(i * 4 + j), VALUE);
            }
            b
        })
        .collect();
    let before = allocations();
    for b in batches.drain(..) {
        db.write(b).unwrap();
    }
    let per_write = (allocations() - before) as f64 / writes as f64;
    // Four entries per write: the arena's share is about 0.16.
    assert!(
        per_write < 4.0 * PER_WRITE_MAX,
        "{per_write:.3} allocations per write"
    );
    assert_eq!(
        db.get(key(writes * 4 - 1)).unwrap().as_deref(),
        Some(&VALUE[..])
    );
}

#[test]
fn concurrent_writers_allocate_nothing_of_their_own() {
    // Groups of several writers, inserted in parallel (the default) or by
    // the leader, pipelined or not: neither the group's shared state nor
    // its follower list is allocated per group, even with groups in
    // flight at once.
    for (parallel, pipelined) in [(true, false), (false, false), (true, true), (false, true)] {
        let dir = TempDir::new("write-allocations-threads");
        let mut opts = options();
        opts.set_allow_concurrent_memtable_write(parallel);
        opts.set_enable_pipelined_write(pipelined);
        let db = Arc::new(DB::open(&opts, &dir.0).unwrap());
        let threads = 4u64;
        let writes = 10_000u64;
        let start = Arc::new(Barrier::new(threads as usize));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let db = db.clone();
                let start = start.clone();
                std::thread::spawn(move || {
                    let base = t * 1_000_000;
                    // Warm-up: this thread's writer and batch buffer.
                    for i in 0..10 {
                        db.put(key(base + i), VALUE).unwrap();
                    }
                    start.wait();
                    let before = allocations();
                    for i in 0..writes {
                        db.put(key(base + i), VALUE).unwrap();
                    }
                    allocations() - before
                })
            })
            .collect();
        let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let per_write = total as f64 / (threads * writes) as f64;
        assert!(
            per_write < PER_WRITE_MAX,
            "parallel={parallel} pipelined={pipelined}: {per_write:.3} allocations per write"
        );
        assert_eq!(
            db.get(key(3_000_000 + writes - 1)).unwrap().as_deref(),
            Some(&VALUE[..])
        );
    }
}

#[test]
fn cached_point_lookups_allocate_nothing() {
    // Keys in a table (flushed), its blocks in the block cache after a
    // first pass: a pinned lookup, found or not, allocates nothing.
    let dir = TempDir::new("allocations-reads");
    let db = DB::open(&options(), &dir.0).unwrap();
    let keys = 20_000u64;
    for i in 0..keys {
        db.put(key(2 * i), VALUE).unwrap();
    }
    db.flush().unwrap();
    for i in 0..2 * keys {
        let _ = db.get_pinned(key(i)).unwrap();
    }
    let before = allocations();
    let mut found = 0u64;
    for i in 0..2 * keys {
        if let Some(v) = db.get_pinned(key(i)).unwrap() {
            assert_eq!(&*v, &VALUE[..]);
            found += 1;
        }
    }
    let per_get = (allocations() - before) as f64 / (2 * keys) as f64;
    assert_eq!(found, keys);
    assert!(per_get < PER_GET_MAX, "{per_get:.3} allocations per get");
}

#[test]
fn a_batch_of_one_into_a_kept_vector_allocates_nothing() {
    // `batched_multi_get_into` with one key is the pinned lookup itself:
    // with the caller's vector kept from call to call, it allocates no
    // more than `get_pinned` (nothing, with the blocks cached).
    let dir = TempDir::new("allocations-multi-get");
    let db = DB::open(&options(), &dir.0).unwrap();
    let keys = 20_000u64;
    for i in 0..keys {
        db.put(key(2 * i), VALUE).unwrap();
    }
    db.flush().unwrap();
    let ro = ReadOptions::default();
    let mut out = Vec::with_capacity(1);
    for i in 0..2 * keys {
        db.batched_multi_get_into([&key(i)], false, &ro, &mut out);
    }
    let before = allocations();
    let mut found = 0u64;
    for i in 0..2 * keys {
        db.batched_multi_get_into([&key(i)], false, &ro, &mut out);
        assert_eq!(out.len(), 1);
        if let Some(v) = out[0].as_ref().unwrap() {
            assert_eq!(&**v, &VALUE[..]);
            found += 1;
        }
    }
    let per_get = (allocations() - before) as f64 / (2 * keys) as f64;
    assert_eq!(found, keys);
    assert!(per_get < PER_GET_MAX, "{per_get:.3} allocations per key");
    // The vector-returning call allocates its vector: one per call.
    let before = allocations();
    for i in 0..keys {
        assert_eq!(db.batched_multi_get([&key(i)], false).len(), 1);
    }
    let per_call = (allocations() - before) as f64 / keys as f64;
    assert!(
        (1.0..1.1).contains(&per_call),
        "{per_call:.3} allocations per call"
    );
}
