//! Round trips, boundary cases, torn tails, corruption under every recovery
//! mode, and property tests feeding arbitrary and mutated logs to the reader.
//! Seeds are fixed (or chosen by proptest, which prints them), so every
//! failure replays.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::{FragmentType, PredecessorLog};
use super::*;
use crate::env::{read_file_to_vec, FileSystem, MemFileSystem, SequentialFile, WritableFile};
use crate::error::{Error, Result};
use crate::limits::LOG_RECORD_SIZE_BYTES_MAX;
use crate::util::crc::{crc32c, mask};

const MODES: [WalRecoveryMode; 4] = [
    WalRecoveryMode::TolerateCorruptedTailRecords,
    WalRecoveryMode::AbsoluteConsistency,
    WalRecoveryMode::PointInTimeRecovery,
    WalRecoveryMode::SkipAnyCorruptedRecords,
];

const LOG_NAME: &str = "000001.log";

/// An in-memory sequential file that returns at most `chunk` bytes per read,
/// to exercise the reader's handling of short reads.
#[derive(Debug)]
struct SliceFile {
    data: Vec<u8>,
    pos: usize,
    chunk: usize,
}

impl SequentialFile for SliceFile {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let n = buf.len().min(self.chunk).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fn random_bytes(rng: &mut StdRng, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// Where a record written when the file had `size` bytes starts: after the
/// block trailer if fewer than a header's bytes were left.
fn fragment_start(size: u64) -> u64 {
    let left = BLOCK_SIZE as u64 - size % BLOCK_SIZE as u64;
    if left < HEADER_SIZE as u64 {
        size + left
    } else {
        size
    }
}

/// Writes `records` to a fresh log; returns its bytes and each record's offset.
fn write_log(records: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
    let fs = MemFileSystem::new();
    let path = Path::new("/000001.log");
    let mut w = LogWriter::new(fs.create(path).unwrap());
    let mut offsets = Vec::new();
    for r in records {
        offsets.push(fragment_start(w.file_size()));
        w.add_record(r).unwrap();
    }
    w.flush().unwrap();
    w.sync().unwrap();
    drop(w);
    (read_file_to_vec(&fs, path).unwrap(), offsets)
}

#[derive(Debug)]
struct Outcome {
    records: Vec<Vec<u8>>,
    offsets: Vec<u64>,
    end: Result<()>,
    dropped_bytes: u64,
}

impl Outcome {
    fn corruption_offset(&self) -> u64 {
        match &self.end {
            Err(Error::Corruption { offset, .. }) => *offset,
            other => panic!("expected a corruption, got {other:?}"),
        }
    }

    fn corruption_what(&self) -> &str {
        match &self.end {
            Err(Error::Corruption { file, what, .. }) => {
                assert_eq!(file, LOG_NAME);
                what
            }
            other => panic!("expected a corruption, got {other:?}"),
        }
    }
}

fn read_file(file: Box<dyn SequentialFile>, len: usize, mode: WalRecoveryMode) -> Outcome {
    let mut reader = LogReader::new(file, LOG_NAME, mode);
    let mut out = Outcome {
        records: Vec::new(),
        offsets: Vec::new(),
        end: Ok(()),
        dropped_bytes: 0,
    };
    let mut record = Vec::new();
    // Every record takes at least a header's bytes.
    for _ in 0..=len / HEADER_SIZE + 1 {
        match reader.read_record(&mut record) {
            Ok(true) => {
                out.records.push(record.clone());
                out.offsets.push(reader.last_record_offset());
            }
            Ok(false) => break,
            Err(e) => {
                out.end = Err(e);
                break;
            }
        }
    }
    // The end is sticky.
    match (&out.end, reader.read_record(&mut record)) {
        (Ok(()), Ok(false)) => {}
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!("end {a:?} then {b:?}"),
    }
    assert!(record.is_empty());
    out.dropped_bytes = reader.dropped_bytes();
    assert!(out.dropped_bytes <= len as u64);
    out
}

fn read_bytes(bytes: &[u8], mode: WalRecoveryMode, chunk: usize) -> Outcome {
    let file = SliceFile {
        data: bytes.to_vec(),
        pos: 0,
        chunk,
    };
    read_file(Box::new(file), bytes.len(), mode)
}

fn read(bytes: &[u8], mode: WalRecoveryMode) -> Outcome {
    read_bytes(bytes, mode, usize::MAX)
}

fn assert_all_read(bytes: &[u8], records: &[Vec<u8>], offsets: &[u64]) {
    for mode in MODES {
        let out = read(bytes, mode);
        assert!(out.end.is_ok(), "{mode:?}: {:?}", out.end);
        assert_eq!(out.records.len(), records.len(), "{mode:?}");
        assert!(out.records == records, "{mode:?}: records differ");
        assert_eq!(out.offsets, offsets, "{mode:?}");
        assert_eq!(out.dropped_bytes, 0, "{mode:?}");
    }
}

/// A raw fragment; `good_crc` false stores a wrong checksum.
fn fragment(type_byte: u8, payload: &[u8], good_crc: bool) -> Vec<u8> {
    let mut crc = mask(crc32c(&[&[type_byte][..], payload].concat()));
    if !good_crc {
        crc ^= 1;
    }
    let mut v = crc.to_le_bytes().to_vec();
    v.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    v.push(type_byte);
    v.extend_from_slice(payload);
    v
}

#[test]
fn empty_log() {
    assert_all_read(&[], &[], &[]);
    let (bytes, offsets) = write_log(&[]);
    assert!(bytes.is_empty());
    assert!(offsets.is_empty());
}

/// The example in docs/format/wal.md.
#[test]
fn documented_example() {
    let records = vec![vec![1; 100 - HEADER_SIZE], vec![2; 40_000]];
    let (bytes, offsets) = write_log(&records);
    assert_eq!(offsets, [0, 100]);
    assert_eq!(bytes.len(), 40_114);
    assert_eq!(&bytes[104..107], &[0x95, 0x7f, FragmentType::First as u8]); // 32661
    assert_eq!(
        &bytes[32772..32775],
        &[0xab, 0x1c, FragmentType::Last as u8]
    ); // 7339
    assert_all_read(&bytes, &records, &offsets);
}

#[test]
fn round_trip_random_sizes() {
    let seed = 0x5741_4c01;
    let mut rng = StdRng::seed_from_u64(seed);
    let records: Vec<Vec<u8>> = (0..120)
        .map(|_| {
            let len = match rng.gen_range(0..4) {
                0 => rng.gen_range(0..16),
                1 => rng.gen_range(0..2000),
                _ => rng.gen_range(0..100 << 10),
            };
            random_bytes(&mut rng, len)
        })
        .collect();
    let fs = MemFileSystem::new();
    let path = Path::new("/000001.log");
    let mut w = LogWriter::new(fs.create(path).unwrap());
    let mut offsets = Vec::new();
    for r in &records {
        offsets.push(fragment_start(w.file_size()));
        w.add_record(r).unwrap();
    }
    w.sync().unwrap();
    let size = w.file_size();
    drop(w);
    assert_eq!(fs.file_size(path).unwrap(), size);
    for mode in MODES {
        let file = fs.open_sequential(path).unwrap();
        let out = read_file(file, size as usize, mode);
        assert!(out.end.is_ok(), "seed {seed:#x} {mode:?}: {:?}", out.end);
        assert!(out.records == records, "seed {seed:#x} {mode:?}");
        assert_eq!(out.offsets, offsets, "seed {seed:#x} {mode:?}");
    }
    // Short reads of every size class give the same records.
    let bytes = read_file_to_vec(&fs, path).unwrap();
    for chunk in [1 << 10, 5000, BLOCK_SIZE - 1, BLOCK_SIZE + 1] {
        let out = read_bytes(&bytes, WalRecoveryMode::AbsoluteConsistency, chunk);
        assert!(out.end.is_ok() && out.records == records, "chunk {chunk}");
    }
}

#[test]
fn records_at_block_boundaries() {
    // The first record leaves `left` bytes in block 0.
    for left in 0..=HEADER_SIZE + 2 {
        let first = vec![b'a'; BLOCK_SIZE - HEADER_SIZE - left];
        let records = vec![
            first,
            b"next".to_vec(),
            Vec::new(),
            vec![b'b'; BLOCK_SIZE - 2 * HEADER_SIZE - 4 - HEADER_SIZE],
            vec![b'c'; BLOCK_SIZE - HEADER_SIZE],
            Vec::new(),
        ];
        let (bytes, offsets) = write_log(&records);
        let b = BLOCK_SIZE as u64;
        let next_at = if left < HEADER_SIZE {
            b
        } else {
            b - left as u64
        };
        assert_eq!(offsets[1], next_at, "left {left}");
        if left < HEADER_SIZE {
            // The trailer is zeros and "next" is a Full fragment at block 1.
            assert!(bytes[BLOCK_SIZE - left..BLOCK_SIZE].iter().all(|&x| x == 0));
            assert_eq!(bytes[BLOCK_SIZE + 6], FragmentType::Full as u8);
        } else {
            // A First fragment starts in the last bytes of block 0.
            let len = left - HEADER_SIZE;
            assert_eq!(bytes[BLOCK_SIZE - left + 4], len as u8);
            assert_eq!(bytes[BLOCK_SIZE - left + 6], FragmentType::First as u8);
            assert_eq!(bytes[BLOCK_SIZE + 6], FragmentType::Last as u8);
        }
        // The fourth record fills block 1 exactly when "next" started there,
        // and the fifth then fills block 2 exactly.
        if left < HEADER_SIZE {
            assert_eq!(offsets[4], 2 * b);
            assert_eq!(offsets[5], 3 * b);
            assert_eq!(bytes.len() as u64, 3 * b + HEADER_SIZE as u64);
        }
        assert_all_read(&bytes, &records, &offsets);
    }
}

#[test]
fn new_at_offset_appends_to_an_existing_log() {
    let b = BLOCK_SIZE;
    let first_lens = [0, 100, b - 7 - 3, b - 7 - 7, b - 7, 40_000, 2 * b];
    let mut rng = StdRng::seed_from_u64(3);
    for first_len in first_lens {
        let fs = MemFileSystem::new();
        let path = Path::new("/000003.log");
        let mut records = vec![random_bytes(&mut rng, first_len)];
        let mut offsets = Vec::new();
        let mut w = LogWriter::new(fs.create(path).unwrap());
        offsets.push(w.file_size());
        w.add_record(&records[0]).unwrap();
        w.sync().unwrap();
        drop(w);

        let size = fs.file_size(path).unwrap();
        let mut w = LogWriter::new_at_offset(fs.open_append(path).unwrap(), size);
        assert_eq!(w.file_size(), size);
        for len in [5, 0, 50_000, 3] {
            let r = random_bytes(&mut rng, len);
            offsets.push(fragment_start(w.file_size()));
            w.add_record(&r).unwrap();
            records.push(r);
        }
        w.sync().unwrap();
        drop(w);
        let bytes = read_file_to_vec(&fs, path).unwrap();
        assert_all_read(&bytes, &records, &offsets);
    }
}

/// Cuts the log at each of `cuts` (inside the last record) and checks every
/// mode: the earlier records come back, and only AbsoluteConsistency fails.
fn check_torn_tail(records: &[Vec<u8>], cuts: impl Fn(u64, u64) -> Vec<u64>) {
    let (bytes, offsets) = write_log(records);
    let n = records.len();
    let last_start = offsets[n - 1];
    let cut_points = cuts(last_start, bytes.len() as u64);
    assert!(!cut_points.is_empty());
    for cut in cut_points {
        assert!(cut > last_start && cut < bytes.len() as u64);
        let torn = &bytes[..cut as usize];
        for mode in MODES {
            let out = read(torn, mode);
            assert!(out.records == records[..n - 1], "cut {cut} {mode:?}");
            assert_eq!(out.offsets, offsets[..n - 1], "cut {cut} {mode:?}");
            if mode == WalRecoveryMode::AbsoluteConsistency {
                let what = out.corruption_what();
                assert!(
                    what.starts_with("truncated fragment") || what.contains("without Last"),
                    "cut {cut}: {what}"
                );
                assert!(out.corruption_offset() >= last_start, "cut {cut}");
            } else {
                assert!(out.end.is_ok(), "cut {cut} {mode:?}: {:?}", out.end);
                // Nothing was dropped but the torn record's bytes.
                assert_eq!(out.dropped_bytes, cut - last_start, "cut {cut} {mode:?}");
            }
        }
    }
    // Cut exactly before the last record, the log is clean.
    let clean = &bytes[..last_start as usize];
    assert_all_read(clean, &records[..n - 1], &offsets[..n - 1]);
}

#[test]
fn torn_tail_every_offset() {
    let b = BLOCK_SIZE;
    let every = |start: u64, end: u64| (start + 1..end).collect::<Vec<_>>();
    // The last record is a Full fragment inside block 0.
    check_torn_tail(&[vec![1; 100], vec![2; 3000], vec![3; 300]], every);
    // The last record is First (ends block 0) + Last.
    let filler = b - 150 - (HEADER_SIZE + 100) - HEADER_SIZE;
    check_torn_tail(&[vec![1; 100], vec![2; filler], vec![3; 400]], every);
    // The last record has Middle fragments: every offset near each fragment
    // boundary and a stride through the payloads.
    let near_edges = |start: u64, end: u64| {
        let b = BLOCK_SIZE as u64;
        (start + 1..end)
            .filter(|&c| c % b < 64 || b - c % b <= 64 || end - c <= 64 || c.is_multiple_of(997))
            .collect::<Vec<_>>()
    };
    check_torn_tail(&[vec![1; 10], vec![4; 3 * b]], near_edges);
}

#[test]
fn corrupt_tail_fragment() {
    let filler = BLOCK_SIZE - 150 - (HEADER_SIZE + 100) - HEADER_SIZE;
    let records = vec![vec![1; 100], vec![2; filler], vec![3; 400]];
    let (bytes, offsets) = write_log(&records);
    // A bad checksum in the First or the Last fragment of the last record,
    // with nothing after it, is a torn tail.
    for at in [
        offsets[2] + 10,
        BLOCK_SIZE as u64 + 10,
        bytes.len() as u64 - 1,
    ] {
        let mut bad = bytes.clone();
        bad[at as usize] ^= 0x40;
        let tolerate = read(&bad, WalRecoveryMode::TolerateCorruptedTailRecords);
        assert!(tolerate.end.is_ok(), "at {at}: {:?}", tolerate.end);
        assert!(tolerate.records == records[..2]);
        assert!(tolerate.dropped_bytes > 0);
        let absolute = read(&bad, WalRecoveryMode::AbsoluteConsistency);
        assert!(absolute.corruption_what().contains("checksum mismatch"));
        assert!(absolute.records == records[..2]);
    }
    // Garbage after a complete log is a torn tail too.
    let mut garbage = bytes.clone();
    garbage.extend_from_slice(&random_bytes(&mut StdRng::seed_from_u64(9), 5000));
    let tolerate = read(&garbage, WalRecoveryMode::TolerateCorruptedTailRecords);
    assert!(tolerate.end.is_ok() && tolerate.records == records);
    assert_eq!(tolerate.dropped_bytes, 5000);
    let absolute = read(&garbage, WalRecoveryMode::AbsoluteConsistency);
    assert_eq!(absolute.corruption_offset(), bytes.len() as u64);
}

#[test]
fn zero_filled_tail_is_end_of_log() {
    let records = vec![vec![1; 100], vec![2; 40_000], Vec::new()];
    let (bytes, offsets) = write_log(&records);
    for zeros in [HEADER_SIZE, 1000, 3 * BLOCK_SIZE] {
        let mut padded = bytes.clone();
        padded.resize(bytes.len() + zeros, 0);
        assert_all_read(&padded, &records, &offsets);
    }
    // Fewer zeros than a header at the end are a truncated header.
    let mut short = bytes.clone();
    short.resize(bytes.len() + 3, 0);
    let out = read(&short, WalRecoveryMode::TolerateCorruptedTailRecords);
    assert!(out.end.is_ok() && out.records == records);
    let out = read(&short, WalRecoveryMode::AbsoluteConsistency);
    assert!(out.corruption_what().contains("truncated fragment header"));
    // Zeros after the First fragment of a record leave the record torn.
    assert!(offsets[1] < BLOCK_SIZE as u64);
    let mut torn = bytes[..BLOCK_SIZE].to_vec();
    torn.resize(torn.len() + 2 * BLOCK_SIZE, 0);
    let out = read(&torn, WalRecoveryMode::TolerateCorruptedTailRecords);
    assert!(out.end.is_ok() && out.records == records[..1]);
    let out = read(&torn, WalRecoveryMode::AbsoluteConsistency);
    assert!(out
        .corruption_what()
        .contains("zero padding, expected Middle or Last"));
}

#[test]
fn bit_flip_in_a_middle_record() {
    let b = BLOCK_SIZE as u64;
    let records: Vec<Vec<u8>> = [1000, 20_000, 50_000, 3000, 40_000, 10]
        .iter()
        .enumerate()
        .map(|(i, &len)| vec![i as u8 + 1; len])
        .collect();
    let (bytes, offsets) = write_log(&records);
    let victim = 2;
    // The victim starts in block 0 and has a Middle fragment filling block 1.
    assert!(offsets[victim] < b && offsets[victim + 1] > 2 * b);
    for (at, bad_offset) in [
        (offsets[victim] + HEADER_SIZE as u64 + 5, offsets[victim]),
        (b + HEADER_SIZE as u64 + 10, b),
        (b + 2, b),
    ] {
        let mut bad = bytes.clone();
        bad[at as usize] ^= 0x01;

        for mode in [
            WalRecoveryMode::TolerateCorruptedTailRecords,
            WalRecoveryMode::AbsoluteConsistency,
        ] {
            let out = read(&bad, mode);
            assert_eq!(out.corruption_offset(), bad_offset, "flip at {at} {mode:?}");
            let what = out.corruption_what();
            assert!(what.contains("checksum mismatch"), "{what}");
            assert!(out.records == records[..victim]);
        }

        let pit = read(&bad, WalRecoveryMode::PointInTimeRecovery);
        assert!(pit.end.is_ok());
        assert!(pit.records == records[..victim]);
        assert_eq!(pit.offsets, offsets[..victim]);

        let skip = read(&bad, WalRecoveryMode::SkipAnyCorruptedRecords);
        assert!(skip.end.is_ok());
        let mut expected = records.clone();
        expected.remove(victim);
        let mut expected_offsets = offsets.clone();
        expected_offsets.remove(victim);
        assert!(skip.records == expected, "flip at {at}");
        assert_eq!(skip.offsets, expected_offsets);
        assert!(skip.dropped_bytes > 0);
    }
}

/// Regression: damage that makes the rest of the last block unparseable
/// (a length flipped past the end of the file, or a bad checksum) hid the
/// valid records after it in that block, so the default mode dropped them
/// as a torn tail: one flipped bit lost every later acknowledged write.
#[test]
fn damage_before_valid_records_in_the_last_block_is_not_a_torn_tail() {
    let records: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i + 1; 100]).collect();
    let (bytes, offsets) = write_log(&records);
    assert!(bytes.len() < BLOCK_SIZE, "one block");
    for victim in [0, 4, 8] {
        let at = offsets[victim] as usize;
        // The length's high bit (past the end of the file), then a payload bit.
        for (byte, what) in [
            (at + 5, "exceeds block"),
            (at + HEADER_SIZE + 3, "checksum mismatch"),
        ] {
            let mut bad = bytes.clone();
            bad[byte] ^= 0x80;
            let out = read(&bad, WalRecoveryMode::TolerateCorruptedTailRecords);
            assert_eq!(
                out.corruption_offset(),
                offsets[victim],
                "victim {victim}, {what}"
            );
            let message = out.corruption_what();
            assert!(message.contains(what), "{message}");
            let next = offsets[victim + 1];
            assert!(
                message.contains(&format!("a record starts at offset {next}")),
                "{message}"
            );
            assert!(out.records == records[..victim]);
        }
    }
    // Damage in the last record is still a torn tail.
    let mut bad = bytes.clone();
    bad[offsets[9] as usize + 5] ^= 0x80;
    let out = read(&bad, WalRecoveryMode::TolerateCorruptedTailRecords);
    assert!(out.end.is_ok());
    assert!(out.records == records[..9]);
}

