//! Insert streams and where table files end: stream-aware cutting, the
//! SST partitioner, and trivial moves of the files they make.
//!
//! Each test writes S ascending streams at once (keys: an 8-byte stream
//! prefix, then an 8-byte big-endian counter), as W4 does at a small scale,
//! and looks at the files the tree holds afterwards.

use std::sync::Arc;

use strata_kv::env::MemFileSystem;
use strata_kv::{Options, SstPartitioner, SstPartitionerFactory, DB};

const VALUE: [u8; 100] = [b'v'; 100];

fn options(cutting: bool) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_file_system(Arc::new(MemFileSystem::new()));
    o.set_write_buffer_size(256 << 10);
    // Minimum cut size: 1 MiB / 128 = 8 KiB; a stream's piece of a
    // memtable is about 256 KiB / S.
    o.set_target_file_size_base(1 << 20);
    o.set_max_bytes_for_level_base(4 << 20);
    o.set_max_bytes_for_level_multiplier(4.0);
    o.set_compression_type(strata_kv::DBCompressionType::None);
    o.set_stream_aware_cutting(cutting);
    o
}

fn key(stream: u64, n: u64) -> Vec<u8> {
    let mut k = format!("s{stream:07}").into_bytes();
    k.extend_from_slice(&n.to_be_bytes());
    k
}

/// Writes `per_stream` keys to each of `streams` streams, interleaved.
fn write_streams(db: &DB, streams: u64, per_stream: u64) {
    write_stream_range(db, streams, 0..per_stream, None);
}

