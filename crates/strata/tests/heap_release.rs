//! A flush or compaction gives the C allocator's free pages back to the
//! system (`util/heap.rs`). glibc keeps memory freed inside an arena
//! resident; a long fill's background jobs free several MB per output
//! (index builders, read buffers, the inputs' index blocks), and without
//! the release its peak memory grows by what they leave between live
//! blocks (docs/benchmarks.md, "The memory a job frees").
//!
//! Each test frees memory of its own between live blocks, where free()
//! cannot return it, and checks that the job returned it. Their own test
//! binary, run one at a time: other tests' allocations would blur the
//! process's resident memory.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::sync::Mutex;
use std::time::{Duration, Instant};

use strata_kv::{Options, DB};

mod common;
use common::TempDir;

/// One test at a time: both measure the whole process.
static SERIAL: Mutex<()> = Mutex::new(());

/// Resident anonymous memory of this process, in KiB.
fn rss_anon_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

const HOLES: usize = 32;
const HOLE_BYTES: usize = 256 << 10;

/// Leaves `HOLES` freed, touched buffers of `HOLE_BYTES` between live
/// ones in this thread's arena, as a background job leaves its buffers
/// between the tables' index blocks; returns the live ones.
fn free_memory_between_live_blocks() -> Vec<Vec<u8>> {
    // A process that has run a while: freeing a mapped buffer raises
    // glibc's mapping threshold to its size, so later buffers up to that
    // size come from the arenas.
    drop(std::hint::black_box(vec![1u8; 2 << 20]));
    let mut all: Vec<Vec<u8>> = (0..2 * HOLES).map(|_| vec![1u8; HOLE_BYTES]).collect();
    let mut live = Vec::new();
    for (i, b) in all.drain(..).enumerate() {
        if i % 2 == 1 {
            live.push(b);
        }
    }
    live
}

fn open(dir: &TempDir) -> DB {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    DB::open(&opts, &dir.0).unwrap()
}

/// Waits up to 5 s for resident memory to drop to `below` KiB.
fn drops_below(below: u64) -> Option<u64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = rss_anon_kib();
        if now < below {
            return Some(now);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_flush_gives_back_freed_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("heap-release-flush");
    let db = open(&dir);
    db.put(b"k", b"v").unwrap();
    let live = free_memory_between_live_blocks();
    let before = rss_anon_kib();
    db.flush().unwrap();
    // The release runs after the flush has woken its waiters.
    let expected = before - (HOLES * HOLE_BYTES / 1024 * 3 / 4) as u64;
    let after = drops_below(expected);
    assert!(
        after.is_some(),
        "resident memory {before} KiB before the flush, {} KiB 5 s after: {} KiB freed were not given back",
        rss_anon_kib(),
        HOLES * HOLE_BYTES / 1024
    );
    drop(live);
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn a_manual_compaction_gives_back_freed_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = TempDir::new("heap-release-compaction");
    let db = open(&dir);
    for i in 0..1000u32 {
        db.put(format!("key{i:06}"), i.to_le_bytes()).unwrap();
    }
    db.flush().unwrap();
    let live = free_memory_between_live_blocks();
    let before = rss_anon_kib();
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    // The release runs before compact_range returns.
    let after = rss_anon_kib();
    assert!(
        after + (HOLES * HOLE_BYTES / 1024 * 3 / 4) as u64 <= before,
        "resident memory {before} KiB before the compaction, {after} KiB after: {} KiB freed were not given back",
        HOLES * HOLE_BYTES / 1024
    );
    drop(live);
    assert_eq!(common::files_per_level(&db)[..2], [0, 1]);
    assert_eq!(
        db.get(b"key000999").unwrap(),
        Some(999u32.to_le_bytes().to_vec())
    );
}
