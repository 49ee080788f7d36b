//! Entry points for the coverage-guided fuzz targets in `fuzz/`, one per
//! decoder that meets bytes from disk. Each takes arbitrary bytes, runs the
//! decoder the way the engine runs it, and asserts what the format
//! promises: the right data or a `Corruption` error, never a panic, and a
//! bounded number of steps. Most also have a round-trip mode (chosen by the
//! first byte): the bytes describe valid contents, the project's writer
//! encodes them, and the decoder must give them back exactly.
//!
//! Not part of the API: no stability promise. `write_seeds` writes the
//! seed corpora with the project's own writers.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::env::{FileSystem, MemFileSystem};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{
    parse_internal_key, BytewiseComparator, Comparator, InternalKey, InternalKeyComparator,
    ValueKind, MAX_SEQUENCE_NUMBER,
};
use crate::sst::block::hash_index::user_key_hash;
use crate::sst::block::{Block, BlockBuilder};
use crate::sst::filter::{filter_hash, BloomFilter, BloomFilterBuilder};
use crate::sst::format::BlockHandle;
use crate::sst::index::{encode_index_value, IndexValue};
use crate::sst::properties::TableProperties;
use crate::version::VersionEdit;
use crate::wal::{LogReader, LogWriter, WalRecoveryMode};
use crate::WriteBatch;

const FILE: &str = "fuzz";

/// Panics unless `e` is the error a decoder may give for bad bytes.
fn expect_corruption(e: &Error) {
    assert!(
        e.is_corruption(),
        "bad bytes gave a non-corruption error: {e}"
    );
}

fn check<T>(r: Result<T>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            expect_corruption(&e);
            None
        }
    }
}

fn icmp() -> Arc<dyn Comparator> {
    Arc::new(InternalKeyComparator::new(Arc::new(BytewiseComparator)))
}

/// A cursor that turns fuzz bytes into structured input; reads past the
/// end give zeros, so every input describes something.
struct FuzzInput<'a> {
    data: &'a [u8],
}

impl<'a> FuzzInput<'a> {
    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }
    fn bytes(&mut self, max: usize) -> &'a [u8] {
        let n = (self.byte() as usize % (max + 1)).min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head
    }
    fn u64(&mut self) -> u64 {
        let mut v = 0u64;
        for _ in 0..8 {
            v = (v << 8) | u64::from(self.byte());
        }
        v
    }
}

/// Walks a decoded block both ways and seeks to what it found; every step
/// is bounded by the block's size (an entry takes at least three bytes).
fn walk_block(block: &Block, cmp: Arc<dyn Comparator>, internal: bool) {
    let bound = block.size() + 1;
    let mut keys = Vec::new();
    let mut it = block.iter(cmp.clone());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        assert!(n <= bound, "more entries than bytes");
        if keys.len() < 64 {
            keys.push(it.key().to_vec());
        }
        let _ = it.value();
        it.next();
    }
    check(it.status());
    let mut it = block.iter(cmp.clone());
    it.seek_to_last();
    let mut n = 0;
    while it.valid() {
        n += 1;
        assert!(n <= bound, "more entries than bytes, backwards");
        it.prev();
    }
    check(it.status());
    for k in &keys {
        let mut it = block.iter(cmp.clone());
        it.seek(k);
        check(it.status());
        if internal {
            if let Some(p) = parse_internal_key(k) {
                let mut it = block.iter(cmp.clone());
                it.seek_for_get(k, user_key_hash(p.user_key));
                check(it.status());
            }
        }
    }
}