/// `parts` laid out back to back, then `next` at the start of the next block.
fn two_blocks(parts: &[Vec<u8>], next: &[u8]) -> Vec<u8> {
    let mut v = parts.concat();
    assert!(v.len() <= BLOCK_SIZE);
    v.resize(BLOCK_SIZE, 0);
    v.extend_from_slice(next);
    v
}

#[test]
fn orphan_and_unterminated_fragments() {
    let a = fragment(1, b"a", true);
    let b = fragment(1, b"b", true);
    let a_len = a.len() as u64;

    // A Middle fragment with no First.
    let log = [a.clone(), fragment(3, b"xx", true), b.clone()].concat();
    let out = read(&log, WalRecoveryMode::TolerateCorruptedTailRecords);
    assert_eq!(out.corruption_offset(), a_len);
    assert!(out
        .corruption_what()
        .starts_with("Middle fragment without First"));
    let skip = read(&log, WalRecoveryMode::SkipAnyCorruptedRecords);
    assert_eq!(skip.records, [b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(skip.dropped_bytes, 9);
    let pit = read(&log, WalRecoveryMode::PointInTimeRecovery);
    assert!(pit.end.is_ok());
    assert_eq!(pit.records, [b"a".to_vec()]);

    // An orphan Last at the very end is a torn tail.
    let log = [a.clone(), fragment(4, b"xx", true)].concat();
    let out = read(&log, WalRecoveryMode::TolerateCorruptedTailRecords);
    assert!(out.end.is_ok());
    assert_eq!(out.records, [b"a".to_vec()]);

    // A First fragment followed by a Full one: the first record never ended.
    let log = [a.clone(), fragment(2, b"xyz", true), b.clone()].concat();
    let out = read(&log, WalRecoveryMode::TolerateCorruptedTailRecords);
    assert_eq!(out.corruption_offset(), a_len + 10);
    assert!(out
        .corruption_what()
        .contains("Full fragment, expected Middle or Last"));
    let skip = read(&log, WalRecoveryMode::SkipAnyCorruptedRecords);
    assert_eq!(skip.records, [b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(skip.offsets, [0, a_len + 10]);
    assert_eq!(skip.dropped_bytes, 10);
    let pit = read(&log, WalRecoveryMode::PointInTimeRecovery);
    assert_eq!(pit.records, [b"a".to_vec()]);
}

#[test]
fn unknown_type_and_bad_length() {
    let a = fragment(1, b"a", true);
    let b = fragment(1, b"b", true);

    // An unknown type with a valid checksum: only that fragment is skipped.
    for t in [0u8, 6, 200] {
        let log = [a.clone(), fragment(t, b"zz", true), b.clone()].concat();
        let out = read(&log, WalRecoveryMode::TolerateCorruptedTailRecords);
        assert_eq!(out.corruption_offset(), 8);
        let what = out.corruption_what();
        assert!(what.starts_with(&format!("unknown fragment type {t} (not at the tail")));
        let skip = read(&log, WalRecoveryMode::SkipAnyCorruptedRecords);
        assert_eq!(skip.records, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(skip.dropped_bytes, 9);
    }

    // A length that cannot fit in the block drops the block.
    let mut huge = fragment(1, b"", true);
    huge[4..6].copy_from_slice(&40_000u16.to_le_bytes());
    let log = two_blocks(&[a.clone(), huge, fragment(1, b"lost", true)], &b);
    let out = read(&log, WalRecoveryMode::AbsoluteConsistency);
    assert_eq!(out.corruption_offset(), 8);
    assert_eq!(
        out.corruption_what(),
        format!(
            "fragment length 40000 exceeds block ({} bytes left after the header)",
            BLOCK_SIZE - 8 - HEADER_SIZE
        )
    );
    let skip = read(&log, WalRecoveryMode::SkipAnyCorruptedRecords);
    assert_eq!(skip.records, [b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(skip.offsets, [0, BLOCK_SIZE as u64]);
    assert_eq!(skip.dropped_bytes, BLOCK_SIZE as u64 - 8);

    // Zero padding in the middle of the log is a hole.
    let log = two_blocks(std::slice::from_ref(&a), &b);
    for mode in [
        WalRecoveryMode::TolerateCorruptedTailRecords,
        WalRecoveryMode::AbsoluteConsistency,
    ] {
        let out = read(&log, mode);
        assert_eq!(out.corruption_offset(), 8);
        assert!(out
            .corruption_what()
            .contains("zero padding followed by a record"));
    }
    let pit = read(&log, WalRecoveryMode::PointInTimeRecovery);
    assert!(pit.end.is_ok());
    assert_eq!(pit.records, [b"a".to_vec()]);
    let skip = read(&log, WalRecoveryMode::SkipAnyCorruptedRecords);
    assert_eq!(skip.records, [b"a".to_vec(), b"b".to_vec()]);
}

/// A reader over `bytes` that has read up to the end (or an error).
fn read_to_end(bytes: &[u8], mode: WalRecoveryMode) -> (LogReader, Vec<Vec<u8>>, Result<()>) {
    let file = SliceFile {
        data: bytes.to_vec(),
        pos: 0,
        chunk: usize::MAX,
    };
    let mut r = LogReader::new(Box::new(file), LOG_NAME, mode);
    let mut records = Vec::new();
    let mut record = Vec::new();
    let end = loop {
        match r.read_record(&mut record) {
            Ok(true) => records.push(record.clone()),
            Ok(false) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    (r, records, end)
}

#[test]
fn predecessor_fragment() {
    let fs = MemFileSystem::new();
    let path = Path::new("/000002.log");
    let mut w = LogWriter::new(fs.create(path).unwrap());
    let p = PredecessorLog {
        number: 7,
        size: 1234,
    };
    w.add_predecessor(p).unwrap();
    assert!(w.add_predecessor(p).is_err(), "only at the start");
    w.add_record(b"a").unwrap();
    w.flush().unwrap();
    drop(w);
    let bytes = read_file_to_vec(&fs, path).unwrap();
    let first = HEADER_SIZE + PredecessorLog::ENCODED_LEN;
    assert_eq!(bytes[..first], fragment(5, &p.encode(), true)[..]);
    for mode in MODES {
        let (r, records, end) = read_to_end(&bytes, mode);
        assert!(end.is_ok(), "{mode:?}: {end:?}");
        assert_eq!(records, [b"a".to_vec()], "{mode:?}");
        assert_eq!(r.predecessor(), Some(p), "{mode:?}");
        assert_eq!(r.last_record_offset(), first as u64);
        assert_eq!(r.valid_end(), bytes.len() as u64);
        // A torn record after it: intact up to the predecessor.
        let (r, records, end) = read_to_end(&bytes[..bytes.len() - 1], mode);
        if mode != WalRecoveryMode::AbsoluteConsistency {
            assert!(end.is_ok() && records.is_empty(), "{mode:?}: {end:?}");
            assert_eq!(r.predecessor(), Some(p));
            assert_eq!(r.valid_end(), first as u64, "{mode:?}");
        }
    }

    // Anywhere but at the start, or of the wrong length, it is corrupt.
    let a = fragment(1, b"a", true);
    let b = fragment(1, b"b", true);
    let later = [a.clone(), fragment(5, &p.encode(), true), b.clone()].concat();
    let out = read(&later, WalRecoveryMode::AbsoluteConsistency);
    assert_eq!(out.corruption_offset(), 8);
    assert!(out.corruption_what().contains("not at the start"));
    let (r, records, _) = read_to_end(&later, WalRecoveryMode::SkipAnyCorruptedRecords);
    assert_eq!(records, [b"a".to_vec(), b"b".to_vec()]);
    assert_eq!(r.predecessor(), None);
    let short = [fragment(5, b"short", true), b].concat();
    let out = read(&short, WalRecoveryMode::AbsoluteConsistency);
    assert_eq!(out.corruption_offset(), 0);
    assert_eq!(
        out.corruption_what(),
        "predecessor-log fragment of 5 bytes, expected 16"
    );
}

#[test]
fn record_size_limit() {
    let records = vec![vec![1; 50], vec![2; 200], vec![3; 40_000], vec![4; 10]];
    let (bytes, offsets) = write_log(&records);
    let read_capped = |mode, max| {
        let file = SliceFile {
            data: bytes.clone(),
            pos: 0,
            chunk: usize::MAX,
        };
        let mut reader = LogReader::new(Box::new(file), LOG_NAME, mode);
        reader.set_record_bytes_max(max);
        let mut out = Vec::new();
        let mut record = Vec::new();
        let end = loop {
            match reader.read_record(&mut record) {
                Ok(true) => out.push(record.clone()),
                Ok(false) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        (out, end)
    };
    let (out, end) = read_capped(WalRecoveryMode::TolerateCorruptedTailRecords, 100);
    assert_eq!(out, records[..1]);
    match end {
        Err(Error::Corruption { offset, what, .. }) => {
            assert_eq!(offset, offsets[1]);
            assert!(
                what.contains("exceeds LOG_RECORD_SIZE_BYTES_MAX (100 bytes)"),
                "{what}"
            );
        }
        other => panic!("{other:?}"),
    }
    let (out, end) = read_capped(WalRecoveryMode::SkipAnyCorruptedRecords, 100);
    assert!(end.is_ok());
    assert_eq!(out, [records[0].clone(), records[3].clone()]);
    // A Last fragment that takes the record over the limit is reported.
    let (out, end) = read_capped(WalRecoveryMode::AbsoluteConsistency, 35_000);
    assert_eq!(out, records[..2]);
    match end {
        Err(Error::Corruption { offset, .. }) => assert_eq!(offset, BLOCK_SIZE as u64),
        other => panic!("{other:?}"),
    }
}

#[test]
fn writer_rejects_oversized_records() {
    let fs = MemFileSystem::new();
    let mut w = LogWriter::new(fs.create(Path::new("/x.log")).unwrap());
    // Zeroed allocations are not touched, so this costs no real memory.
    let big = vec![0u8; LOG_RECORD_SIZE_BYTES_MAX + 1];
    assert!(matches!(w.add_record(&big), Err(Error::InvalidArgument(_))));
    assert_eq!(w.file_size(), 0);
    w.add_record(b"ok").unwrap();
}

#[derive(Debug)]
struct FailingFile {
    appends_left: usize,
    size: u64,
}

impl WritableFile for FailingFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.appends_left == 0 {
            return Err(Error::io("append", std::io::Error::other("disk full")));
        }
        self.appends_left -= 1;
        self.size += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.size
    }
}

#[test]
fn writer_stops_after_a_failed_append() {
    let file = FailingFile {
        appends_left: 3,
        size: 0,
    };
    let mut w = LogWriter::new(Box::new(file));
    w.add_record(b"one").unwrap();
    // The header goes out, the payload fails: the file ends mid-fragment.
    assert!(w.add_record(b"two").is_err());
    assert!(w.add_record(b"three").is_err());
    assert_eq!(w.file_size(), 3 + 2 * HEADER_SIZE as u64);
}

#[test]
fn default_mode_tolerates_the_tail() {
    assert_eq!(
        WalRecoveryMode::default(),
        WalRecoveryMode::TolerateCorruptedTailRecords
    );
}

/// Reads `bytes` in every mode and checks what any reader of any input must
/// satisfy; with `originals` (the records and offsets of the log `bytes` was
/// mutated from), also that every record returned is an original one at its
/// original offset, and that only SkipAnyCorruptedRecords returns records
/// past a hole.
fn check_any_input(bytes: &[u8], chunk: usize, originals: Option<(&[Vec<u8>], &[u64])>) {
    for mode in MODES {
        let out = read_bytes(bytes, mode, chunk);
        if let Err(e) = &out.end {
            assert!(e.is_corruption(), "{mode:?}: {e}");
        }
        let returned_bytes: usize = out.records.iter().map(|r| r.len()).sum();
        assert!(returned_bytes + out.records.len() * HEADER_SIZE <= bytes.len());
        assert!(out.offsets.windows(2).all(|w| w[0] < w[1]));
        let Some((records, offsets)) = originals else {
            continue;
        };
        for (r, off) in out.records.iter().zip(&out.offsets) {
            let i = offsets.binary_search(off);
            assert!(
                i.is_ok_and(|i| &records[i] == r),
                "{mode:?}: record at {off} is not an original"
            );
        }
        if mode != WalRecoveryMode::SkipAnyCorruptedRecords {
            assert_eq!(out.offsets, offsets[..out.offsets.len()], "{mode:?}");
        }
    }
}

fn records_strategy() -> impl Strategy<Value = Vec<usize>> {
    let len = prop_oneof![0..16usize, 0..3000usize, 0..70_000usize];
    proptest::collection::vec(len, 1..8)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..3000),
        chunk in 1..100usize,
    ) {
        check_any_input(&bytes, chunk, None);
    }

    /// Streams of well-formed and malformed fragments, starting anywhere in
    /// a block, reach the reader's deeper paths.
    #[test]
    fn arbitrary_fragments_never_panic(
        lead in 0..BLOCK_SIZE,
        parts in proptest::collection::vec((0..7u8, 0..200usize, any::<bool>(), any::<u8>()), 0..20),
    ) {
        let mut bytes = vec![0u8; lead];
        if lead >= HEADER_SIZE {
            bytes = fragment(1, &vec![7; lead - HEADER_SIZE], true);
        }
        for (t, len, good_crc, fill) in parts {
            match t {
                6 => bytes.extend(std::iter::repeat_n(fill, len)),
                _ => bytes.extend(fragment(t, &vec![fill; len], good_crc)),
            }
        }
        check_any_input(&bytes, BLOCK_SIZE, None);
    }

    #[test]
    fn mutated_logs_return_only_original_records(
        seed in any::<u64>(),
        lens in records_strategy(),
        flips in proptest::collection::vec((any::<usize>(), 1..=255u8), 0..4),
        cut in proptest::option::of(any::<usize>()),
        chunk in prop_oneof![Just(usize::MAX), 1..BLOCK_SIZE],
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let records: Vec<Vec<u8>> = lens.iter().map(|&n| random_bytes(&mut rng, n)).collect();
        let (mut bytes, offsets) = write_log(&records);
        if flips.is_empty() && cut.is_none() {
            assert_all_read(&bytes, &records, &offsets);
        }
        for (at, x) in flips {
            let len = bytes.len();
            bytes[at % len] ^= x;
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        check_any_input(&bytes, chunk, Some((&records, &offsets)));
    }
}
