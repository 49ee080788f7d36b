//! Table round trips, hostile input and the byte-flip test.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::filter::filter_hash;
use super::format::BlockHandle;
use super::table_reader::read_ahead;
use super::*;
use crate::env::{FileSystem, MemFileSystem};
use crate::iter::InternalIterator;
use crate::key::{InternalKey, InternalKeyComparator, ReverseBytewiseComparator, ValueKind};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Writes `entries` (internal keys in order) and returns the file bytes.
fn write_table(entries: &Entries, opts: &TableOptions) -> (Vec<u8>, TableProperties) {
    let fs = MemFileSystem::new();
    let path = Path::new("/t/000001.sst");
    fs.create_dir_all(Path::new("/t")).unwrap();
    let mut b = TableBuilder::new(opts.clone(), fs.create(path).unwrap(), "000001.sst").unwrap();
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    let est = b.estimated_file_size();
    let props = b.finish().unwrap();
    b.sync().unwrap();
    assert!(b.file_size() >= est);
    (crate::env::read_file_to_vec(&fs, path).unwrap(), props)
}

fn open_bytes(bytes: Vec<u8>, cmp: Arc<dyn Comparator>) -> crate::Result<Arc<TableReader>> {
    let fs = MemFileSystem::new();
    let path = Path::new("/t/000001.sst");
    fs.create_dir_all(Path::new("/t")).unwrap();
    crate::env::write_file_atomic(&fs, path, &bytes).unwrap();
    TableReader::open(fs.open_random_access(path).unwrap(), "000001.sst", cmp).map(Arc::new)
}

fn ikey(user: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    InternalKey::new(user, seq, kind).encoded().to_vec()
}

/// Random user keys, each with one to three versions, sorted as internal keys.
fn random_entries(rng: &mut StdRng, n: usize, cmp: &Arc<dyn Comparator>) -> Entries {
    let mut users = BTreeMap::new();
    while users.len() < n {
        let len = rng.gen_range(1..24);
        let k: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect();
        users.insert(k, ());
    }
    let mut out = Vec::new();
    for user in users.into_keys() {
        for _ in 0..rng.gen_range(1..=3) {
            let kind = if rng.gen_bool(0.1) {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let vlen = match rng.gen_range(0..100) {
                0 => rng.gen_range(0..=64 * 1024),
                1..=10 => 0,
                _ => rng.gen_range(1..200),
            };
            let value = if kind == ValueKind::Deletion {
                vec![]
            } else {
                (0..vlen).map(|_| rng.gen()).collect()
            };
            out.push((ikey(&user, rng.gen_range(1..1_000_000), kind), value));
        }
    }
    let icmp = InternalKeyComparator::new(cmp.clone());
    out.sort_by(|a, b| icmp.compare(&a.0, &b.0));
    out.dedup_by(|a, b| icmp.compare(&a.0, &b.0) == std::cmp::Ordering::Equal);
    out
}

fn check_iterator(table: &Arc<TableReader>, entries: &Entries, rng: &mut StdRng) {
    let icmp = table.internal_comparator().clone();
    let mut it = table.iter();
    let mut got = Vec::new();
    it.seek_to_first();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    assert_eq!(got.len(), entries.len());
    assert!(got == *entries, "forward scan differs");

    got.clear();
    it.seek_to_last();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    got.reverse();
    assert!(got == *entries, "backward scan differs");

    for _ in 0..300 {
        let target = if rng.gen_bool(0.5) && !entries.is_empty() {
            entries[rng.gen_range(0..entries.len())].0.clone()
        } else {
            let len = rng.gen_range(0..24);
            let user: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect();
            ikey(&user, rng.gen_range(0..1_000_000), ValueKind::FOR_SEEK)
        };
        let lower = entries.partition_point(|(k, _)| icmp.compare(k, &target).is_lt());
        it.seek(&target);
        if lower < entries.len() {
            assert_eq!(it.key(), entries[lower].0.as_slice());
            assert_eq!(it.value(), entries[lower].1.as_slice());
            it.prev();
            if lower > 0 {
                assert_eq!(it.key(), entries[lower - 1].0.as_slice());
                it.next();
                assert_eq!(it.key(), entries[lower].0.as_slice());
            } else {
                assert!(!it.valid());
            }
        } else {
            assert!(!it.valid());
        }
        let upper = entries.partition_point(|(k, _)| icmp.compare(k, &target).is_le());
        it.seek_for_prev(&target);
        if upper > 0 {
            assert_eq!(it.key(), entries[upper - 1].0.as_slice());
        } else {
            assert!(!it.valid());
        }
        it.status().unwrap();
    }
}

/// Expected result of a point lookup at `seq` for `user`.
fn model_get<'a>(entries: &'a Entries, user: &[u8], seq: u64) -> Option<&'a (Vec<u8>, Vec<u8>)> {
    entries.iter().find(|(k, _)| {
        let p = crate::key::parse_internal_key(k).unwrap();
        p.user_key == user && p.sequence <= seq
    })
}