/// A data block: any bytes as a block of internal keys (mode byte even),
/// or a block built from the described entries, with or without a hash
/// index, decoded back and looked up entry by entry (odd).
pub fn data_block(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        if let Some(block) = check(Block::new(Bytes::copy_from_slice(rest), FILE.into(), 0)) {
            walk_block(&block, icmp(), true);
        }
        return;
    }
    // Round trip: user keys with 1-3 versions each, newest first.
    let mut src = FuzzInput { data: rest };
    let mut users = BTreeMap::new();
    while !src.is_empty() && users.len() < 400 {
        let user = src.bytes(12).to_vec();
        let versions = 1 + src.byte() % 3;
        let value = src.bytes(16).to_vec();
        users.insert(user, (versions, value));
    }
    let mut entries = Vec::new();
    for (user, (versions, value)) in &users {
        for v in 0..u64::from(*versions) {
            let key = InternalKey::new(user, 1000 - v * 7, ValueKind::Value);
            entries.push((key.encoded().to_vec(), value.clone()));
        }
    }
    let restart_interval = 1 + usize::from(mode >> 2) % 16;
    let mut b = if mode & 2 != 0 {
        BlockBuilder::with_hash_index(restart_interval, 0.75)
    } else {
        BlockBuilder::new(restart_interval)
    };
    for (k, v) in &entries {
        b.add(k, v);
    }
    let block = Block::new(Bytes::copy_from_slice(b.finish()), FILE.into(), 0)
        .expect("a block the builder wrote decodes");
    let mut it = block.iter(icmp());
    it.seek_to_first();
    for (k, v) in &entries {
        assert!(it.valid(), "an entry is missing");
        assert_eq!(it.key(), k.as_slice());
        assert_eq!(it.value(), v.as_slice());
        it.next();
    }
    assert!(!it.valid(), "an entry too many");
    it.status().expect("clean block");
    for user in users.keys() {
        let target = InternalKey::new(user, MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
        let newest = InternalKey::new(user, 1000, ValueKind::Value);
        let mut it = block.iter(icmp());
        it.seek_for_get(target.encoded(), user_key_hash(user));
        it.status().expect("clean block");
        assert!(it.valid() && it.key() == newest.encoded(), "lookup missed");
    }
}

/// An index block: any bytes as a block whose values are block handles
/// with properties (even mode byte); or a handle and properties encoded
/// and decoded back (odd).
pub fn index_block(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        let Some(block) = check(Block::new(Bytes::copy_from_slice(rest), FILE.into(), 0)) else {
            return;
        };
        walk_block(&block, icmp(), true);
        let mut it = block.iter(icmp());
        it.seek_to_first();
        let mut n = 0;
        while it.valid() && n <= block.size() {
            if let Some(v) = IndexValue::decode(it.value()) {
                for tag in 0..4 {
                    let _ = v.property(tag);
                }
            }
            it.next();
            n += 1;
        }
        return;
    }
    let mut src = FuzzInput { data: rest };
    let handle = BlockHandle {
        offset: src.u64() >> (mode >> 2),
        size: src.u64() >> 20,
    };
    let mut props: Vec<(u32, &[u8])> = Vec::new();
    while !src.is_empty() && props.len() < 16 {
        let tag = u32::from(src.byte());
        if props.iter().all(|(t, _)| *t != tag) {
            props.push((tag, src.bytes(32)));
        }
    }
    let mut enc = Vec::new();
    encode_index_value(&mut enc, handle, &props);
    let v = IndexValue::decode(&enc).expect("an encoded index value decodes");
    assert_eq!(v.handle, handle);
    for (tag, bytes) in &props {
        assert_eq!(v.property(*tag), Some(*bytes));
    }
}

/// A filter: any bytes as a filter block, probed (even mode byte); or a
/// filter built over the described keys, which must all match (odd).
pub fn filter(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        if let Some(f) = check(BloomFilter::new(Bytes::copy_from_slice(rest), FILE, 0)) {
            for chunk in rest.chunks(8).take(64) {
                let _ = f.may_contain_hash(filter_hash(chunk));
            }
        }
        return;
    }
    let mut src = FuzzInput { data: rest };
    let mut keys = Vec::new();
    while !src.is_empty() && keys.len() < 2000 {
        keys.push(src.bytes(24));
    }
    let bits_per_key = f64::from(1 + (mode >> 1) % 24);
    let mut b = BloomFilterBuilder::new(bits_per_key);
    for k in &keys {
        b.add_hash(filter_hash(k));
    }
    let bytes = b.finish();
    if keys.is_empty() {
        return;
    }
    let f = BloomFilter::new(Bytes::from(bytes), FILE, 0).expect("a built filter decodes");
    for k in &keys {
        assert!(
            f.may_contain_hash(filter_hash(k)),
            "false negative for {k:?}"
        );
    }
}

