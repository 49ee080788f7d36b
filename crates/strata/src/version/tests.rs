//! Version set recovery (round trips, torn and corrupt manifests, CURRENT
//! problems, comparator mismatch, manifest rolls, failed writes) and the
//! version's queries against brute force. Random cases use fixed seeds,
//! printed on failure.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::db::filename::{current_file_name, manifest_file_name};
use crate::env::{
    read_file_to_vec, FaultInjectionFileSystem, FaultRule, FileOp, FileSystem, MemFileSystem,
};
use crate::error::{Error, Result};
use crate::key::{
    BytewiseComparator, Comparator, InternalKey, InternalKeyComparator, ReverseBytewiseComparator,
    ValueKind,
};
use crate::wal::{LogReader, WalRecoveryMode};

const DIR: &str = "/db";

fn icmp() -> InternalKeyComparator {
    InternalKeyComparator::new(Arc::new(BytewiseComparator))
}

fn ikey(user: &[u8], seq: u64) -> InternalKey {
    InternalKey::new(user, seq, ValueKind::Value)
}

fn dir() -> &'static Path {
    Path::new(DIR)
}

/// Everything recovery must reproduce.
#[derive(Debug, PartialEq)]
struct State {
    levels: Vec<Vec<(u64, NewFile)>>,
    log_number: u64,
    last_sequence: u64,
}

fn state(vs: &VersionSet) -> State {
    let v = vs.current();
    let levels = (0..NUM_LEVELS)
        .map(|l| {
            let files = v.files(l).iter();
            files.map(|f| (f.number, f.to_new_file())).collect()
        })
        .collect();
    State {
        levels,
        log_number: vs.log_number(),
        last_sequence: vs.last_sequence(),
    }
}

fn recover(fs: &MemFileSystem) -> Result<VersionSet> {
    VersionSet::recover(Arc::new(fs.clone()), dir(), icmp())
}

fn create(fs: &MemFileSystem) -> VersionSet {
    VersionSet::create_new(Arc::new(fs.clone()), dir(), icmp()).unwrap()
}

/// The records of a manifest, decoded.
fn manifest_edits(fs: &MemFileSystem, number: u64) -> Vec<VersionEdit> {
    let path = manifest_file_name(dir(), number);
    let file = fs.open_sequential(&path).unwrap();
    let mut reader = LogReader::new(file, "m", WalRecoveryMode::AbsoluteConsistency);
    let mut record = Vec::new();
    let mut edits = Vec::new();
    while reader.read_record(&mut record).unwrap() {
        edits.push(VersionEdit::decode(&record, "m", 0).unwrap());
    }
    edits
}

fn overwrite(fs: &MemFileSystem, path: &Path, data: &[u8]) {
    let mut f = fs.create(path).unwrap();
    f.append(data).unwrap();
    f.sync().unwrap();
}

/// A random edit that fits the current version: deletes some files, adds
/// one or two (level 1+ files get key ranges no other file can overlap),
/// and sometimes advances the sequence and the log number.
fn random_edit(rng: &mut StdRng, vs: &mut VersionSet) -> VersionEdit {
    let mut e = VersionEdit::new();
    let v = vs.current();
    for level in 0..NUM_LEVELS {
        for f in v.files(level) {
            if rng.gen_ratio(1, 4) {
                e.delete_file(level, f.number);
            }
        }
    }
    for _ in 0..rng.gen_range(1..=2) {
        let number = vs.new_file_number();
        let level = rng.gen_range(0..NUM_LEVELS);
        let seq = vs.last_sequence();
        let (lo, hi) = if level == 0 {
            let a = rng.gen_range(b'a'..=b'z');
            let b = rng.gen_range(a..=b'z');
            (vec![a], vec![b])
        } else {
            let lo = format!("k{number:06}").into_bytes();
            (lo.clone(), [lo, b"~".to_vec()].concat())
        };
        e.add_file(
            level,
            number,
            number * 10,
            ikey(&lo, seq),
            ikey(&hi, seq),
            seq,
            seq,
        );
    }
    if rng.gen_ratio(1, 2) {
        let seq = vs.last_sequence() + rng.gen_range(1..1000);
        vs.set_last_sequence(seq);
    }
    if rng.gen_ratio(1, 3) {
        e.set_log_number(vs.new_file_number());
    }
    e
}