fn check_gets(table: &TableReader, entries: &Entries, rng: &mut StdRng) {
    for (k, _) in entries.iter().step_by(3) {
        let p = crate::key::parse_internal_key(k).unwrap();
        for seq in [
            p.sequence,
            p.sequence + 1,
            crate::key::MAX_SEQUENCE_NUMBER,
            p.sequence.saturating_sub(1),
        ] {
            let lookup = ikey(p.user_key, seq, ValueKind::FOR_SEEK);
            let got = table.get(&lookup, filter_hash(p.user_key)).unwrap();
            match model_get(entries, p.user_key, seq) {
                Some((mk, mv)) => {
                    let mp = crate::key::parse_internal_key(mk).unwrap();
                    let got = got.expect("present key not found");
                    assert_eq!(
                        (got.sequence, got.kind, &got.value[..]),
                        (mp.sequence, mp.kind, mv.as_slice())
                    );
                }
                None => assert!(got.is_none()),
            }
        }
    }
    for _ in 0..200 {
        let user: Vec<u8> = (0..rng.gen_range(24..30))
            .map(|_| rng.gen_range(b'a'..=b'z'))
            .collect();
        let lookup = ikey(&user, crate::key::MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
        assert!(table.get(&lookup, filter_hash(&user)).unwrap().is_none());
    }
}

#[test]
fn round_trip_every_compression_and_restart_interval() {
    let mut rng = StdRng::seed_from_u64(42);
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    for compression in crate::compression::CompressionType::ALL {
        for interval in [1, 16] {
            let entries = random_entries(&mut rng, 400, &cmp);
            let opts = TableOptions {
                compression,
                block_restart_interval: interval,
                block_size: 1024,
                ..TableOptions::default()
            };
            let (bytes, props) = write_table(&entries, &opts);
            let table = open_bytes(bytes, cmp.clone()).unwrap();
            assert_eq!(*table.properties(), props);
            assert_eq!(props.num_entries, entries.len() as u64);
            assert_eq!(props.smallest_key, entries[0].0);
            assert_eq!(props.largest_key, entries.last().unwrap().0);
            assert!(props.num_data_blocks > 10, "{props:?}");
            assert_eq!(props.compression, compression.name());
            check_iterator(&table, &entries, &mut rng);
            check_gets(&table, &entries, &mut rng);
        }
    }
}

#[test]
fn compression_shrinks_compressible_data() {
    let entries: Entries = (0..2000u32)
        .map(|i| {
            (
                ikey(format!("key{i:08}").as_bytes(), 1, ValueKind::Value),
                vec![b'x'; 100],
            )
        })
        .collect();
    let plain = write_table(
        &entries,
        &TableOptions {
            compression: CompressionType::None,
            ..Default::default()
        },
    )
    .1;
    for c in [
        CompressionType::Snappy,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ] {
        let p = write_table(
            &entries,
            &TableOptions {
                compression: c,
                ..Default::default()
            },
        )
        .1;
        assert!(
            p.data_size * 2 < plain.data_size,
            "{c}: {} vs {}",
            p.data_size,
            plain.data_size
        );
    }
}

#[test]
fn empty_table() {
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let (bytes, props) = write_table(&vec![], &TableOptions::default());
    assert_eq!(props.num_entries, 0);
    let table = open_bytes(bytes, cmp).unwrap();
    let mut it = table.iter();
    it.seek_to_first();
    assert!(!it.valid());
    it.status().unwrap();
    assert!(table
        .get(&ikey(b"a", 5, ValueKind::Value), filter_hash(b"a"))
        .unwrap()
        .is_none());
}

#[test]
fn reverse_comparator_and_no_filter() {
    let mut rng = StdRng::seed_from_u64(3);
    let cmp: Arc<dyn Comparator> = Arc::new(ReverseBytewiseComparator);
    let entries = random_entries(&mut rng, 300, &cmp);
    let opts = TableOptions {
        comparator: cmp.clone(),
        bloom_bits_per_key: 0.0,
        block_size: 512,
        ..Default::default()
    };
    let (bytes, props) = write_table(&entries, &opts);
    assert_eq!(props.filter_size, 0);
    let table = open_bytes(bytes.clone(), cmp).unwrap();
    check_iterator(&table, &entries, &mut rng);
    check_gets(&table, &entries, &mut rng);
    let err = open_bytes(bytes, Arc::new(crate::key::BytewiseComparator)).unwrap_err();
    assert!(matches!(err, crate::Error::InvalidArgument(_)), "{err}");
}

#[test]
fn builder_rejects_bad_input() {
    let fs = MemFileSystem::new();
    let mut b = TableBuilder::new(
        TableOptions::default(),
        fs.create(Path::new("/x")).unwrap(),
        "x",
    )
    .unwrap();
    b.add(&ikey(b"b", 1, ValueKind::Value), b"").unwrap();
    assert!(
        b.add(&ikey(b"a", 1, ValueKind::Value), b"").is_err(),
        "out of order"
    );
    assert!(
        b.add(&ikey(b"b", 1, ValueKind::Value), b"").is_err(),
        "duplicate"
    );
    assert!(b.add(b"short", b"").is_err(), "not an internal key");
    b.add(&ikey(b"b", 0, ValueKind::Value), b"").unwrap();
    let bad = TableOptions {
        block_size: 0,
        ..Default::default()
    };
    assert!(TableBuilder::new(bad, fs.create(Path::new("/y")).unwrap(), "y").is_err());
    let bad = TableOptions {
        bloom_bits_per_key: f64::NAN,
        ..Default::default()
    };
    assert!(TableBuilder::new(bad, fs.create(Path::new("/z")).unwrap(), "z").is_err());
}

#[test]
fn approximate_offsets_grow_with_the_key() {
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let entries: Entries = (0..5000u32)
        .map(|i| {
            (
                ikey(format!("k{i:06}").as_bytes(), 1, ValueKind::Value),
                vec![7; 50],
            )
        })
        .collect();
    let (bytes, props) = write_table(
        &entries,
        &TableOptions {
            compression: CompressionType::None,
            ..Default::default()
        },
    );
    let table = open_bytes(bytes, cmp).unwrap();
    let mut last = 0;
    for i in (0..5000u32).step_by(250) {
        let off =
            table.approximate_offset_of(&ikey(format!("k{i:06}").as_bytes(), 1, ValueKind::Value));
        assert!(off >= last);
        last = off;
    }
    let mid = table.approximate_offset_of(&ikey(b"k002500", 1, ValueKind::Value));
    assert!(
        mid > props.data_size / 3 && mid < props.data_size * 2 / 3,
        "{mid} of {}",
        props.data_size
    );
    assert_eq!(
        table.approximate_offset_of(&ikey(b"z", 1, ValueKind::Value)),
        props.data_size
    );
}

/// Every read of a table with one byte changed returns the right data or a
/// Corruption error; never a wrong value, never a panic. With the hash
/// index, flips in the buckets and their count are among those tried.
#[test]
fn every_byte_flip_is_caught_or_harmless() {
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let mut rng = StdRng::seed_from_u64(9);
    for (compression, data_block_index_type) in [
        (CompressionType::None, DataBlockIndexType::BinarySearch),
        (CompressionType::Snappy, DataBlockIndexType::BinarySearch),
        (CompressionType::None, DataBlockIndexType::BinaryAndHash),
        (CompressionType::Snappy, DataBlockIndexType::BinaryAndHash),
    ] {
        let entries: Entries = (0..40u32)
            .map(|i| {
                let v: Vec<u8> = (0..rng.gen_range(0..40)).map(|_| rng.gen()).collect();
                (
                    ikey(
                        format!("key{i:03}").as_bytes(),
                        100 + u64::from(i),
                        ValueKind::Value,
                    ),
                    v,
                )
            })
            .collect();
        let opts = TableOptions {
            block_size: 256,
            compression,
            data_block_index_type,
            ..Default::default()
        };
        let (good, props) = write_table(&entries, &opts);
        if data_block_index_type == DataBlockIndexType::BinaryAndHash {
            assert_eq!(props.num_data_blocks_with_hash_index, props.num_data_blocks);
        }
        for at in 0..good.len() {
            for x in [0x01u8, 0x80] {
                let mut bad = good.clone();
                bad[at] ^= x;
                let table = match open_bytes(bad, cmp.clone()) {
                    Ok(t) => t,
                    Err(e) => {
                        assert!(e.is_corruption(), "byte {at}: open gave {e}");
                        continue;
                    }
                };
                let mut it = table.iter();
                it.seek_to_first();
                let mut i = 0;
                while it.valid() {
                    assert_eq!(
                        (it.key(), it.value()),
                        (&entries[i].0[..], &entries[i].1[..]),
                        "byte {at}"
                    );
                    i += 1;
                    it.next();
                }
                match it.status() {
                    Ok(()) => assert_eq!(
                        i,
                        entries.len(),
                        "byte {at}: scan ended early without error"
                    ),
                    Err(e) => assert!(e.is_corruption(), "byte {at}: {e}"),
                }
                for (k, v) in &entries {
                    let user = crate::key::extract_user_key(k);
                    match table.get(&ikey(user, 1000, ValueKind::FOR_SEEK), filter_hash(user)) {
                        Ok(Some(e)) => assert_eq!(&e.value[..], &v[..], "byte {at}"),
                        Ok(None) => panic!("byte {at}: key lost without an error"),
                        Err(e) => assert!(e.is_corruption(), "byte {at}: {e}"),
                    }
                }
                check_batched_lookups(&table, &entries, &format!("byte {at}"));
            }
        }
    }
}

/// Every key of `entries` looked up in one batch (the staged seeks of
/// [`TableReader::multi_get`]): each gets its value or a `Corruption`, and
/// none is lost without an error.
fn check_batched_lookups(table: &TableReader, entries: &Entries, what: &str) {
    let lookups: Vec<(Vec<u8>, u64)> = entries
        .iter()
        .map(|(k, _)| {
            let user = crate::key::extract_user_key(k);
            (ikey(user, 1000, ValueKind::FOR_SEEK), filter_hash(user))
        })
        .collect();
    let probes: Vec<TableProbe<'_>> = lookups
        .iter()
        .map(|(lookup, hash)| TableProbe {
            lookup,
            hash: *hash,
        })
        .collect();
    let mut answered = vec![false; entries.len()];
    let mut scratch = MultiGetScratch::default();
    table.multi_get(&probes, true, &mut scratch, &mut |i, r| {
        assert!(!answered[i], "{what}: key {i} answered twice");
        answered[i] = true;
        match r {
            Ok(e) => assert_eq!(&e.value[..], &entries[i].1[..], "{what}: key {i}"),
            Err(e) => assert!(e.is_corruption(), "{what}: key {i}: {e}"),
        }
    });
    let lost = answered.iter().position(|&a| !a);
    assert_eq!(lost, None, "{what}: a key lost without an error");
}

#[test]
fn truncated_tables_are_corruption() {
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let entries: Entries = (0..50u32)
        .map(|i| (ikey(&i.to_be_bytes(), 1, ValueKind::Value), vec![1; 20]))
        .collect();
    let (good, _) = write_table(
        &entries,
        &TableOptions {
            block_size: 256,
            ..Default::default()
        },
    );
    for len in 0..good.len() {
        let err = open_bytes(good[..len].to_vec(), cmp.clone()).unwrap_err();
        assert!(err.is_corruption(), "len {len}: {err}");
        assert!(err.to_string().contains("000001.sst"), "{err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Arbitrary bytes given a valid-looking footer never panic the reader.
    #[test]
    fn arbitrary_tables_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400),
                                   meta_off in any::<u16>(), meta_len in any::<u8>(),
                                   idx_off in any::<u16>(), idx_len in any::<u8>()) {
        let mut bytes = body;
        let footer = format::Footer {
            metaindex: format::BlockHandle { offset: u64::from(meta_off) % 512, size: u64::from(meta_len) },
            index: format::BlockHandle { offset: u64::from(idx_off) % 512, size: u64::from(idx_len) },
            format_version: format::FORMAT_VERSION,
        };
        bytes.extend_from_slice(&footer.encode());
        if let Ok(t) = open_bytes(bytes, Arc::new(crate::key::BytewiseComparator)) {
            let mut it = t.iter();
            it.seek_to_first();
            let mut n = 0;
            while it.valid() && n < 1000 { it.next(); n += 1; }
            let _ = t.get(&ikey(b"k", 5, ValueKind::Value), filter_hash(b"k"));
        }
    }

    /// A real table with a few bytes overwritten (checksums bypassed by also
    /// recomputing nothing) never panics and never yields an unknown value.
    #[test]
    fn mutated_tables_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
        let entries: Entries = (0..30u32).map(|i| (ikey(format!("k{i:02}").as_bytes(), 1, ValueKind::Value), vec![i as u8; 9])).collect();
        let (mut bytes, _) = write_table(&entries, &TableOptions { block_size: 128, ..Default::default() });
        let len = bytes.len();
        for (at, x) in flips { bytes[at % len] ^= x | 1; }
        if let Ok(t) = open_bytes(bytes, Arc::new(crate::key::BytewiseComparator)) {
            let mut it = t.iter();
            it.seek_to_first();
            while it.valid() {
                prop_assert!(entries.iter().any(|(k, v)| k.as_slice() == it.key() && v.as_slice() == it.value()));
                it.next();
            }
        }
    }
}

#[test]
fn block_cache_serves_repeated_reads() {
    let (cmp, entries, bytes, _) = small_block_table(11, 300);
    let mut rng = StdRng::seed_from_u64(11);
    let (fs, path) = (MemFileSystem::new(), Path::new("/c.sst"));
    crate::env::write_file_atomic(&fs, path, &bytes).unwrap();
    let cache = Arc::new(crate::cache::BlockCache::new(1 << 20, Some(0)));
    let table = Arc::new(
        TableReader::open_with_cache(
            fs.open_random_access(path).unwrap(),
            "c.sst",
            cmp,
            Some(cache.clone()),
        )
        .unwrap(),
    );
    check_gets(&table, &entries, &mut rng);
    let misses = cache.misses();
    assert!(cache.usage() > 0 && misses > 0);
    check_gets(&table, &entries, &mut rng);
    check_iterator(&table, &entries, &mut rng);
    assert_eq!(
        cache.misses(),
        misses,
        "second pass should be served from the cache"
    );
    assert!(cache.hits() > 0);
}