/// Writes keys `range` of each of `streams` streams, interleaved, then
/// flushes and waits for compactions; with `pace`, also after every
/// `pace` keys of each stream.
fn write_stream_range(db: &DB, streams: u64, range: std::ops::Range<u64>, pace: Option<u64>) {
    for n in range {
        for s in 0..streams {
            db.put(key(s, n), VALUE).unwrap();
        }
        if pace.is_some_and(|p| (n + 1) % p == 0) {
            db.flush().unwrap();
            db.wait_for_compact().unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
}

/// (level, first key, last key) of every table.
fn files(db: &DB) -> Vec<(i32, Vec<u8>, Vec<u8>)> {
    db.live_files()
        .unwrap()
        .into_iter()
        .map(|f| (f.level, f.start_key.unwrap(), f.end_key.unwrap()))
        .collect()
}

/// Tables whose first and last keys are in different streams.
fn spanning(files: &[(i32, Vec<u8>, Vec<u8>)], from_level: i32) -> usize {
    files
        .iter()
        .filter(|(level, lo, hi)| *level >= from_level && lo[..8] != hi[..8])
        .count()
}

/// (user bytes, flush and compaction bytes) written so far.
fn bytes_written(db: &DB) -> (u64, u64) {
    let int = |name: &str| -> u64 { db.property_value(name).unwrap().unwrap().parse().unwrap() };
    let tables = (0..7)
        .map(|l| int(&format!("strata.compaction.bytes-written-at-level{l}")))
        .sum();
    (int("strata.user-bytes-written"), tables)
}

/// Flush and compaction bytes over user bytes, from `strata.stats`.
fn write_amp(db: &DB) -> f64 {
    let stats = db.property_value("strata.stats").unwrap().unwrap();
    let line = stats
        .lines()
        .find(|l| l.starts_with("Write amplification"))
        .expect("stats give the write amplification");
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn check_all(db: &DB, streams: u64, per_stream: u64) {
    let mut it = db.raw_iterator();
    it.seek_to_first();
    for s in 0..streams {
        for n in 0..per_stream {
            assert!(it.valid(), "stream {s} key {n} missing");
            assert_eq!(it.key().unwrap(), key(s, n).as_slice());
            it.next();
        }
    }
    assert!(!it.valid());
    it.status().unwrap();
}

#[test]
fn streams_end_up_in_files_of_their_own_and_move_down_without_rewrites() {
    let (streams, per_stream) = (8, 4000);
    let db = DB::open(&options(true), "/db").unwrap();
    // The first flushes span every stream (nothing below tells where to
    // cut), and so does every flush while such a file is in level 0: how
    // many, and so the write amplification of the first half, depends on
    // how fast compactions keep up with the writer. The first half is
    // written at a fixed pace (a flush and a wait for compactions every
    // 1,000 keys), so that the tree's shape at half-time does not. The
    // compaction that merges the spanning flushes cuts where a stream's new
    // run ends, and from then on each flush is cut per stream and goes down
    // by trivial move: the second half, written at full speed, is never
    // rewritten.
    write_stream_range(&db, streams, 0..per_stream / 2, Some(1000 / streams));
    let half = self::files(&db);
    assert_eq!(spanning(&half, 0), 0, "at half-time: {half:?}");
    let (user0, tables0) = bytes_written(&db);
    write_stream_range(&db, streams, per_stream / 2..per_stream, None);
    let (user1, tables1) = bytes_written(&db);
    check_all(&db, streams, per_stream);
    let files = files(&db);
    assert_eq!(spanning(&files, 1), 0, "{} files: {files:?}", files.len());
    let steady = (tables1 - tables0) as f64 / (user1 - user0) as f64;
    // A flush writes about 0.9 bytes per user byte (no compression, keys
    // share prefixes); any rewrite of the second half would add 0.5 or more.
    assert!(
        steady < 1.0,
        "write amplification of the second half {steady:.2}"
    );
    let wa = write_amp(&db);
    assert!(wa < 1.6, "write amplification {wa}");
    // Bounded file count: no file below the minimum cut size except the
    // last piece of a stream.
    assert!(files.len() < 8 * 40, "{} files", files.len());

    // The same writes without cutting: files span streams and are rewritten.
    let db = DB::open(&options(false), "/db").unwrap();
    write_streams(&db, streams, per_stream);
    check_all(&db, streams, per_stream);
    let off = files_spanning_and_amp(&db);
    println!(
        "write-amp with cutting {wa:.2} (second half {steady:.2}), without {:.2}",
        off.1
    );
    assert!(off.0 > 0, "without cutting no file spans streams");
    assert!(off.1 > wa, "without cutting write-amp {} <= {wa}", off.1);
}

fn files_spanning_and_amp(db: &DB) -> (usize, f64) {
    (spanning(&files(db), 1), write_amp(db))
}

#[test]
fn one_ascending_and_one_descending_stream_are_never_rewritten() {
    let db = DB::open(&options(true), "/db").unwrap();
    for n in 0..30_000u64 {
        db.put(key(0, n), VALUE).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    assert!(write_amp(&db) < 1.05, "ascending: {}", write_amp(&db));

    let db = DB::open(&options(true), "/db2").unwrap();
    for n in (0..30_000u64).rev() {
        db.put(key(0, n), VALUE).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    assert!(write_amp(&db) < 1.05, "descending: {}", write_amp(&db));
    check_all(&db, 1, 30_000);
}

#[test]
fn a_stream_written_below_and_above_existing_data_goes_into_the_gaps() {
    // Three runs of one stream each, into the middle, the low and the high
    // third of the key space; the memtable of a run holds the start of the
    // next (no flush in between), so a flush spans existing data and is
    // cut at its edges.
    let db = DB::open(&options(true), "/db").unwrap();
    for (s, range) in [(1, 0..10_000u64), (0, 0..10_000), (2, 0..10_000)] {
        for n in range {
            db.put(key(s, n), VALUE).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    check_all(&db, 3, 10_000);
    assert!(write_amp(&db) < 1.1, "{}", write_amp(&db));
    assert_eq!(spanning(&files(&db), 0), 0, "{:?}", files(&db));
}

#[test]
fn the_fixed_prefix_partitioner_cuts_flushes_too() {
    // Cutting off: only the partitioner cuts, and from the first flush on.
    let mut o = options(false);
    o.set_sst_partitioner_factory(SstPartitionerFactory::fixed_prefix(8));
    o.set_disable_auto_compactions(true);
    let db = DB::open(&o, "/db").unwrap();
    for n in 0..2_000 {
        for s in 0..4 {
            db.put(key(s, n), VALUE).unwrap();
        }
    }
    db.flush().unwrap();
    // Every flushed table holds one stream.
    let flushed = files(&db);
    assert!(
        flushed.iter().all(|f| f.0 == 0) && flushed.len() >= 4,
        "{flushed:?}"
    );
    assert_eq!(spanning(&flushed, 0), 0, "{flushed:?}");
    // And so does every table a compaction writes.
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    let compacted = files(&db);
    assert!(compacted.iter().all(|f| f.0 > 0), "{compacted:?}");
    assert_eq!(spanning(&compacted, 0), 0, "{compacted:?}");
    check_all(&db, 4, 2_000);
}

/// Cuts where the first byte of the counter changes and refuses every
/// trivial move.
struct EveryCounterByte;

impl SstPartitioner for EveryCounterByte {
    fn name(&self) -> &str {
        "test.EveryCounterByte"
    }
    fn should_partition(&self, prev: &[u8], current: &[u8], _size: u64) -> bool {
        prev[..15] != current[..15]
    }
    fn can_do_trivial_move(&self, _smallest: &[u8], _largest: &[u8]) -> bool {
        false
    }
}

#[test]
fn a_user_partitioner_decides_cuts_and_trivial_moves() {
    let mut o = options(false);
    o.set_sst_partitioner_factory(SstPartitionerFactory::new(EveryCounterByte));
    o.set_level_zero_file_num_compaction_trigger(1);
    // One flush holds every key.
    o.set_write_buffer_size(4 << 20);
    let db = DB::open(&o, "/db").unwrap();
    // 256 keys per counter byte.
    for n in 0..2_048u64 {
        db.put(key(0, n), VALUE).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    check_all(&db, 1, 2_048);
    let files = files(&db);
    assert_eq!(files.len(), 8, "{files:?}");
    for (_, lo, hi) in &files {
        assert_eq!(lo[..15], hi[..15]);
    }
    // Nothing moved: the flushed files went down by a rewrite.
    let stats = db.property_value("strata.stats").unwrap().unwrap();
    assert!(stats.contains("moved: 0 B"), "{stats}");
    assert!(files.iter().all(|f| f.0 > 0), "{files:?}");
}