#[test]
fn create_new_writes_manifest_one_and_current() {
    let fs = MemFileSystem::new();
    let vs = create(&fs);
    assert_eq!(vs.manifest_file_number(), 1);
    assert_eq!(vs.next_file_number(), 2);
    assert_eq!((vs.log_number(), vs.last_sequence()), (0, 0));
    let current = read_file_to_vec(&fs, &current_file_name(dir())).unwrap();
    assert_eq!(current, b"MANIFEST-000001\n");
    let mut expected = VersionEdit::new();
    expected.set_comparator_name("leveldb.BytewiseComparator");
    expected.set_log_number(0);
    expected.set_next_file_number(2);
    expected.set_last_sequence(0);
    assert_eq!(manifest_edits(&fs, 1), [expected]);

    let err = VersionSet::create_new(Arc::new(fs.clone()), dir(), icmp()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn recover_gives_the_state_logged() {
    for seed in 0..20u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = MemFileSystem::new();
        let mut vs = create(&fs);
        let mut numbers_before = 0;
        for round in 0..3 {
            for _ in 0..rng.gen_range(0..12) {
                let mut e = random_edit(&mut rng, &mut vs);
                vs.log_and_apply(&mut e).unwrap();
            }
            let before = state(&vs);
            let next = vs.next_file_number();
            drop(vs);
            vs = recover(&fs).unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            assert_eq!(state(&vs), before, "seed {seed} round {round}");
            assert_eq!(vs.manifest_file_number(), next, "seed {seed}");
            assert_eq!(vs.next_file_number(), next + 1, "seed {seed}");
            assert!(vs.next_file_number() > numbers_before);
            numbers_before = vs.next_file_number();
            // The new manifest holds one snapshot edit.
            assert_eq!(manifest_edits(&fs, vs.manifest_file_number()).len(), 1);
            let live = vs.live_files();
            let all: HashSet<u64> = before.levels.iter().flatten().map(|(n, _)| *n).collect();
            assert_eq!(live, all);
        }
    }
}

#[test]
fn log_and_apply_fills_in_counters() {
    let fs = MemFileSystem::new();
    let mut vs = create(&fs);
    let n = vs.new_file_number();
    vs.set_last_sequence(41);
    let mut e = VersionEdit::new();
    e.add_file(0, n, 100, ikey(b"a", 40), ikey(b"b", 41), 40, 41);
    vs.log_and_apply(&mut e).unwrap();
    assert_eq!(e.next_file_number(), Some(n + 1));
    assert_eq!(e.last_sequence(), Some(41));
    assert_eq!(e.log_number(), Some(0));
    assert_eq!(manifest_edits(&fs, 1).last(), Some(&e));
    assert_eq!(vs.current().num_files(0), 1);

    let log = vs.new_file_number();
    let mut e = VersionEdit::new();
    e.set_log_number(log);
    vs.log_and_apply(&mut e).unwrap();
    assert_eq!(vs.log_number(), log);
    vs.mark_file_number_used(100);
    assert_eq!(vs.new_file_number(), 101);
    vs.mark_file_number_used(50);
    assert_eq!(vs.next_file_number(), 102);
}

#[test]
fn invalid_edit_is_rejected_before_writing() {
    let fs = MemFileSystem::new();
    let mut vs = create(&fs);
    let size = fs.file_size(&manifest_file_name(dir(), 1)).unwrap();
    let mut e = VersionEdit::new();
    e.delete_file(1, 1);
    let err = vs.log_and_apply(&mut e).unwrap_err();
    assert!(err
        .to_string()
        .contains("edit deletes file 1 not in level 1"));
    assert_eq!(fs.file_size(&manifest_file_name(dir(), 1)).unwrap(), size);
}

#[test]
fn torn_last_edit_is_dropped() {
    let fs = MemFileSystem::new();
    let mut vs = create(&fs);
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..3 {
        let mut e = random_edit(&mut rng, &mut vs);
        vs.log_and_apply(&mut e).unwrap();
    }
    let before_last = state(&vs);
    let mut e = random_edit(&mut rng, &mut vs);
    vs.log_and_apply(&mut e).unwrap();
    let path = manifest_file_name(dir(), vs.manifest_file_number());
    drop(vs);
    let bytes = read_file_to_vec(&fs, &path).unwrap();
    for cut in [1, 5, 12] {
        overwrite(&fs, &path, &bytes[..bytes.len() - cut]);
        // Recovery would switch CURRENT away; point it back each time.
        crate::db::filename::set_current_file(&fs, dir(), 1).unwrap();
        let vs = recover(&fs).unwrap();
        assert_eq!(state(&vs), before_last, "cut {cut}");
    }
}

#[test]
fn torn_multi_block_edit_is_dropped() {
    let fs = MemFileSystem::new();
    let mut vs = create(&fs);
    let before = state(&vs);
    // One edit of about 100 KiB: fragments in four blocks.
    let mut e = VersionEdit::new();
    for i in 0..400u32 {
        let n = vs.new_file_number();
        let key = format!("{i:0>200}");
        e.add_file(
            0,
            n,
            1,
            ikey(key.as_bytes(), 1),
            ikey(key.as_bytes(), 1),
            1,
            1,
        );
    }
    vs.log_and_apply(&mut e).unwrap();
    let after = state(&vs);
    drop(vs);
    let path = manifest_file_name(dir(), 1);
    let bytes = read_file_to_vec(&fs, &path).unwrap();
    assert!(bytes.len() > 3 * 32768);
    for keep in [100, 32768 + 3, 40000, 65536, bytes.len() - 1] {
        overwrite(&fs, &path, &bytes[..keep]);
        crate::db::filename::set_current_file(&fs, dir(), 1).unwrap();
        assert_eq!(state(&recover(&fs).unwrap()), before, "kept {keep} bytes");
    }
    overwrite(&fs, &path, &bytes);
    crate::db::filename::set_current_file(&fs, dir(), 1).unwrap();
    assert_eq!(state(&recover(&fs).unwrap()), after);
}

#[test]
fn corruption_before_the_tail_is_an_error() {
    let fs = MemFileSystem::new();
    let mut vs = create(&fs);
    let mut rng = StdRng::seed_from_u64(8);
    for _ in 0..3 {
        let mut e = random_edit(&mut rng, &mut vs);
        vs.log_and_apply(&mut e).unwrap();
    }
    drop(vs);
    let path = manifest_file_name(dir(), 1);
    let mut bytes = read_file_to_vec(&fs, &path).unwrap();
    bytes[10] ^= 0x40; // inside the first record's payload
    overwrite(&fs, &path, &bytes);
    let err = recover(&fs).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("/db/MANIFEST-000001"), "{err}");
}