/// Entries whose user keys have up to `max_versions` versions each, so that
/// some span restart points and data blocks.
fn versioned_entries(rng: &mut StdRng, n: usize, max_versions: u64) -> Entries {
    let mut users = std::collections::BTreeSet::new();
    while users.len() < n {
        let len = rng.gen_range(1..16);
        users.insert(
            (0..len)
                .map(|_| rng.gen_range(b'a'..=b'z'))
                .collect::<Vec<u8>>(),
        );
    }
    let mut out = Vec::new();
    for user in users {
        let versions = if rng.gen_bool(0.1) {
            rng.gen_range(1..=max_versions)
        } else {
            1
        };
        let mut seq = rng.gen_range(10_000..1_000_000u64);
        for _ in 0..versions {
            let kind = if rng.gen_bool(0.1) {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let value: Vec<u8> = match kind {
                ValueKind::Deletion | ValueKind::RangeDeletion => vec![],
                ValueKind::Value | ValueKind::Merge => {
                    (0..rng.gen_range(0..60)).map(|_| rng.gen()).collect()
                }
            };
            out.push((ikey(&user, seq, kind), value));
            seq -= rng.gen_range(1..100);
        }
    }
    out
}

#[test]
fn hash_index_tables_answer_like_binary_search() {
    let mut rng = StdRng::seed_from_u64(21);
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    for (compression, interval, ratio) in [
        (CompressionType::None, 1, 0.75),
        (CompressionType::Snappy, 4, 1.0),
        (CompressionType::Lz4, 16, 0.75),
        (CompressionType::None, 2, 16.0),
    ] {
        let entries = versioned_entries(&mut rng, 300, 30);
        let base = TableOptions {
            compression,
            block_restart_interval: interval,
            block_size: 1024,
            data_block_hash_table_util_ratio: ratio,
            ..TableOptions::default()
        };
        let (plain_bytes, plain_props) = write_table(&entries, &base);
        assert_eq!(plain_props.data_block_index_type, "binary_search");
        assert_eq!(plain_props.num_data_blocks_with_hash_index, 0);
        let hashed_opts = TableOptions {
            data_block_index_type: DataBlockIndexType::BinaryAndHash,
            ..base
        };
        let (bytes, props) = write_table(&entries, &hashed_opts);
        assert_eq!(props.data_block_index_type, "binary_search_and_hash");
        assert!(props.num_data_blocks > 10, "{props:?}");
        assert_eq!(props.num_data_blocks_with_hash_index, props.num_data_blocks);
        assert!(props.data_size > plain_props.data_size || compression != CompressionType::None);
        let table = open_bytes(bytes, cmp.clone()).unwrap();
        assert_eq!(*table.properties(), props);
        check_iterator(&table, &entries, &mut rng);
        check_gets(&table, &entries, &mut rng);
        // Every version of every key, through both tables.
        let plain = open_bytes(plain_bytes, cmp.clone()).unwrap();
        for (k, _) in &entries {
            let p = crate::key::parse_internal_key(k).unwrap();
            let lookup = ikey(p.user_key, p.sequence, ValueKind::FOR_SEEK);
            let hash = filter_hash(p.user_key);
            let got = table.get(&lookup, hash).unwrap();
            assert_eq!(got, plain.get(&lookup, hash).unwrap());
            assert_eq!(got.map(|e| e.sequence), Some(p.sequence));
        }
    }
}

/// Under a comparator that may equate byte-different keys, the index is
/// not written and the properties say so.
#[test]
fn hash_index_needs_a_comparator_that_compares_bytes() {
    #[derive(Debug)]
    struct CaseBlind;
    impl Comparator for CaseBlind {
        fn name(&self) -> &str {
            "test.CaseBlind"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
            a.to_ascii_lowercase().cmp(&b.to_ascii_lowercase())
        }
    }
    let mut rng = StdRng::seed_from_u64(4);
    let cmp: Arc<dyn Comparator> = Arc::new(CaseBlind);
    let entries = random_entries(&mut rng, 200, &cmp);
    let opts = TableOptions {
        comparator: cmp.clone(),
        block_size: 512,
        data_block_index_type: DataBlockIndexType::BinaryAndHash,
        ..TableOptions::default()
    };
    let (bytes, props) = write_table(&entries, &opts);
    assert_eq!(props.data_block_index_type, "binary_search");
    assert_eq!(props.num_data_blocks_with_hash_index, 0);
    let table = open_bytes(bytes, cmp).unwrap();
    check_gets(&table, &entries, &mut rng);

    // The reverse bytewise comparator compares bytes: it gets the index.
    let cmp: Arc<dyn Comparator> = Arc::new(ReverseBytewiseComparator);
    let entries = random_entries(&mut rng, 200, &cmp);
    let opts = TableOptions {
        comparator: cmp.clone(),
        ..opts
    };
    let (bytes, props) = write_table(&entries, &opts);
    assert_eq!(props.data_block_index_type, "binary_search_and_hash");
    assert_eq!(props.num_data_blocks_with_hash_index, props.num_data_blocks);
    let table = open_bytes(bytes, cmp).unwrap();
    check_iterator(&table, &entries, &mut rng);
    check_gets(&table, &entries, &mut rng);
}

/// Blocks of more than 253 restart points go without the index, in the
/// same table as blocks that have it.
/// Uncompressed size of every data block of a table written without
/// compression, in order.
fn data_block_sizes(table: &TableReader) -> Vec<u64> {
    let mut index = table.index_iter().unwrap();
    index.seek_to_first();
    let mut sizes = Vec::new();
    while index.valid() {
        sizes.push(
            super::index::IndexValue::decode(index.value())
                .unwrap()
                .handle
                .size,
        );
        index.next();
    }
    sizes
}

#[test]
fn blocks_close_short_of_the_block_size_within_the_deviation() {
    let mut rng = StdRng::seed_from_u64(9);
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    // W6's sizes, the values of varied length.
    let entries: Entries = (0..20_000u64)
        .map(|i| {
            let len = rng.gen_range(60..140);
            (ikey(&i.to_be_bytes(), 5, ValueKind::Value), vec![7; len])
        })
        .collect();
    let sizes_with = |deviation: i32| {
        let opts = TableOptions {
            block_size: 4096,
            block_size_deviation: deviation,
            compression: CompressionType::None,
            ..TableOptions::default()
        };
        let (bytes, _) = write_table(&entries, &opts);
        let table = open_bytes(bytes, cmp.clone()).unwrap();
        check_iterator(&table, &entries, &mut StdRng::seed_from_u64(1));
        check_gets(&table, &entries, &mut StdRng::seed_from_u64(2));
        let sizes = data_block_sizes(&table);
        // The last block ends with the table, whatever its size.
        sizes[..sizes.len() - 1].to_vec()
    };
    // RocksDB's default: closed at over 90% full before an entry that
    // would go past 4096 bytes.
    let sizes = sizes_with(10);
    assert!(
        sizes.iter().all(|&n| (3687..=4096).contains(&n)),
        "{sizes:?}"
    );
    // Without it: closed once at or past the block size.
    let sizes = sizes_with(0);
    assert!(
        sizes.iter().all(|&n| (4096..4096 + 200).contains(&n)),
        "{sizes:?}"
    );
    // Over 100 is rejected.
    let opts = TableOptions {
        block_size_deviation: 101,
        ..TableOptions::default()
    };
    assert!(opts.validate().is_err());
}

#[test]
fn blocks_over_253_restart_points_go_without() {
    let mut rng = StdRng::seed_from_u64(6);
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    // Big values first (about 100 entries a block), then empty ones
    // (about 400 a block).
    let entries: Entries = (0..3000u32)
        .map(|i| {
            let len = if i < 1000 { 40 } else { 0 };
            (ikey(&i.to_be_bytes(), 5, ValueKind::Value), vec![7; len])
        })
        .collect();
    let opts = TableOptions {
        block_size: 8192,
        block_restart_interval: 1,
        compression: CompressionType::None,
        data_block_index_type: DataBlockIndexType::BinaryAndHash,
        ..TableOptions::default()
    };
    let (bytes, props) = write_table(&entries, &opts);
    assert!(
        props.num_data_blocks_with_hash_index > 0
            && props.num_data_blocks_with_hash_index < props.num_data_blocks,
        "{} of {}",
        props.num_data_blocks_with_hash_index,
        props.num_data_blocks
    );
    let table = open_bytes(bytes, cmp).unwrap();
    check_iterator(&table, &entries, &mut rng);
    check_gets(&table, &entries, &mut rng);
}

#[test]
fn util_ratio_is_validated() {
    for ratio in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let opts = TableOptions {
            data_block_hash_table_util_ratio: ratio,
            ..Default::default()
        };
        let err = opts.validate().unwrap_err();
        assert!(matches!(err, crate::Error::InvalidArgument(_)), "{err}");
    }
    for ratio in [1e-3, 0.75, 1.0, 4.0] {
        let opts = TableOptions {
            data_block_hash_table_util_ratio: ratio,
            ..Default::default()
        };
        opts.validate().unwrap();
    }
}