/// A properties block: any bytes as a block of named properties; what
/// decodes must encode and decode to the same properties.
pub fn properties(data: &[u8]) {
    let Some(block) = check(Block::new(Bytes::copy_from_slice(data), FILE.into(), 0)) else {
        return;
    };
    let Some(p) = check(TableProperties::decode(&block)) else {
        return;
    };
    let again = Block::new(Bytes::from(p.encode()), FILE.into(), 0).expect("encoded block");
    let q = TableProperties::decode(&again).expect("encoded properties decode");
    assert_eq!(p, q, "properties changed through encode and decode");
}

/// A range-deletion block: any bytes as a block of tombstones; what
/// decodes must encode and decode to the same tombstones.
pub fn range_del_block(data: &[u8]) {
    let ucmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
    let Some(block) = check(Block::new(Bytes::copy_from_slice(data), FILE.into(), 0)) else {
        return;
    };
    let Some(ts) = check(crate::range_del::decode_block(&block, &ucmp, FILE, 0)) else {
        return;
    };
    for t in &ts {
        assert!(t.start < t.end, "a decoded range is empty");
    }
    let again = Block::new(
        Bytes::from(crate::range_del::encode_block(&ts)),
        FILE.into(),
        0,
    )
    .expect("encoded block");
    let back = crate::range_del::decode_block(&again, &ucmp, FILE, 0).expect("encoded tombstones");
    assert_eq!(ts, back, "tombstones changed through encode and decode");
}

const MODES: [WalRecoveryMode; 4] = [
    WalRecoveryMode::TolerateCorruptedTailRecords,
    WalRecoveryMode::AbsoluteConsistency,
    WalRecoveryMode::PointInTimeRecovery,
    WalRecoveryMode::SkipAnyCorruptedRecords,
];

/// Reads the log at `path` in `mode`: the records, then how it ended.
fn read_log(fs: &MemFileSystem, path: &Path, mode: WalRecoveryMode) -> (Vec<Vec<u8>>, bool) {
    let size = fs.file_size(path).unwrap_or(0) as usize;
    let file = fs.open_sequential(path).expect("the file was written");
    let mut r = LogReader::new(file, FILE, mode);
    let mut out = Vec::new();
    let mut rec = Vec::new();
    loop {
        // A record takes a 7-byte header at least.
        assert!(out.len() <= size / 7 + 1, "more records than headers");
        match r.read_record(&mut rec) {
            Ok(true) => out.push(rec.clone()),
            Ok(false) => return (out, true),
            Err(e) => {
                expect_corruption(&e);
                return (out, false);
            }
        }
    }
}

/// A write-ahead log in every recovery mode: any bytes (even mode byte);
/// or records written by the log writer, the file cut at a described
/// length, read back (odd): every mode gives a prefix of the records
/// written, all of them when nothing was cut.
pub fn wal(data: &[u8]) {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/f")).expect("mem fs");
    let path = Path::new("/f/000001.log");
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        crate::env::write_file_atomic(&fs, path, rest).expect("mem fs");
        for m in MODES {
            read_log(&fs, path, m);
        }
        return;
    }
    let mut src = FuzzInput { data: rest };
    let mut records = Vec::new();
    let mut w = LogWriter::new(fs.create(path).expect("mem fs"));
    while !src.is_empty() && records.len() < 64 {
        // Some records span blocks: repeat the described bytes.
        let unit = src.bytes(64).to_vec();
        let times = if src.byte() > 240 { 2000 } else { 1 };
        let rec = unit.repeat(times);
        w.add_record(&rec).expect("mem fs");
        records.push(rec);
    }
    drop(w);
    let full = crate::env::read_file_to_vec(&fs, path).expect("mem fs");
    let cut = if mode & 2 != 0 {
        (src.u64() as usize) % (full.len() + 1)
    } else {
        full.len()
    };
    crate::env::write_file_atomic(&fs, path, &full[..cut]).expect("mem fs");
    for m in MODES {
        let (got, _) = read_log(&fs, path, m);
        assert!(got.len() <= records.len(), "{m:?}: records invented");
        assert_eq!(got, records[..got.len()], "{m:?}: a record changed");
        if cut == full.len() {
            assert_eq!(got.len(), records.len(), "{m:?}: a record lost");
        }
    }
}