/// A manifest of several records (all in its first block) and the file
/// offsets of the records' payloads.
fn manifest_with_edits(fs: &MemFileSystem, edits: usize) -> (Vec<u8>, Vec<u64>) {
    let mut vs = create(fs);
    let mut rng = StdRng::seed_from_u64(10);
    for _ in 0..edits {
        let mut e = random_edit(&mut rng, &mut vs);
        vs.log_and_apply(&mut e).unwrap();
    }
    drop(vs);
    let path = manifest_file_name(dir(), 1);
    let bytes = read_file_to_vec(fs, &path).unwrap();
    let file = fs.open_sequential(&path).unwrap();
    let mut reader = LogReader::new(file, "m", WalRecoveryMode::AbsoluteConsistency);
    let mut offsets = Vec::new();
    let mut record = Vec::new();
    while reader.read_record(&mut record).unwrap() {
        offsets.push(reader.last_record_offset() + 7);
    }
    assert!(bytes.len() < 32768, "test expects one block");
    (bytes, offsets)
}

#[test]
fn damage_in_the_last_block_is_not_mistaken_for_a_torn_tail() {
    // The log reader drops the rest of a block after a checksum mismatch,
    // so without the tail check a flipped bit here would silently roll the
    // database back to the edits before it.
    let fs = MemFileSystem::new();
    let (bytes, offsets) = manifest_with_edits(&fs, 4);
    let path = manifest_file_name(dir(), 1);
    for (i, &at) in offsets.iter().enumerate().skip(1) {
        let mut damaged = bytes.clone();
        damaged[at as usize] ^= 0x01;
        overwrite(&fs, &path, &damaged);
        let err = recover(&fs).unwrap_err();
        assert!(err.is_corruption(), "record {i}: {err}");
        assert!(
            err.to_string().contains("checksum mismatch"),
            "record {i}: {err}"
        );
    }
    // Zeros after the last record (allocated, never written) are a clean end.
    let zeros = [bytes.clone(), vec![0u8; 100]].concat();
    overwrite(&fs, &path, &zeros);
    recover(&fs).unwrap();
}