/// Where the index and filter live decides what a lookup reads from the
/// file once the cache is emptied: with `Cache` the index and filter are
/// read again (and cached again), with `CachePinned` and `Reader` only the
/// data block. Answers are the same in every placement, and a cache too
/// small for the index still answers right.
#[test]
fn index_and_filter_placement() {
    use crate::env::{FaultInjectionFileSystem, FileOp};
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let mut rng = StdRng::seed_from_u64(21);
    let entries = random_entries(&mut rng, 400, &cmp);
    let (bytes, _) = write_table(
        &entries,
        &TableOptions {
            block_size: 512,
            bloom_bits_per_key: 10.0,
            ..Default::default()
        },
    );
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let path = Path::new("/p.sst");
    crate::env::write_file_atomic(&fs, path, &bytes).unwrap();
    let (user, _) = {
        let p = crate::key::parse_internal_key(&entries[entries.len() / 2].0).unwrap();
        (p.user_key.to_vec(), p.sequence)
    };
    let lookup = ikey(&user, crate::key::MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
    let placements = [
        (MetaPlacement::Reader, 1),
        (MetaPlacement::CachePinned, 1),
        (MetaPlacement::Cache, 3), // index, filter, data block
    ];
    for (placement, reads_after_eviction) in placements {
        let cache = Arc::new(crate::cache::BlockCache::new(1 << 20, Some(0)));
        let table = TableReader::open_placed(
            fs.open_random_access(path).unwrap(),
            "p.sst",
            cmp.clone(),
            Some(cache.clone()),
            placement,
            None,
        )
        .unwrap();
        let cached_at_open = cache.usage();
        match placement {
            MetaPlacement::Reader => assert_eq!(cached_at_open, 0),
            _ => assert!(
                cached_at_open > 0,
                "{placement:?}: index and filter charged"
            ),
        }
        let table = Arc::new(table);
        check_gets(&table, &entries, &mut rng);
        check_iterator(&table, &entries, &mut rng);
        if placement == MetaPlacement::Cache {
            // Absent keys stop at the filter, probed where it lies in the
            // cache: one cache access each, but for the filter's false
            // positives (about 1%), which go on to the index and a block.
            let accesses = || cache.hits() + cache.misses();
            let before = accesses();
            for i in 0..100 {
                let user = format!("absent-{i:03}").into_bytes();
                let lookup = ikey(&user, crate::key::MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
                assert!(table.get(&lookup, filter_hash(&user)).unwrap().is_none());
            }
            let used = accesses() - before;
            assert!(
                (100..130).contains(&used),
                "{used} cache accesses for 100 absent keys"
            );
        }
        cache.erase_if(|_| true);
        let reads = fs.stats().calls(FileOp::Read);
        let found = table.get(&lookup, filter_hash(&user)).unwrap();
        assert!(found.is_some(), "{placement:?}");
        assert_eq!(
            fs.stats().calls(FileOp::Read) - reads,
            reads_after_eviction,
            "{placement:?}: file reads for one get after the cache was emptied"
        );
        // A cache that holds almost nothing: the index and filter are read
        // again for every lookup, and every answer is still right.
        let tiny = Arc::new(crate::cache::BlockCache::new(64, Some(0)));
        let table = Arc::new(
            TableReader::open_placed(
                fs.open_random_access(path).unwrap(),
                "p.sst",
                cmp.clone(),
                Some(tiny),
                placement,
                None,
            )
            .unwrap(),
        );
        check_gets(&table, &entries, &mut rng);
        check_iterator(&table, &entries, &mut rng);
    }
}

/// An index kept by the reader decodes its search arrays for the first
/// point lookup, not at open and not for scans; one placed in the block
/// cache has them from the start, so its charge counts them.
#[test]
fn index_arrays_wait_for_the_first_point_lookup() {
    let (cmp, entries, bytes, _) = small_block_table(22, 400);
    let mut rng = StdRng::seed_from_u64(22);
    let (fs, path) = (MemFileSystem::new(), Path::new("/lazy.sst"));
    crate::env::write_file_atomic(&fs, path, &bytes).unwrap();
    for placement in [MetaPlacement::Reader, MetaPlacement::CachePinned] {
        let cache = Arc::new(crate::cache::BlockCache::new(1 << 20, Some(0)));
        let table = Arc::new(
            TableReader::open_placed(
                fs.open_random_access(path).unwrap(),
                "lazy.sst",
                cmp.clone(),
                Some(cache),
                placement,
                None,
            )
            .unwrap(),
        );
        let block_only = table.index().unwrap().block.size();
        let at_open = table.index().unwrap().memory_bytes();
        check_iterator(&table, &entries, &mut rng);
        let after_scans = table.index().unwrap().memory_bytes();
        check_gets(&table, &entries, &mut rng);
        let after_gets = table.index().unwrap().memory_bytes();
        assert!(after_gets > block_only, "{placement:?}: the arrays exist");
        if placement == MetaPlacement::Reader {
            assert_eq!(at_open, block_only, "no arrays at open");
            assert_eq!(after_scans, block_only, "scans build no arrays");
        } else {
            assert_eq!(
                at_open, after_gets,
                "{placement:?}: built and charged at open"
            );
        }
    }
}

/// Rows of 1-3 letters, each with up to 300 versions (a 2-byte suffix), and
/// some bare rows: runs of one prefix that span restart intervals and
/// blocks.
fn mvcc_entries(rng: &mut StdRng, cmp: &Arc<dyn Comparator>) -> Entries {
    let mut users = std::collections::BTreeSet::new();
    for _ in 0..rng.gen_range(5..40) {
        let len = rng.gen_range(1..=3);
        let row: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..=b'c')).collect();
        if rng.gen_bool(0.2) {
            users.insert(row.clone());
        }
        let versions = if rng.gen_bool(0.3) {
            rng.gen_range(1..300u16)
        } else {
            rng.gen_range(1..4)
        };
        for v in 0..versions {
            let mut k = row.clone();
            k.extend_from_slice(&(u16::MAX - v).to_be_bytes());
            users.insert(k);
        }
    }
    let mut out: Entries = users
        .into_iter()
        .map(|u| {
            let value = vec![b'v'; rng.gen_range(0..20)];
            (ikey(&u, rng.gen_range(1..1000), ValueKind::Value), value)
        })
        .collect();
    let icmp = InternalKeyComparator::new(cmp.clone());
    out.sort_by(|a, b| icmp.compare(&a.0, &b.0));
    out
}

fn first_two(k: &[u8]) -> &[u8] {
    &k[..2]
}

fn at_least_two(k: &[u8]) -> bool {
    k.len() >= 2
}

/// Every kind of prefix run: fixed prefixes (intervals), keys outside the
/// domain, the noop extractor and a user one (computed prefixes).
fn test_extractors() -> Vec<crate::key::SliceTransform> {
    use crate::key::SliceTransform;
    vec![
        SliceTransform::create_fixed_prefix(1),
        SliceTransform::create_fixed_prefix(2),
        SliceTransform::create_fixed_prefix(3),
        SliceTransform::create_noop(),
        SliceTransform::create("first-two", first_two, Some(at_least_two)),
    ]
}

/// From entry `i`, a forward and a backward skip of its run (by `t`) land
/// where stepping entry by entry does, and the iterator goes on from there.
fn check_skips_from(
    it: &mut TableIterator,
    entries: &Entries,
    i: usize,
    t: &crate::key::SliceTransform,
    order: Option<crate::key::BuiltinOrder>,
    ctx: &str,
) -> bool {
    use crate::iter::PrefixRun;
    let user = crate::key::extract_user_key(&entries[i].0);
    let (bytes, in_domain) = PrefixRun::bytes_of(t, user);
    let run = PrefixRun::new(t, bytes, in_domain, order);
    it.seek(&entries[i].0);
    it.skip_run_forward(&run);
    let want = (i..entries.len()).find(|&j| !run.covers(&entries[j].0));
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        want.map(|j| entries[j].0.clone()),
        "{ctx}: forward"
    );
    if let Some(j) = want {
        assert_eq!(it.value(), &entries[j].1[..], "{ctx}");
        it.prev();
        assert_eq!(it.key(), &entries[j - 1].0[..], "{ctx}: prev after forward");
    }
    it.seek(&entries[i].0);
    it.skip_run_backward(&run);
    let want = (0..=i).rev().find(|&j| !run.covers(&entries[j].0));
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        want.map(|j| entries[j].0.clone()),
        "{ctx}: backward"
    );
    if let Some(j) = want {
        assert_eq!(it.value(), &entries[j].1[..], "{ctx}");
        it.next();
        assert_eq!(
            it.key(),
            &entries[j + 1].0[..],
            "{ctx}: next after backward"
        );
    }
    // Landing on the run's first entry (what prev_prefix uses).
    it.seek(&entries[i].0);
    it.skip_run_backward_to_first(&run);
    let first = want.map_or(0, |j| j + 1);
    assert_eq!(it.key(), &entries[first].0[..], "{ctx}: first of the run");
    it.status().unwrap();
    // From there, straight to the first entry of the run before (or no
    // move where restart keys cannot tell).
    let landed = it.prev_run_first(&run);
    it.status().unwrap();
    if !landed {
        assert_eq!(it.key(), &entries[first].0[..], "{ctx}: no move");
        return false;
    }
    let last = first.checked_sub(1).expect("landed with no run before");
    let prev = run.of_internal_key(&entries[last].0);
    let start = (0..=last)
        .rev()
        .take_while(|&j| prev.covers(&entries[j].0))
        .last()
        .unwrap();
    assert_eq!(it.key(), &entries[start].0[..], "{ctx}: run before");
    assert_eq!(it.value(), &entries[start].1[..], "{ctx}");
    it.next();
    assert_eq!(it.key(), &entries[start + 1].0[..], "{ctx}: next after");
    it.prev();
    it.prev();
    if start == 0 {
        assert!(!it.valid(), "{ctx}: prev after, at the start");
    } else {
        assert_eq!(it.key(), &entries[start - 1].0[..], "{ctx}: prev after");
    }
    it.status().unwrap();
    true
}

/// The block and table iterators' fast prefix skips land exactly where
/// stepping entry by entry does, in both directions, over every kind of
/// run (fixed prefixes, keys outside the domain, computed prefixes), block
/// sizes, restart intervals and both built-in orders.
#[test]
fn prefix_run_skips_land_where_stepping_does() {
    let extractors = test_extractors();
    let mut rng = StdRng::seed_from_u64(17);
    let (mut tries, mut landed) = (0, 0);
    for round in 0..40 {
        let cmp: Arc<dyn Comparator> = if round % 2 == 0 {
            Arc::new(crate::key::BytewiseComparator)
        } else {
            Arc::new(ReverseBytewiseComparator)
        };
        let entries = mvcc_entries(&mut rng, &cmp);
        let opts = TableOptions {
            comparator: cmp.clone(),
            block_size: rng.gen_range(64..600),
            block_restart_interval: rng.gen_range(1..17),
            index_block_restart_interval: rng.gen_range(1..5),
            ..TableOptions::default()
        };
        let (bytes, _) = write_table(&entries, &opts);
        let table = open_bytes(bytes, cmp.clone()).unwrap();
        let mut it = table.iter();
        for _ in 0..200 {
            let i = rng.gen_range(0..entries.len());
            let t = &extractors[rng.gen_range(0..extractors.len())];
            let ctx = format!("round {round} {opts:?} from {i} run {}", t.name());
            tries += 1;
            landed += usize::from(check_skips_from(
                &mut it,
                &entries,
                i,
                t,
                cmp.builtin_order(),
                &ctx,
            ));
        }
    }
    // These tables restart at no prefix change: the steps straight to the
    // run before read the decoded intervals, and most of them land.
    assert!(landed * 2 > tries, "landed {landed} of {tries}");
}