/// A manifest record: any bytes as a version edit; what decodes must
/// encode and decode to the same edit.
pub fn version_edit(data: &[u8]) {
    let Some(edit) = check(VersionEdit::decode(data, FILE, 0)) else {
        return;
    };
    let mut enc = Vec::new();
    edit.encode(&mut enc);
    let back = VersionEdit::decode(&enc, FILE, 0).expect("an encoded edit decodes");
    assert_eq!(edit, back, "edit changed through encode and decode");
}

/// A log record as a write batch: any bytes; a batch that decodes yields
/// exactly its counted records, each well formed.
pub fn write_batch(data: &[u8]) {
    let Some(batch) = check(WriteBatch::from_record(data, FILE, 0)) else {
        return;
    };
    let mut n = 0;
    for r in batch.iter_cf() {
        r.expect("from_record checked every record");
        n += 1;
        assert!(n <= data.len(), "more records than bytes");
    }
    assert_eq!(n, batch.len(), "the count disagrees with the records");
    assert_eq!(batch.data(), data);
}

/// CURRENT: any bytes as the file; what parses names a manifest that the
/// file spells exactly.
pub fn current(data: &[u8]) {
    let fs = MemFileSystem::new();
    let dir = Path::new("/f");
    fs.create_dir_all(dir).expect("mem fs");
    crate::env::write_file_atomic(&fs, &dir.join("CURRENT"), data).expect("mem fs");
    let Some(number) = check(crate::version::read_current(&fs, dir)) else {
        return;
    };
    let text = std::str::from_utf8(data).expect("a parsed CURRENT is text");
    let name = text.strip_suffix('\n').expect("ends with a newline");
    let digits = name.strip_prefix("MANIFEST-").expect("names a manifest");
    assert_eq!(digits.parse::<u64>().ok(), Some(number));
}