#[test]
fn wrong_comparator_is_invalid_argument() {
    let fs = MemFileSystem::new();
    drop(create(&fs));
    let reverse = InternalKeyComparator::new(Arc::new(ReverseBytewiseComparator));
    let err = VersionSet::recover(Arc::new(fs.clone()), dir(), reverse).unwrap_err();
    let Error::InvalidArgument(what) = &err else {
        panic!("expected InvalidArgument, got {err}");
    };
    assert!(what.contains("leveldb.BytewiseComparator"), "{what}");
    assert!(what.contains("rocksdb.ReverseBytewiseComparator"), "{what}");
}

#[test]
fn missing_current_is_not_found() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(dir()).unwrap();
    let err = recover(&fs).unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains("/db/CURRENT"), "{err}");
}

#[test]
fn malformed_current_is_corruption() {
    let fs = MemFileSystem::new();
    drop(create(&fs));
    let big = vec![b'M'; 5000];
    let cases: [&[u8]; 8] = [
        b"",
        b"MANIFEST-000001",
        b"MANIFEST-000001\n\n",
        b"MANIFEST-00000x\n",
        b"000001.log\n",
        b"\xff\xfe\n",
        b" MANIFEST-000001\n",
        &big,
    ];
    for contents in cases {
        overwrite(&fs, &current_file_name(dir()), contents);
        let err = recover(&fs).unwrap_err();
        assert!(err.is_corruption(), "{contents:?}: {err}");
        assert!(err.to_string().contains("/db/CURRENT"), "{err}");
    }
    overwrite(&fs, &current_file_name(dir()), b"MANIFEST-000009\n");
    let err = recover(&fs).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(
        err.to_string().contains("names /db/MANIFEST-000009"),
        "{err}"
    );
    // Repaired, it opens again.
    overwrite(&fs, &current_file_name(dir()), b"MANIFEST-000001\n");
    recover(&fs).unwrap();
}

#[test]
fn manifest_missing_counters_is_corruption() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(dir()).unwrap();
    let mut e = VersionEdit::new();
    e.set_comparator_name("leveldb.BytewiseComparator");
    e.set_log_number(0);
    let mut writer = crate::wal::LogWriter::new(fs.create(&manifest_file_name(dir(), 3)).unwrap());
    let mut record = Vec::new();
    e.encode(&mut record);
    writer.add_record(&record).unwrap();
    drop(writer);
    crate::db::filename::set_current_file(&fs, dir(), 3).unwrap();
    let err = recover(&fs).unwrap_err().to_string();
    assert!(err.contains("no next file number entry"), "{err}");
}

#[test]
fn large_manifest_rolls_to_a_new_one() {
    let fs = MemFileSystem::new();
    let mut vs = create(&fs);
    vs.set_manifest_roll_bytes(1);
    let mut rng = StdRng::seed_from_u64(9);
    let mut manifests = vec![vs.manifest_file_number()];
    for _ in 0..5 {
        let mut e = random_edit(&mut rng, &mut vs);
        vs.log_and_apply(&mut e).unwrap();
        manifests.push(vs.manifest_file_number());
        // Snapshot, then the edit.
        assert_eq!(manifest_edits(&fs, vs.manifest_file_number()).len(), 2);
    }
    let distinct: HashSet<_> = manifests.iter().collect();
    assert_eq!(distinct.len(), manifests.len(), "{manifests:?}");
    let before = state(&vs);
    drop(vs);
    assert_eq!(state(&recover(&fs).unwrap()), before);
}