/// A table written with a prefix extractor: its filter holds every
/// prefix (and whole keys unless whole-key filtering is off); a reader
/// with the same extractor finds every key and every prefix through it
/// and rules out most absent prefixes; a reader with another extractor or
/// none ignores the prefixes and still finds every key.
#[test]
fn prefix_filters_hold_every_prefix() {
    use crate::key::SliceTransform;
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let mut rng = StdRng::seed_from_u64(5);
    let entries = random_entries(&mut rng, 2000, &cmp);
    let fixed3 = Arc::new(SliceTransform::create_fixed_prefix(3));
    for whole in [true, false] {
        let opts = TableOptions {
            prefix_extractor: Some(fixed3.clone()),
            whole_key_filtering: whole,
            ..TableOptions::default()
        };
        let (bytes, props) = write_table(&entries, &opts);
        assert_eq!(props.prefix_extractor_name, "rocksdb.FixedPrefix.3");
        assert_eq!(props.whole_key_filtering, whole);
        for reader_extractor in [
            Some(fixed3.clone()),
            Some(Arc::new(SliceTransform::create_fixed_prefix(2))),
            None,
        ] {
            let fs = MemFileSystem::new();
            let path = Path::new("/t/000001.sst");
            fs.create_dir_all(Path::new("/t")).unwrap();
            crate::env::write_file_atomic(&fs, path, &bytes).unwrap();
            let same = reader_extractor
                .as_ref()
                .is_some_and(|t| t.name() == fixed3.name());
            let table = TableReader::open_placed(
                fs.open_random_access(path).unwrap(),
                "000001.sst",
                cmp.clone(),
                None,
                MetaPlacement::Reader,
                reader_extractor,
            )
            .unwrap();
            let ctx = format!("whole {whole} same extractor {same}");
            for (k, v) in &entries {
                let user = crate::key::extract_user_key(k);
                let lookup = ikey(user, crate::key::MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
                let got = table.get(&lookup, filter_hash(user)).unwrap();
                let first = entries
                    .iter()
                    .find(|(k2, _)| crate::key::extract_user_key(k2) == user)
                    .unwrap();
                assert_eq!(
                    got.map(|e| e.value.to_vec()),
                    Some(first.1.clone()),
                    "{ctx}: {k:?}"
                );
                let _ = v;
                if let Some(p) = fixed3.prefix(user) {
                    assert!(table.may_contain_prefix(p), "{ctx}: prefix {p:?}");
                }
            }
            let absent = (0..1000)
                .map(|i| format!("{i:03}").into_bytes())
                .filter(|p| table.may_contain_prefix(p))
                .count();
            if same {
                assert!(absent < 100, "{ctx}: {absent} of 1000 absent prefixes pass");
            } else {
                assert_eq!(
                    absent, 1000,
                    "{ctx}: another extractor's prefixes rule nothing out"
                );
            }
        }
    }
}

/// With a prefix extractor, every index entry whose block holds keys of
/// one prefix records that prefix; a reader with the same extractor
/// passes such blocks of the current prefix without reading them, even
/// for an extractor whose runs are not intervals (no separator search).
#[test]
fn single_prefix_blocks_are_recorded_and_passed_unread() {
    use crate::iter::PrefixRun;
    use crate::key::{extract_user_key, SliceTransform};
    let t = Arc::new(SliceTransform::create(
        "first-two",
        first_two,
        Some(at_least_two),
    ));
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    // Rows "aa".."ee", one of them with 2,000 versions, and a few short keys.
    let mut users = std::collections::BTreeSet::new();
    for a in b'a'..=b'e' {
        for b in b'a'..=b'e' {
            let n = if (a, b) == (b'c', b'c') { 2000 } else { 5 };
            for v in 0..n {
                users.insert(vec![a, b, b'-', (v / 256) as u8, (v % 256) as u8]);
            }
        }
        users.insert(vec![a]);
    }
    let entries: Entries = users
        .into_iter()
        .map(|u| (ikey(&u, 7, ValueKind::Value), b"value".to_vec()))
        .collect();
    let opts = TableOptions {
        block_size: 256,
        prefix_extractor: Some(t.clone()),
        ..TableOptions::default()
    };
    let (bytes, _) = write_table(&entries, &opts);
    let fs = MemFileSystem::new();
    let path = Path::new("/t/000001.sst");
    fs.create_dir_all(Path::new("/t")).unwrap();
    crate::env::write_file_atomic(&fs, path, &bytes).unwrap();
    let open = |cache| {
        Arc::new(
            TableReader::open_placed(
                fs.open_random_access(path).unwrap(),
                "000001.sst",
                cmp.clone(),
                cache,
                MetaPlacement::Reader,
                Some(t.clone()),
            )
            .unwrap(),
        )
    };

    // Each recorded prefix is the one every key of its block has.
    let table = open(None);
    let mut index = table.index_iter().unwrap();
    index.seek_to_first();
    let (mut single, mut blocks) = (0, 0);
    while index.valid() {
        let v = super::index::IndexValue::decode(index.value()).unwrap();
        let block = table.read_data_block(v.handle, false).unwrap();
        let mut it = table.data_block_iter(block);
        it.seek_to_first();
        let mut prefixes = std::collections::BTreeSet::new();
        while it.valid() {
            prefixes.insert(t.prefix(extract_user_key(it.key())).map(<[u8]>::to_vec));
            it.next();
        }
        let want = match (prefixes.len(), prefixes.first()) {
            (1, Some(Some(p))) => Some(p.clone()),
            _ => None,
        };
        assert_eq!(table.block_single_prefix(&v).map(<[u8]>::to_vec), want);
        single += usize::from(want.is_some());
        blocks += 1;
        index.next();
    }
    assert!(single >= 20, "{single} of {blocks} blocks hold one prefix");

    // Passing row "cc" reads a block or two, not the twenty-odd it fills.
    let cache = Arc::new(crate::cache::BlockCache::new(64 << 20, Some(0)));
    let table = open(Some(cache.clone()));
    let first = entries
        .iter()
        .position(|(k, _)| extract_user_key(k).starts_with(b"cc"))
        .unwrap();
    let after = entries
        .iter()
        .rposition(|(k, _)| extract_user_key(k).starts_with(b"cc"))
        .unwrap()
        + 1;
    let mut it = table.iter();
    it.seek(&entries[first].0);
    let run = PrefixRun::new(&t, b"cc", true, cmp.builtin_order());
    assert!(!run.is_interval());
    it.skip_run_forward(&run);
    assert_eq!(it.key(), &entries[after].0[..]);
    assert!(cache.len() <= 3, "forward: {} blocks read", cache.len());
    // And back: from the row's last entry to the entry before it.
    let cache = Arc::new(crate::cache::BlockCache::new(64 << 20, Some(0)));
    let table = open(Some(cache.clone()));
    let mut it = table.iter();
    it.seek(&entries[after - 1].0);
    it.skip_run_backward(&run);
    assert_eq!(it.key(), &entries[first - 1].0[..]);
    assert!(cache.len() <= 3, "backward: {} blocks read", cache.len());
    // A reader with another extractor reads the prefixes as unknown.
    let other = TableReader::open(
        fs.open_random_access(path).unwrap(),
        "000001.sst",
        cmp.clone(),
    )
    .unwrap();
    let mut index = other.index_iter().unwrap();
    index.seek_to_first();
    assert_eq!(
        other.block_single_prefix(&super::index::IndexValue::decode(index.value()).unwrap()),
        None
    );
}

/// Tables written with a prefix extractor restart at every prefix change
/// in blocks that follow long rows; a reader with the same extractor finds
/// the next and previous prefix there from restart keys alone, and lands
/// where stepping does, for every kind of extractor and both orders.
#[test]
fn prefix_restart_blocks_land_where_stepping_does() {
    let extractors = test_extractors();
    let mut rng = StdRng::seed_from_u64(23);
    let mut flagged_blocks = 0;
    let mut landed = 0;
    for round in 0..30 {
        let cmp: Arc<dyn Comparator> = if round % 3 == 2 {
            Arc::new(ReverseBytewiseComparator)
        } else {
            Arc::new(crate::key::BytewiseComparator)
        };
        let t = Arc::new(extractors[round % extractors.len()].clone());
        let entries = mvcc_entries(&mut rng, &cmp);
        let opts = TableOptions {
            comparator: cmp.clone(),
            block_size: rng.gen_range(128..1024),
            block_restart_interval: rng.gen_range(2..17),
            prefix_extractor: Some(t.clone()),
            ..TableOptions::default()
        };
        let (bytes, _) = write_table(&entries, &opts);
        let fs = MemFileSystem::new();
        let path = Path::new("/t/000001.sst");
        fs.create_dir_all(Path::new("/t")).unwrap();
        crate::env::write_file_atomic(&fs, path, &bytes).unwrap();
        let table = Arc::new(
            TableReader::open_placed(
                fs.open_random_access(path).unwrap(),
                "000001.sst",
                cmp.clone(),
                None,
                MetaPlacement::Reader,
                Some(t.clone()),
            )
            .unwrap(),
        );
        let mut index = table.index_iter().unwrap();
        index.seek_to_first();
        while index.valid() {
            let v = super::index::IndexValue::decode(index.value()).unwrap();
            flagged_blocks += usize::from(table.block_prefix_restarts(&v));
            index.next();
        }
        let mut it = table.iter();
        for _ in 0..200 {
            let i = rng.gen_range(0..entries.len());
            let ctx = format!("round {round} {} from {i}", t.name());
            landed += usize::from(check_skips_from(
                &mut it,
                &entries,
                i,
                &t,
                cmp.builtin_order(),
                &ctx,
            ));
        }
    }
    assert!(
        flagged_blocks > 50,
        "{flagged_blocks} blocks restart at prefix changes"
    );
    // The direct step to the run before is taken often (in blocks that
    // restart at prefix changes), and lands right (checked above).
    assert!(landed > 1000, "prev_run_first landed {landed} times");
}

/// A file that counts its reads.
#[derive(Debug)]
struct CountingFile {
    inner: Arc<dyn crate::env::RandomAccessFile>,
    reads: std::sync::atomic::AtomicUsize,
}

impl crate::env::RandomAccessFile for CountingFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> crate::Result<()> {
        self.reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.read_exact_at(offset, buf)
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
}

/// `bytes` as a table whose file counts its reads.
fn counting_table(
    bytes: &[u8],
    cmp: &Arc<dyn Comparator>,
) -> (Arc<TableReader>, Arc<CountingFile>) {
    let fs = MemFileSystem::new();
    let path = Path::new("/t/000001.sst");
    fs.create_dir_all(Path::new("/t")).unwrap();
    crate::env::write_file_atomic(&fs, path, bytes).unwrap();
    let file = Arc::new(CountingFile {
        inner: fs.open_random_access(path).unwrap(),
        reads: Default::default(),
    });
    let table = Arc::new(TableReader::open(file.clone(), "000001.sst", cmp.clone()).unwrap());
    (table, file)
}

/// Scans `it` from the first entry: the entries, and the reads of `file`
/// the scan made.
fn counted_scan(mut it: TableIterator, file: &CountingFile) -> (Entries, usize) {
    let before = file.reads.load(std::sync::atomic::Ordering::Relaxed);
    let got = scan_from_first(&mut it);
    (
        got,
        file.reads.load(std::sync::atomic::Ordering::Relaxed) - before,
    )
}

/// Every entry of `it` from the first, checking that it ends without error.
fn scan_from_first(it: &mut TableIterator) -> Entries {
    let mut got = Vec::new();
    it.seek_to_first();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    got
}

/// 3,000 random entries (from `seed`) written in 512-byte data blocks:
/// a table of a few hundred blocks, for the scan and index-sampling tests.
fn small_block_table(
    seed: u64,
    n: usize,
) -> (Arc<dyn Comparator>, Entries, Vec<u8>, TableProperties) {
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let mut rng = StdRng::seed_from_u64(seed);
    let entries = random_entries(&mut rng, n, &cmp);
    let opts = TableOptions {
        block_size: 512,
        ..TableOptions::default()
    };
    let (bytes, props) = write_table(&entries, &opts);
    (cmp, entries, bytes, props)
}

/// A scan reads ahead once its block reads are sequential: far fewer reads
/// than blocks, the same entries both ways, and a damaged block inside a
/// read-ahead buffer is still Corruption.
#[test]
fn scans_read_ahead_and_still_check_every_block() {
    let (cmp, entries, mut bytes, props) = small_block_table(31, 3000);
    assert!(props.num_data_blocks > 100, "{props:?}");
    let (table, file) = counting_table(&bytes, &cmp);
    let (got, reads) = counted_scan(table.iter_opt(false), &file);
    assert_eq!(got, entries);
    assert!(
        reads * 10 < props.num_data_blocks as usize,
        "{reads} reads for {} blocks",
        props.num_data_blocks
    );

    // A flipped byte in a block deep in the table: the scan stops there.
    let at = (props.data_size / 2) as usize;
    bytes[at] ^= 0x40;
    let (table, _) = counting_table(&bytes, &cmp);
    stops_at_corruption(table.iter_opt(false), entries.len());
}

/// Scans `it` from the first entry: it stops with `Corruption` before
/// `entries` entries. The iterator, for more checks.
fn stops_at_corruption(mut it: TableIterator, entries: usize) -> TableIterator {
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert!(n < entries, "the scan went past the damaged block");
    assert!(it.status().unwrap_err().is_corruption());
    it
}

/// A compaction's fixed readahead (`compaction_readahead_size`) reads
/// ahead from the first block: a whole small table in one data read,
/// a larger one in about size / readahead reads, the same entries.
#[test]
fn fixed_readahead_reads_ahead_from_the_first_block() {
    let (cmp, entries, bytes, props) = small_block_table(32, 3000);
    let (table, file) = counting_table(&bytes, &cmp);
    for (ahead, most) in [
        (props.data_size * 2, 1),
        (props.data_size / 4 + 1, 5),
        (0, props.num_data_blocks as usize / 10),
    ] {
        let (got, reads) = counted_scan(table.iter_opt(false).with_readahead(ahead), &file);
        assert_eq!(got, entries);
        assert!(
            reads <= most,
            "readahead {ahead}: {reads} data reads, at most {most} expected"
        );
        if ahead == 0 {
            assert!(
                reads > 1,
                "the adaptive readahead starts after sequential reads"
            );
        }
    }
}

/// An iterator that ran off its table's end holds no readahead buffer: a
/// compaction keeps its finished inputs' iterators to the end of the merge,
/// and each would otherwise keep its last window (256 KiB by default).
#[test]
fn an_exhausted_iterator_frees_its_readahead() {
    let (cmp, entries, bytes, props) = small_block_table(32, 3000);
    let (table, _) = counting_table(&bytes, &cmp);
    for ahead in [0, props.data_size / 4 + 1] {
        let mut it = table.iter_opt(false).with_readahead(ahead);
        it.seek_to_first();
        let mut n = 0;
        let mut most = 0;
        while it.valid() {
            most = most.max(it.readahead_held());
            n += 1;
            it.next();
        }
        assert_eq!(n, entries.len());
        assert!(most > 0, "readahead {ahead}: never read ahead");
        assert_eq!(
            it.readahead_held(),
            0,
            "readahead {ahead}: kept after the end"
        );
        // A new scan reads ahead again and gives the same entries.
        it.seek_to_first();
        let mut again = 0;
        while it.valid() {
            again += 1;
            it.next();
        }
        assert_eq!(again, entries.len());
        assert!(it.status().is_ok());
    }
}

/// Key anchors: at most the number asked for (and about that many),
/// ascending, spread over the whole table.
#[test]
fn key_anchors_sample_the_index_evenly() {
    let (cmp, entries, bytes, props) = small_block_table(33, 3000);
    let blocks = props.num_data_blocks as usize;
    assert!(blocks > 100, "{props:?}");
    let (table, _) = counting_table(&bytes, &cmp);
    let table = crate::sst::table::Table::Block(table);
    let user = |k: &[u8]| crate::key::extract_user_key(k).to_vec();
    for max in [1, 8, 128, 100_000] {
        let anchors = table.key_anchors(max).unwrap();
        let parts = max.min(blocks);
        assert!(
            anchors.len() <= parts && anchors.len() * 2 >= parts,
            "{max}: {} anchors for {parts} parts",
            anchors.len()
        );
        assert!(
            anchors.windows(2).all(|w| w[0] < w[1]),
            "{max}: not ascending"
        );
        // The last anchor lies in the table's second half.
        let last = anchors.last().unwrap();
        let at = entries.partition_point(|(k, _)| user(k) < *last);
        assert!(
            at * 2 >= entries.len(),
            "{max}: last anchor at entry {at} of {}",
            entries.len()
        );
    }
}

/// Keys ordered by length first, then bytes: a user comparator with no
/// built-in order (the index searches go through the trait object).
#[derive(Debug)]
struct LengthFirst;

impl Comparator for LengthFirst {
    fn name(&self) -> &str {
        "test.LengthFirst"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        a.len().cmp(&b.len()).then_with(|| a.cmp(b))
    }
}

/// A table's index separators are user keys unless a user key has entries
/// in two data blocks; then the whole index is of internal keys. Either
/// way the table answers gets, seeks, scans and batched lookups as its
/// entries say, and the user-key separators separate the blocks' user keys.
#[test]
fn index_separators_are_user_keys_unless_a_user_key_spans_blocks() {
    use crate::key::extract_user_key;
    let mut rng = StdRng::seed_from_u64(59);
    let cmps: [Arc<dyn Comparator>; 3] = [
        Arc::new(crate::key::BytewiseComparator),
        Arc::new(ReverseBytewiseComparator),
        Arc::new(LengthFirst),
    ];
    let (mut user_tables, mut internal_tables) = (0, 0);
    for round in 0..24 {
        let cmp = cmps[round % cmps.len()].clone();
        let icmp = InternalKeyComparator::new(cmp.clone());
        // Even rounds: one to three versions per key (one in every other
        // of them), blocks of 4 KiB. Odd rounds: some keys with up to 60
        // versions, blocks of ~128 bytes.
        let mut entries = if round % 2 == 0 {
            random_entries(&mut rng, 300, &cmp)
        } else {
            versioned_entries(&mut rng, 300, 60)
        };
        entries.sort_by(|a, b| icmp.compare(&a.0, &b.0));
        if round % 4 == 0 {
            // One version per key: no user key can span blocks.
            entries.dedup_by(|a, b| extract_user_key(&a.0) == extract_user_key(&b.0));
        }
        let opts = TableOptions {
            comparator: cmp.clone(),
            block_size: if round % 2 == 0 { 4096 } else { 128 },
            block_restart_interval: [1, 4, 16][round % 3],
            index_block_restart_interval: if round % 4 == 3 { 4 } else { 1 },
            ..TableOptions::default()
        };
        let (bytes, props) = write_table(&entries, &opts);
        // What the data blocks hold: does a user key span two of them?
        let table = open_bytes(bytes.clone(), cmp.clone()).unwrap();
        let mut blocks: Vec<Vec<Vec<u8>>> = Vec::new();
        let mut index = table.index_iter().unwrap();
        index.seek_to_first();
        let mut separators = Vec::new();
        while index.valid() {
            let v = super::index::IndexValue::decode(index.value()).unwrap();
            let mut it = table.data_block_iter(table.read_data_block(v.handle, false).unwrap());
            it.seek_to_first();
            let mut keys = Vec::new();
            while it.valid() {
                keys.push(extract_user_key(it.key()).to_vec());
                it.next();
            }
            blocks.push(keys);
            separators.push(index.key().to_vec());
            index.next();
        }
        let spans = blocks
            .windows(2)
            .any(|w| cmp.compare(w[0].last().unwrap(), &w[1][0]).is_eq());
        let what = format!("round {round} ({} blocks)", blocks.len());
        assert!(blocks.len() > 3, "{what}");
        assert_eq!(props.index_key_is_user_key, !spans, "{what}");
        assert_eq!(
            table.footer().format_version,
            if spans { 1 } else { 2 },
            "{what}"
        );
        if spans {
            internal_tables += 1;
        } else {
            user_tables += 1;
            for (i, sep) in separators.iter().enumerate() {
                assert!(
                    cmp.compare(blocks[i].last().unwrap(), sep).is_le(),
                    "{what}: {i}"
                );
                if let Some(next) = blocks.get(i + 1) {
                    assert!(cmp.compare(sep, &next[0]).is_lt(), "{what}: {i}");
                }
            }
        }
        check_iterator(&table, &entries, &mut rng);
        check_gets(&table, &entries, &mut rng);
        // One batch: every user key (at a random sequence number) and some
        // absent ones, ascending.
        let mut users: Vec<Vec<u8>> = entries
            .iter()
            .map(|(k, _)| extract_user_key(k).to_vec())
            .collect();
        for _ in 0..50 {
            users.push((0..rng.gen_range(1..20)).map(|_| rng.gen()).collect());
        }
        let mut lookups: Vec<Vec<u8>> = users
            .iter()
            .map(|u| ikey(u, rng.gen_range(0..1_000_000), ValueKind::FOR_SEEK))
            .collect();
        lookups.sort_by(|a, b| icmp.compare(a, b));
        lookups.dedup_by(|a, b| extract_user_key(a) == extract_user_key(b));
        let probes: Vec<TableProbe<'_>> = lookups
            .iter()
            .map(|l| TableProbe {
                lookup: l,
                hash: filter_hash(extract_user_key(l)),
            })
            .collect();
        let mut got = vec![None; probes.len()];
        let mut scratch = MultiGetScratch::default();
        table.multi_get(&probes, false, &mut scratch, &mut |i, r| {
            assert!(got[i].is_none(), "{what}: probe {i} answered twice");
            let e = r.unwrap();
            got[i] = Some((e.sequence, e.value.to_vec()));
        });
        for (i, l) in lookups.iter().enumerate() {
            let p = crate::key::parse_internal_key(l).unwrap();
            let want = model_get(&entries, p.user_key, p.sequence).map(|(mk, mv)| {
                (
                    crate::key::parse_internal_key(mk).unwrap().sequence,
                    mv.clone(),
                )
            });
            assert_eq!(got[i], want, "{what}: batched probe {i}");
        }
        // Every present user key at every sequence number around its
        // versions, as a get finds it.
        for (k, _) in &entries {
            let p = crate::key::parse_internal_key(k).unwrap();
            for seq in [p.sequence, p.sequence.saturating_sub(1)] {
                let lookup = ikey(p.user_key, seq, ValueKind::FOR_SEEK);
                let got = table.get(&lookup, filter_hash(p.user_key)).unwrap();
                let want = model_get(&entries, p.user_key, seq);
                assert_eq!(
                    got.map(|g| (g.sequence, g.value.to_vec())),
                    want.map(|(mk, mv)| {
                        (
                            crate::key::parse_internal_key(mk).unwrap().sequence,
                            mv.clone(),
                        )
                    }),
                    "{what}"
                );
            }
        }
        // The approximate offset of a key is its block's.
        let first = &entries[entries.len() / 2].0;
        assert!(
            table.approximate_offset_of(first) < props.data_size,
            "{what}"
        );
    }
    assert!(
        user_tables >= 6 && internal_tables >= 6,
        "{user_tables} / {internal_tables}"
    );
}

/// Table `bytes` written to a fresh directory under the temporary one
/// (named after `tag`) and opened with direct I/O: the directory, the
/// file's path and the file; None (and nothing left behind) where the
/// file system refuses `O_DIRECT`.
fn direct_table_file(
    tag: &str,
    bytes: &[u8],
) -> Option<(
    std::path::PathBuf,
    std::path::PathBuf,
    Arc<dyn crate::env::RandomAccessFile>,
)> {
    let dir = std::env::temp_dir().join(format!("strata-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.sst");
    std::fs::write(&path, bytes).unwrap();
    match crate::env::PosixFileSystem::new().open_random_access_direct(&path) {
        Ok(file) => Some((dir, path, file)),
        Err(crate::Error::NotSupported(what)) => {
            eprintln!("no O_DIRECT in the temporary directory: {what}");
            std::fs::remove_dir_all(&dir).unwrap();
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Blocks read ahead at once for a direct-I/O reader (`read_ahead`) land
/// in the block cache whole: back-to-back blocks read as one span, spans
/// split where blocks are left out; every lookup afterwards is served from
/// the cache without one more miss.
#[test]
fn blocks_read_ahead_at_once_are_cached_whole() {
    let (cmp, entries, bytes, _) = small_block_table(13, 300);
    let Some((dir, _, file)) = direct_table_file("read-ahead", &bytes) else {
        return;
    };
    let cache = Arc::new(crate::cache::BlockCache::new(1 << 20, Some(0)));
    let table =
        Arc::new(TableReader::open_with_cache(file, "t.sst", cmp, Some(cache.clone())).unwrap());
    assert!(table.reads_blocks_directly());
    let index = table.index().unwrap();
    let array = index.array().unwrap();
    let handles: Vec<BlockHandle> = (0..array.len()).map(|i| array.handle(i)).collect();
    assert!(handles.len() >= 10, "{} blocks", handles.len());
    // Two passes: every third block left out (spans of two), then the
    // rest (the left-out ones, apart). Each asked-for block is missing.
    for pass in 0..2 {
        let blocks: Vec<(&TableReader, BlockHandle)> = handles
            .iter()
            .enumerate()
            .filter(|(i, _)| (i % 3 == 2) == (pass == 1))
            .map(|(_, &h)| {
                assert!(table.reads_directly(h), "pass {pass}: {h:?} cached already");
                (&*table, h)
            })
            .collect();
        read_ahead(&blocks, &mut Vec::new());
    }
    let misses = cache.misses();
    let mut rng = StdRng::seed_from_u64(13);
    check_gets(&table, &entries, &mut rng);
    check_iterator(&table, &entries, &mut rng);
    assert_eq!(cache.misses(), misses, "every block was read ahead");
    drop(index);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Point lookups of a batch planned for reading ahead (`plan_get`): two
/// keys in one block plan it once and count one cache miss; a key in
/// another block plans that one.
#[test]
fn a_block_two_planned_keys_share_is_planned_once() {
    let (cmp, entries, bytes, _) = small_block_table(17, 300);
    let Some((dir, _, file)) = direct_table_file("plan-get", &bytes) else {
        return;
    };
    let cache = Arc::new(crate::cache::BlockCache::new(1 << 20, Some(0)));
    let table =
        Arc::new(TableReader::open_with_cache(file, "t.sst", cmp, Some(cache.clone())).unwrap());
    let plan = |reads: &mut SeekReads, i: usize| {
        let lookup = &entries[i].0;
        let hash = filter_hash(crate::key::extract_user_key(lookup));
        table.plan_get(lookup, hash, reads);
    };
    let misses = cache.misses();
    let mut reads = SeekReads::default();
    plan(&mut reads, 0);
    plan(&mut reads, 1);
    assert_eq!(reads.len(), 1, "two keys of the first block");
    assert_eq!(cache.misses(), misses + 1);
    plan(&mut reads, entries.len() - 1);
    assert_eq!(reads.len(), 2, "a key of the last block");
    assert_eq!(cache.misses(), misses + 2);
    reads.read_all();
    assert!(reads.is_empty());
    drop(table);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A table of 3,000 entries with compressible values (repeated words) in
/// 512-byte blocks stored with snappy.
fn compressible_table() -> (Arc<dyn Comparator>, Entries, Vec<u8>, TableProperties) {
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let entries: Entries = (0..3000u32)
        .map(|i| {
            let value = format!("value of {i} ").repeat(1 + i as usize % 9);
            (
                ikey(format!("key{i:06}").as_bytes(), 7, ValueKind::Value),
                value.into_bytes(),
            )
        })
        .collect();
    let opts = TableOptions {
        block_size: 512,
        compression: crate::compression::CompressionType::Snappy,
        ..TableOptions::default()
    };
    let (bytes, props) = write_table(&entries, &opts);
    (cmp, entries, bytes, props)
}

/// A block read ahead is cached as stored checked but not decompressed.
/// One whose checksum holds but whose contents do not decompress (its
/// snappy length rewritten past the block size limit, the checksum made
/// again) is `Corruption` naming the file and the block's offset when a
/// get reaches it, every time, never an answer; the bad copy leaves the
/// cache after each failure, and the other blocks still answer.
#[test]
fn a_stored_block_that_does_not_decompress_is_corruption() {
    let (cmp, entries, mut bytes, _) = compressible_table();
    let handle = {
        let plain = open_bytes(bytes.clone(), cmp.clone()).unwrap();
        let index = plain.index().unwrap();
        index.array().unwrap().handle(3)
    };
    let (at, n) = (handle.offset as usize, handle.size as usize);
    assert_eq!(
        bytes[at + n],
        crate::compression::CompressionType::Snappy as u8
    );
    bytes[at..at + 5].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    let crc = crate::util::crc::mask(crate::util::crc::crc32c(&bytes[at..at + n + 1]));
    bytes[at + n + 1..at + n + 5].copy_from_slice(&crc.to_le_bytes());
    let Some((dir, _, file)) = direct_table_file("stored-corrupt", &bytes) else {
        return;
    };
    let cache = Arc::new(crate::cache::BlockCache::new(1 << 24, Some(0)));
    let table = TableReader::open_with_cache(file, "t.sst", cmp, Some(cache.clone()))
        .unwrap()
        .with_stored_blocks_cached(true);
    let (mut errors, mut answers) = (0, 0);
    for round in 0..2 {
        read_ahead(&[(&table, handle)], &mut Vec::new());
        assert!(
            !table.reads_directly(handle),
            "round {round}: cached as stored"
        );
        for (k, v) in &entries {
            let user = crate::key::extract_user_key(k);
            let lookup = ikey(user, crate::key::MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
            match table.get(&lookup, filter_hash(user)) {
                Ok(got) => {
                    let got = got.expect("present key not found");
                    assert_eq!(got.value[..], v[..], "round {round}");
                    answers += 1;
                }
                Err(e) => {
                    assert!(
                        matches!(&e, crate::Error::Corruption { file, offset, .. }
                            if file == "t.sst" && *offset == handle.offset),
                        "{e}"
                    );
                    errors += 1;
                }
            }
        }
        assert!(
            table.reads_directly(handle),
            "round {round}: the bad copy is gone"
        );
    }
    assert!(
        errors >= 2 && answers > errors,
        "{errors} errors, {answers} answers"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A table read with direct I/O that caches its data blocks as stored
/// (`with_stored_blocks_cached`): the cache holds them compressed, in
/// well under the memory they take decompressed; gets and scans answer as
/// the entries say, the second time from the cache alone, and blocks read
/// ahead at once are cached as stored too. Without the setting, or without
/// direct I/O, blocks are cached decompressed as before.
#[test]
fn blocks_cached_as_stored_answer_as_decompressed_ones() {
    let (cmp, entries, bytes, props) = compressible_table();
    assert!(props.num_data_blocks > 100, "{props:?}");
    let Some((dir, path, file)) = direct_table_file("stored", &bytes) else {
        return;
    };
    let fs = crate::env::PosixFileSystem::new();
    let mut usage = Vec::new();
    // (direct I/O, stored setting, blocks read ahead first)
    let runs = [
        (true, false, false),
        (true, true, false),
        (true, true, true),
        (false, true, false),
    ];
    for (direct, stored, ahead) in runs {
        let what = format!("direct {direct}, stored {stored}, read ahead {ahead}");
        let file = if direct {
            file.clone()
        } else {
            fs.open_random_access(&path).unwrap()
        };
        let cache = Arc::new(crate::cache::BlockCache::new(1 << 24, Some(0)));
        let table = TableReader::open_with_cache(file, "t.sst", cmp.clone(), Some(cache.clone()))
            .unwrap()
            .with_stored_blocks_cached(stored);
        let table = Arc::new(table);
        if ahead {
            let index = table.index().unwrap();
            let array = index.array().unwrap();
            let blocks: Vec<(&TableReader, BlockHandle)> = (0..array.len())
                .map(|i| (&*table, array.handle(i)))
                .collect();
            read_ahead(&blocks, &mut Vec::new());
        }
        let mut rng = StdRng::seed_from_u64(5);
        for pass in 0..2 {
            let misses = cache.misses();
            check_gets(&table, &entries, &mut rng);
            check_iterator(&table, &entries, &mut rng);
            if pass == 1 || ahead {
                assert_eq!(cache.misses(), misses, "{what}: pass {pass} missed");
            }
        }
        usage.push(cache.usage());
    }
    // Stored blocks take well under what decompressed ones do, however
    // they came to the cache; the setting does nothing without direct I/O.
    assert!(usage[1] * 4 < usage[0] * 3, "{usage:?}");
    assert_eq!(usage[2], usage[1], "{usage:?}");
    assert_eq!(usage[3], usage[0], "{usage:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A table of `n` entries from `seed` in 512-byte blocks, at least three
/// readahead windows of data.
fn multi_window_table(
    seed: u64,
    n: usize,
) -> (Arc<dyn Comparator>, Entries, Vec<u8>, TableProperties) {
    let t = small_block_table(seed, n);
    assert!(
        t.3.data_size > 3 * super::readahead::READAHEAD_BYTES,
        "{} bytes of data",
        t.3.data_size
    );
    t
}

/// A scan whose next windows are read in the background gives the same
/// entries, takes most windows from those reads, and still reports a
/// damaged block inside one as Corruption; seeks that jump away from a
/// window in flight, and a scan dropped while one is, give right answers
/// and leave nothing behind.
#[test]
fn background_windows_serve_scans_and_still_check_every_block() {
    let (cmp, entries, mut bytes, props) = multi_window_table(34, 12_000);
    let (table, file) = counting_table(&bytes, &cmp);
    let (sync, sync_reads) = counted_scan(table.iter_opt(false), &file);
    assert_eq!(sync, entries);
    let before = file.reads.load(std::sync::atomic::Ordering::Relaxed);
    let mut it = table.iter_opt(false).with_background_readahead();
    assert_eq!(scan_from_first(&mut it), entries);
    let windows = (props.data_size / super::readahead::READAHEAD_BYTES) as usize;
    let (taken, joined) = it.background_windows();
    assert!(
        taken + 1 >= windows,
        "{taken} windows from the background, about {windows} in the data"
    );
    assert!(joined > 0, "no block was cut by a window's end");
    let reads = file.reads.load(std::sync::atomic::Ordering::Relaxed) - before;
    assert!(
        reads <= sync_reads + windows / 4 + 2,
        "{reads} reads with background windows, {sync_reads} without"
    );

    // Seeks anywhere, each followed by a few steps: the model's entries.
    let mut rng = StdRng::seed_from_u64(34);
    let mut it = table.iter_opt(false).with_background_readahead();
    for _ in 0..300 {
        let at = rng.gen_range(0..entries.len());
        it.seek(&entries[at].0);
        for want in entries[at..].iter().take(rng.gen_range(1..400)) {
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (&want.0[..], &want.1[..]));
            it.next();
        }
    }
    it.status().unwrap();
    drop(it);

    // Dropped halfway, with a window asked for: its read lets go of the
    // file once done (at once if no thread had started it).
    let holders = Arc::strong_count(&file);
    let mut it = table.iter_opt(false).with_background_readahead();
    it.seek_to_first();
    for _ in 0..entries.len() / 2 {
        it.next();
    }
    assert!(it.valid());
    assert!(it.readahead_held() > super::readahead::READAHEAD_BYTES as usize);
    drop(it);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Arc::strong_count(&file) > holders {
        assert!(
            std::time::Instant::now() < deadline,
            "the dropped read kept its file"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }

    // A flipped byte deep in the table: the scan stops there.
    let at = (props.data_size * 3 / 4) as usize;
    bytes[at] ^= 0x40;
    let (table, _) = counting_table(&bytes, &cmp);
    let it = table.iter_opt(false).with_background_readahead();
    let it = stops_at_corruption(it, entries.len());
    assert!(it.background_windows().0 > 0);
}

/// The default readahead reads the next window in the background over a
/// table opened with direct I/O, and not over the same table read
/// through the page cache; both scans give the table's entries.
#[test]
fn only_direct_reads_read_the_next_window_in_the_background() {
    use crate::env::{FileSystem, PosixFileSystem};
    let (cmp, entries, bytes, props) = multi_window_table(36, 12_000);
    let dir = std::env::temp_dir().join(format!("strata-ra-{}", std::process::id()));
    let fs = PosixFileSystem;
    fs.create_dir_all(&dir).unwrap();
    let path = dir.join("000001.sst");
    crate::env::write_file_atomic(&fs, &path, &bytes).unwrap();
    let windows = (props.data_size / super::readahead::READAHEAD_BYTES) as usize;
    for direct in [false, true] {
        let file = match direct {
            false => fs.open_random_access(&path).unwrap(),
            true => match fs.open_random_access_direct(&path) {
                Ok(f) if f.direct_io().is_some() => f,
                _ => {
                    eprintln!("{}: no O_DIRECT here", dir.display());
                    continue;
                }
            },
        };
        let table = Arc::new(TableReader::open(file, "000001.sst", cmp.clone()).unwrap());
        let mut it = table.iter_opt(false);
        assert_eq!(scan_from_first(&mut it), entries, "direct {direct}");
        let (taken, _) = it.background_windows();
        match direct {
            false => assert_eq!(taken, 0, "through the page cache"),
            true => assert!(taken + 1 >= windows, "{taken} of about {windows} windows"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A scan over a table whose every third block is in the block cache
/// still reads ahead: a cached block keeps the scan's pattern sequential,
/// so the blocks between are not read one at a time.
#[test]
fn a_scan_over_partly_cached_blocks_still_reads_ahead() {
    let (cmp, entries, bytes, props) = multi_window_table(35, 12_000);
    let fs = MemFileSystem::new();
    let path = Path::new("/p.sst");
    crate::env::write_file_atomic(&fs, path, &bytes).unwrap();
    let file = Arc::new(CountingFile {
        inner: fs.open_random_access(path).unwrap(),
        reads: Default::default(),
    });
    let cache = Arc::new(crate::cache::BlockCache::new(64 << 20, Some(0)));
    let table =
        Arc::new(TableReader::open_with_cache(file.clone(), "p.sst", cmp, Some(cache)).unwrap());
    let mut index = table.index_iter().unwrap();
    index.seek_to_first();
    let mut k = 0;
    while index.valid() {
        if k % 3 == 0 {
            let offset = table.footer().index.offset;
            let handle = table
                .decode_index_value(index.value(), offset)
                .unwrap()
                .handle;
            table.read_data_block(handle, true).unwrap();
        }
        k += 1;
        index.next();
    }
    let (got, reads) = counted_scan(table.iter_opt(false), &file);
    assert_eq!(got, entries);
    assert!(
        reads * 10 < props.num_data_blocks as usize,
        "{reads} reads for {} blocks, a third of them cached",
        props.num_data_blocks
    );
}

/// An index block larger than the per-thread read buffer is kept in the
/// buffer it is read into (`read_block`): the table answers every key, and
/// a flipped byte anywhere in that block is a `Corruption` at its offset.
#[test]
fn a_large_index_block_is_read_whole_and_checked() {
    let cmp: Arc<dyn Comparator> = Arc::new(crate::key::BytewiseComparator);
    let entries: Entries = (0..20_000u32)
        .map(|i| {
            let user = format!("key{i:08}");
            (ikey(user.as_bytes(), 1, ValueKind::Value), vec![b'v'; 24])
        })
        .collect();
    let opts = TableOptions {
        block_size: 32,
        ..Default::default()
    };
    let (good, _) = write_table(&entries, &opts);
    let table = open_bytes(good.clone(), cmp.clone()).unwrap();
    let index = table.footer().index;
    assert!(
        index.size > 256 << 10,
        "index block of {} bytes fits the read buffer",
        index.size
    );
    let mut rng = StdRng::seed_from_u64(11);
    check_gets(&table, &entries, &mut rng);
    for at in [0, index.size / 2, index.size - 1, index.size + 4] {
        let mut bad = good.clone();
        bad[(index.offset + at) as usize] ^= 0x10;
        let e = open_bytes(bad, cmp.clone()).unwrap_err();
        assert!(e.is_corruption(), "byte {at}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("000001.sst") && msg.contains(&index.offset.to_string()),
            "byte {at}: {msg}"
        );
    }
}