/// Writes a seed corpus for each target under `dir` (`dir/<target>/`),
/// made by the project's own writers.
pub fn write_seeds(dir: &Path) -> std::io::Result<()> {
    let put = |target: &str, name: &str, bytes: &[u8]| -> std::io::Result<()> {
        let d = dir.join(target);
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join(name), bytes)
    };
    let ikey = |user: &[u8], seq: u64| InternalKey::new(user, seq, ValueKind::Value);
    // Data and index blocks, with and without a hash index.
    for (i, (interval, hash)) in [(1, false), (16, false), (4, true), (16, true)]
        .into_iter()
        .enumerate()
    {
        let mut b = if hash {
            BlockBuilder::with_hash_index(interval, 0.75)
        } else {
            BlockBuilder::new(interval)
        };
        let mut ib = BlockBuilder::new(1);
        for k in 0..50u64 {
            let user = format!("key{k:06}");
            b.add(ikey(user.as_bytes(), 100 + k).encoded(), b"value");
            let mut v = Vec::new();
            encode_index_value(
                &mut v,
                BlockHandle {
                    offset: k * 4096,
                    size: 4000,
                },
                &[(1, b"p")],
            );
            ib.add(ikey(user.as_bytes(), 100 + k).encoded(), &v);
        }
        let mut block = vec![0u8];
        block.extend_from_slice(b.finish());
        put("data_block", &format!("block{i}"), &block)?;
        let mut index = vec![0u8];
        index.extend_from_slice(ib.finish());
        put("index_block", &format!("index{i}"), &index)?;
    }
    let mut f = BloomFilterBuilder::new(10.0);
    for k in 0..100u64 {
        f.add_hash(filter_hash(format!("key{k:06}").as_bytes()));
    }
    let mut filter = vec![0u8];
    filter.extend_from_slice(&f.finish());
    put("filter", "bloom", &filter)?;
    let props = TableProperties {
        num_entries: 50,
        ..TableProperties::default()
    };
    put("properties", "props", &props.encode())?;
    let ts = vec![crate::range_del::RangeTombstone {
        start: b"a".to_vec(),
        end: b"m".to_vec(),
        seq: 9,
    }];
    put(
        "range_del_block",
        "one",
        &crate::range_del::encode_block(&ts),
    )?;
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/s")).expect("mem fs");
    let log = Path::new("/s/000001.log");
    let mut w = LogWriter::new(fs.create(log).expect("mem fs"));
    let mut batch = WriteBatch::default();
    batch.put(b"k1", b"v1");
    batch.delete(b"k2");
    batch.merge(b"k3", b"m");
    batch.delete_range(b"a", b"b");
    batch.set_sequence(100);
    w.add_record(batch.data()).expect("mem fs");
    w.add_record(&vec![7u8; 40_000]).expect("mem fs");
    drop(w);
    let mut wal_seed = vec![0u8];
    wal_seed.extend_from_slice(&crate::env::read_file_to_vec(&fs, log).expect("mem fs"));
    put("wal", "log", &wal_seed)?;
    put("write_batch", "batch", batch.data())?;
    let mut edit = VersionEdit::new();
    edit.set_comparator_name("leveldb.BytewiseComparator");
    edit.set_log_number(3);
    edit.set_next_file_number(9);
    edit.set_last_sequence(77);
    edit.delete_file(1, 5);
    let mut enc = Vec::new();
    edit.encode(&mut enc);
    put("version_edit", "edit", &enc)?;
    put("current", "current", b"MANIFEST-000005\n")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// A fuzz target's body.
    type Target = fn(&[u8]);

    /// Every target, in the order of `fuzz/Cargo.toml`'s decoder targets.
    const TARGETS: [(&str, Target); 9] = [
        ("data_block", data_block),
        ("index_block", index_block),
        ("filter", filter),
        ("properties", properties),
        ("range_del_block", range_del_block),
        ("wal", wal),
        ("version_edit", version_edit),
        ("write_batch", write_batch),
        ("current", current),
    ];

    /// A fresh seed directory per test.
    fn seeds(test: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("strata-seeds-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_seeds(&dir).unwrap();
        dir
    }

    /// Each target over its seeds and over random mutations of them (bytes
    /// flipped, cut, extended; round-trip modes included), as a quick
    /// stand-in for the fuzzer on stable Rust.
    #[test]
    fn targets_hold_on_seeds_and_mutations() {
        let dir = seeds("mutations");
        let mut rng = StdRng::seed_from_u64(24);
        for (name, target) in TARGETS {
            let mut seeds = Vec::new();
            for entry in std::fs::read_dir(dir.join(name)).unwrap() {
                seeds.push(std::fs::read(entry.unwrap().path()).unwrap());
            }
            assert!(!seeds.is_empty(), "{name}: no seed");
            for seed in &seeds {
                target(seed);
            }
            for _ in 0..1000 {
                let mut input = seeds[rng.gen_range(0..seeds.len())].clone();
                match rng.gen_range(0..4) {
                    0 if !input.is_empty() => {
                        for _ in 0..rng.gen_range(1..4) {
                            let i = rng.gen_range(0..input.len());
                            input[i] ^= 1 << rng.gen_range(0..8);
                        }
                    }
                    1 => input.truncate(rng.gen_range(0..=input.len())),
                    2 => input.extend((0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>())),
                    _ => {
                        input = (0..rng.gen_range(0..300))
                            .map(|_| rng.gen::<u8>())
                            .collect();
                    }
                }
                target(&input);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The seeds decode as what they are: a failing decoder would leave the
    /// fuzzer exploring error paths only.
    #[test]
    fn seeds_decode() {
        let dir = seeds("decode");
        let read = |t: &str, n: &str| std::fs::read(dir.join(t).join(n)).unwrap();
        let block = read("data_block", "block3");
        Block::new(Bytes::copy_from_slice(&block[1..]), FILE.into(), 0).unwrap();
        let props = read("properties", "props");
        let b = Block::new(Bytes::from(props), FILE.into(), 0).unwrap();
        assert_eq!(TableProperties::decode(&b).unwrap().num_entries, 50);
        let edit = VersionEdit::decode(&read("version_edit", "edit"), FILE, 0).unwrap();
        assert_eq!(edit.log_number(), Some(3));
        let batch = WriteBatch::from_record(&read("write_batch", "batch"), FILE, 0).unwrap();
        assert_eq!(batch.len(), 4);
        let fs = MemFileSystem::new();
        fs.create_dir_all(Path::new("/f")).unwrap();
        let path = Path::new("/f/1.log");
        crate::env::write_file_atomic(&fs, path, &read("wal", "log")[1..]).unwrap();
        for m in MODES {
            assert_eq!(
                read_log(&fs, path, m),
                (vec![batch.data().to_vec(), vec![7u8; 40_000]], true)
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