#[test]
fn failed_manifest_sync_installs_nothing_and_next_edit_rolls() {
    // Manifest syncs fail while the rule is in place (the bytes are
    // appended first, as when a disk write succeeds and the flush fails).
    let mem = MemFileSystem::new();
    let fs = Arc::new(FaultInjectionFileSystem::new(Arc::new(mem.clone())));
    let mut vs = VersionSet::create_new(fs.clone(), dir(), icmp()).unwrap();
    let before = vs.current();
    let n = vs.new_file_number();
    let mut failed = VersionEdit::new();
    failed.add_file(1, n, 10, ikey(b"a", 0), ikey(b"b", 0), 0, 0);
    fs.inject(FaultRule::new(&[FileOp::Sync]).path_contains("MANIFEST-"));
    let err = vs.log_and_apply(&mut failed).unwrap_err();
    assert!(err.to_string().contains("injected I/O error"), "{err}");
    assert!(Arc::ptr_eq(&before, &vs.current()), "version installed");
    // Still failing: a new manifest is tried and fails too; CURRENT stays.
    let err = vs.log_and_apply(&mut VersionEdit::new()).unwrap_err();
    assert!(err.to_string().contains("injected I/O error"), "{err}");
    let current = read_file_to_vec(&mem, &current_file_name(dir())).unwrap();
    assert_eq!(current, b"MANIFEST-000001\n");

    fs.clear_faults();
    let m = vs.new_file_number();
    let mut ok = VersionEdit::new();
    ok.add_file(2, m, 10, ikey(b"c", 0), ikey(b"d", 0), 0, 0);
    vs.log_and_apply(&mut ok).unwrap();
    assert_ne!(
        vs.manifest_file_number(),
        1,
        "the edit after a failure rolls"
    );
    let after = state(&vs);
    assert_eq!(vs.live_files(), HashSet::from([m]));
    drop(vs);
    let recovered = VersionSet::recover(fs, dir(), icmp()).unwrap();
    assert_eq!(state(&recovered), after, "the failed edit is not replayed");
}

// ---- Version queries against brute force ----

/// A random version: overlapping level 0 files and disjoint level 1 files
/// over a small alphabet, so ranges touch and share boundary keys.
fn random_version(rng: &mut StdRng) -> Version {
    let mut e = VersionEdit::new();
    let mut number = 1;
    for _ in 0..rng.gen_range(0..8) {
        let a = rng.gen_range(b'a'..=b'p');
        let b = rng.gen_range(a..=b'p');
        let seq = rng.gen_range(1..100);
        let hi = [b, rng.gen_range(b'a'..=b'c')];
        e.add_file(0, number, 1, ikey(&[a], seq), ikey(&hi, seq), seq, seq);
        number += 1;
    }
    random_level(rng, &mut e, 1, &mut number);
    let mut b = VersionBuilder::new(icmp(), &Version::empty());
    b.apply(&e, "test", 0).unwrap();
    let v = b.build();
    v.check_consistency(&icmp()).unwrap();
    v
}

fn random_bound(rng: &mut StdRng) -> Option<Vec<u8>> {
    let len = rng.gen_range(0..3);
    rng.gen_ratio(4, 5)
        .then(|| (0..len).map(|_| rng.gen_range(b'a'..=b'q')).collect())
}

fn touches(f: &FileMetaData, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
    lo.is_none_or(|lo| f.largest.user_key() >= lo)
        && hi.is_none_or(|hi| f.smallest.user_key() <= hi)
}

/// Level 0 overlap by fixed point: widen the range until stable.
fn brute_overlapping(v: &Version, level: usize, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<u64> {
    let (mut lo, mut hi) = (lo.map(<[u8]>::to_vec), hi.map(<[u8]>::to_vec));
    if level == 0 {
        loop {
            let (old_lo, old_hi) = (lo.clone(), hi.clone());
            for f in v.files(0) {
                if touches(f, lo.as_deref(), hi.as_deref()) {
                    if let Some(l) = &mut lo {
                        *l = l.clone().min(f.smallest.user_key().to_vec());
                    }
                    if let Some(h) = &mut hi {
                        *h = h.clone().max(f.largest.user_key().to_vec());
                    }
                }
            }
            if (old_lo, old_hi) == (lo.clone(), hi.clone()) {
                break;
            }
        }
    }
    let files = v.files(level).iter();
    files
        .filter(|f| touches(f, lo.as_deref(), hi.as_deref()))
        .map(|f| f.number)
        .collect()
}

#[test]
fn queries_match_brute_force() {
    let icmp = icmp();
    let user_cmp: &dyn Comparator = &BytewiseComparator;
    for seed in 0..300u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let v = random_version(&mut rng);
        for _ in 0..20 {
            let (lo, hi) = (random_bound(&mut rng), random_bound(&mut rng));
            for level in [0, 1, 2] {
                let got: Vec<u64> = v
                    .overlapping_files(level, lo.as_deref(), hi.as_deref(), user_cmp)
                    .iter()
                    .map(|f| f.number)
                    .collect();
                let want = brute_overlapping(&v, level, lo.as_deref(), hi.as_deref());
                assert_eq!(got, want, "seed {seed} level {level} {lo:?}..{hi:?}");
                let direct = v.files(level).iter();
                let any = direct
                    .clone()
                    .any(|f| touches(f, lo.as_deref(), hi.as_deref()));
                let overlap = v.overlap_in_level(level, lo.as_deref(), hi.as_deref(), user_cmp);
                assert_eq!(overlap, any, "seed {seed} level {level} {lo:?}..{hi:?}");
            }
            let user = lo.clone().unwrap_or_default();
            let target = ikey(&user, rng.gen_range(0..10));
            let got = v.find_file(&icmp, 1, target.encoded());
            let want = v
                .files(1)
                .iter()
                .position(|f| icmp.compare(f.largest.encoded(), target.encoded()).is_ge())
                .unwrap_or(v.num_files(1));
            assert_eq!(got, want, "seed {seed} find {target:?}");
        }
    }
}

#[test]
fn level_zero_expansion_is_transitive() {
    // a..c, b..f, e..h: asking for [a, a] pulls in all three.
    let mut e = VersionEdit::new();
    e.add_file(0, 1, 1, ikey(b"a", 3), ikey(b"c", 3), 3, 3);
    e.add_file(0, 2, 1, ikey(b"b", 2), ikey(b"f", 2), 2, 2);
    e.add_file(0, 3, 1, ikey(b"e", 1), ikey(b"h", 1), 1, 1);
    e.add_file(0, 4, 1, ikey(b"x", 4), ikey(b"y", 4), 4, 4);
    let mut b = VersionBuilder::new(icmp(), &Version::empty());
    b.apply(&e, "test", 0).unwrap();
    let v = b.build();
    let got: Vec<u64> = v
        .overlapping_files(0, Some(b"a"), Some(b"a"), &BytewiseComparator)
        .iter()
        .map(|f| f.number)
        .collect();
    assert_eq!(got, [1, 2, 3]);
    let all = v.overlapping_files(0, None, None, &BytewiseComparator);
    assert_eq!(all.len(), 4);
    let mut live = HashSet::new();
    add_live_files(&v, &mut live);
    assert_eq!(live, HashSet::from([1, 2, 3, 4]));
}

#[test]
fn level0_depth_counts_files_stacked_on_one_key() {
    let build = |ranges: &[(&str, &str)]| {
        let mut edit = VersionEdit::new();
        for (i, (lo, hi)) in ranges.iter().enumerate() {
            let seq = i as u64 + 1;
            edit.add_file(
                0,
                seq + 10,
                100,
                ikey(lo.as_bytes(), seq),
                ikey(hi.as_bytes(), seq),
                seq,
                seq,
            );
        }
        let base = Version::empty();
        let mut b = VersionBuilder::new(icmp(), &base);
        b.apply(&edit, "test", 0).unwrap();
        b.build()
    };
    assert_eq!(build(&[]).level0_depth(), 0);
    // One flush cut per stream: many files, depth one.
    assert_eq!(
        build(&[("a", "b"), ("c", "d"), ("e", "f")]).level0_depth(),
        1
    );
    // Closed ranges: sharing an end key is overlapping.
    assert_eq!(build(&[("a", "c"), ("c", "d")]).level0_depth(), 2);
    assert_eq!(
        build(&[("a", "z"), ("b", "c"), ("d", "e"), ("d", "d")]).level0_depth(),
        3
    );
}

/// Column families on record: created, given log numbers together (one
/// sync), dropped; a recovery sees each family's log number and files,
/// and the dropped one is gone.
#[test]
fn column_families_and_their_log_numbers_survive_recovery() {
    let fs = MemFileSystem::new();
    let mut vs = create(&fs);
    let log = vs.new_file_number();
    let a = vs.create_column_family("a", icmp(), None, log).unwrap();
    let b = vs
        .create_column_family("b", icmp(), Some("add"), log)
        .unwrap();
    let c = vs.create_column_family("c", icmp(), None, log).unwrap();
    assert!(vs.create_column_family("a", icmp(), None, log).is_err());
    let later = vs.new_file_number();
    vs.record_log_numbers(&[(a, later), (b, later)]).unwrap();
    let mut drop_c = VersionEdit::new();
    drop_c.set_column_family(c);
    drop_c.drop_column_family();
    vs.log_and_apply(&mut drop_c).unwrap();
    assert_eq!(vs.min_log_number(), 0, "the default family's log number");
    let opened: Vec<(String, InternalKeyComparator)> = ["default", "a", "b"]
        .iter()
        .map(|n| (n.to_string(), icmp()))
        .collect();
    let recovered = VersionSet::recover_cfs(Arc::new(fs.clone()), dir(), &opened, false).unwrap();
    assert_eq!(recovered.cf_log_number(a), later);
    assert_eq!(recovered.cf_log_number(b), later);
    assert_eq!(recovered.merge_operator(b), Some("add"));
    assert!(!recovered.column_families().contains_key(&c));
    // A family on record that the open leaves out is refused, by name.
    let e = VersionSet::recover_cfs(Arc::new(fs.clone()), dir(), &opened[..2], false).unwrap_err();
    assert!(
        e.to_string().contains("column families not opened: b"),
        "{e}"
    );
    // A new family's id is never one used before, even a dropped one's.
    let mut recovered = recovered;
    let d = recovered
        .create_column_family("d", icmp(), None, later)
        .unwrap();
    assert!(d > c);
}

/// Disjoint files over `a..=p` in `level`, from random bounds, with random
/// sizes; numbers from `*number` on.
fn random_level(rng: &mut StdRng, e: &mut VersionEdit, level: usize, number: &mut u64) {
    let mut bounds: Vec<u8> = (0..rng.gen_range(0..16))
        .map(|_| rng.gen_range(b'a'..=b'p'))
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    for pair in bounds.chunks(2) {
        let (lo, hi) = (pair[0], *pair.last().unwrap_or(&pair[0]));
        let size = rng.gen_range(1..1000);
        e.add_file(level, *number, size, ikey(&[lo], 5), ikey(&[hi], 5), 5, 5);
        *number += 1;
    }
}

#[test]
fn overlapping_bytes_below_match_brute_force() {
    for seed in 0..300u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut e, mut number) = (VersionEdit::new(), 1);
        random_level(&mut rng, &mut e, 1, &mut number);
        random_level(&mut rng, &mut e, 2, &mut number);
        let mut b = VersionBuilder::new(icmp(), &Version::empty());
        b.apply(&e, "test", 0).unwrap();
        let v = b.build();
        let got = v.overlapping_bytes_below(1, &BytewiseComparator);
        let want: Vec<u64> = v
            .files(1)
            .iter()
            .map(|f| {
                let (lo, hi) = (f.smallest.user_key(), f.largest.user_key());
                let below = v.files(2).iter();
                below
                    .filter(|b| touches(b, Some(lo), Some(hi)))
                    .map(|b| b.file_size)
                    .sum()
            })
            .collect();
        assert_eq!(got, want, "seed {seed}");
    }
}
