use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::iter::InternalIterator;
use crate::key::BytewiseComparator;

fn cmp() -> Arc<dyn Comparator> {
    Arc::new(BytewiseComparator)
}

fn build(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Block {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in entries {
        b.add(k, v);
    }
    assert_eq!(b.num_entries(), entries.len());
    let est = b.current_size_estimate();
    let bytes = Bytes::copy_from_slice(b.finish());
    assert_eq!(bytes.len(), est);
    Block::new(bytes, Arc::from("test.sst"), 0).unwrap()
}

fn random_entries(rng: &mut StdRng, n: usize, max_value: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut keys = std::collections::BTreeMap::new();
    while keys.len() < n {
        // Keys with long shared prefixes and some short ones.
        let prefix_len = rng.gen_range(0..12);
        let mut k = vec![b'k'; prefix_len];
        let tail = rng.gen_range(0..8);
        k.extend((0..tail).map(|_| rng.gen_range(b'a'..=b'e')));
        let vlen = if rng.gen_bool(0.05) {
            rng.gen_range(0..=max_value)
        } else {
            rng.gen_range(0..32)
        };
        let v: Vec<u8> = (0..vlen).map(|_| rng.gen()).collect();
        keys.insert(k, v);
    }
    keys.into_iter().collect()
}

fn collect_forward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

fn collect_backward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    out.reverse();
    out
}

#[test]
fn empty_block() {
    let block = build(&[], 16);
    assert_eq!(block.size(), 8);
    let mut it = block.iter(cmp());
    it.seek_to_first();
    assert!(!it.valid());
    it.seek_to_last();
    assert!(!it.valid());
    it.seek(b"a");
    assert!(!it.valid());
    it.seek_for_prev(b"a");
    assert!(!it.valid());
    it.status().unwrap();
}

#[test]
fn round_trip_against_sorted_vec() {
    let mut rng = StdRng::seed_from_u64(7);
    for &interval in &[1usize, 2, 16] {
        for &n in &[1usize, 2, 15, 16, 17, 300] {
            let entries = random_entries(&mut rng, n, 64 * 1024);
            let block = build(&entries, interval);
            let mut it = block.iter(cmp());
            assert_eq!(collect_forward(&mut it), entries);
            assert_eq!(collect_backward(&mut it), entries);

            // Seek and seek_for_prev to present keys and to keys between them.
            for _ in 0..200 {
                let target: Vec<u8> = if rng.gen_bool(0.5) {
                    entries[rng.gen_range(0..n)].0.clone()
                } else {
                    let len = rng.gen_range(0..14);
                    (0..len).map(|_| rng.gen_range(b'a'..=b'l')).collect()
                };
                let lower = entries.partition_point(|(k, _)| k.as_slice() < target.as_slice());
                it.seek(&target);
                if lower < n {
                    assert!(it.valid());
                    assert_eq!(it.key(), entries[lower].0.as_slice());
                    assert_eq!(it.value(), entries[lower].1.as_slice());
                    // Step both ways from a seek position.
                    if lower + 1 < n {
                        it.next();
                        assert_eq!(it.key(), entries[lower + 1].0.as_slice());
                        it.prev();
                    }
                    it.prev();
                    if lower > 0 {
                        assert_eq!(it.key(), entries[lower - 1].0.as_slice());
                    } else {
                        assert!(!it.valid());
                    }
                } else {
                    assert!(!it.valid());
                }
                let upper = entries.partition_point(|(k, _)| k.as_slice() <= target.as_slice());
                it.seek_for_prev(&target);
                if upper > 0 {
                    assert!(it.valid());
                    assert_eq!(it.key(), entries[upper - 1].0.as_slice());
                } else {
                    assert!(!it.valid());
                }
                it.status().unwrap();
            }
        }
    }
}

#[test]
fn value_bytes_shares_the_block() {
    let entries = vec![
        (b"a".to_vec(), b"apple".to_vec()),
        (b"b".to_vec(), b"banana".to_vec()),
    ];
    let block = build(&entries, 16);
    let mut it = block.iter(cmp());
    it.seek(b"b");
    let v = it.value_bytes();
    assert_eq!(&v[..], b"banana");
    let base = block.data().as_ptr() as usize;
    assert!((v.as_ptr() as usize) >= base && (v.as_ptr() as usize) < base + block.size());
}

#[test]
fn builder_reset_reuses() {
    let mut b = BlockBuilder::new(4);
    b.add(b"x", b"1");
    let _ = b.finish();
    b.reset();
    assert!(b.is_empty());
    b.add(b"a", b"2");
    assert_eq!(b.last_key(), b"a");
    let block = Block::new(Bytes::copy_from_slice(b.finish()), Arc::from("f"), 0).unwrap();
    let mut it = block.iter(cmp());
    assert_eq!(
        collect_forward(&mut it),
        vec![(b"a".to_vec(), b"2".to_vec())]
    );
}

#[test]
fn bad_footers_are_corruption() {
    for bytes in [
        vec![],
        vec![1, 2, 3],
        vec![0, 0, 0, 0],
        vec![5, 0, 0, 0],
        vec![0, 0, 0, 0, 1, 0, 0, 0x80],
    ] {
        let err = Block::new(Bytes::from(bytes), Arc::from("bad.sst"), 42).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("bad.sst at offset 42"), "{err}");
    }
}

#[test]
fn shared_prefix_too_long_is_corruption() {
    // Entry: shared=3 with no previous key.
    let mut data = vec![3, 1, 0, b'a'];
    data.extend_from_slice(&0u32.to_le_bytes());
    data.extend_from_slice(&1u32.to_le_bytes());
    let block = Block::new(Bytes::from(data), Arc::from("f"), 0).unwrap();
    let mut it = block.iter(cmp());
    it.seek_to_first();
    assert!(!it.valid());
    assert!(it.status().unwrap_err().is_corruption());
}

/// Runs every operation on a block built from arbitrary bytes; only checks
/// that nothing panics and that errors are Corruption.
fn exercise(bytes: Vec<u8>, targets: &[Vec<u8>]) {
    let Ok(block) = Block::new(Bytes::from(bytes), Arc::from("fuzz"), 0) else {
        return;
    };
    let mut it = block.iter(cmp());
    let mut steps = 0;
    it.seek_to_first();
    while it.valid() && steps < 10_000 {
        let _ = (it.key(), it.value());
        it.next();
        steps += 1;
    }
    let mut it = block.iter(cmp());
    it.seek_to_last();
    while it.valid() && steps < 20_000 {
        it.prev();
        steps += 1;
    }
    for t in targets {
        let mut it = block.iter(cmp());
        it.seek(t);
        if it.valid() {
            it.prev();
        }
        it.seek_for_prev(t);
        if let Err(e) = it.status() {
            assert!(e.is_corruption());
        }
        // Prefix skips from wherever a seek lands, every kind of run.
        let extractors = [
            crate::key::SliceTransform::create_fixed_prefix(1),
            crate::key::SliceTransform::create_fixed_prefix(3),
            crate::key::SliceTransform::create_noop(),
        ];
        for x in &extractors {
            for backward in [false, true] {
                let mut it = block.iter(cmp());
                it.seek(t);
                if !it.valid() {
                    continue;
                }
                let user = crate::key::extract_user_key(it.key()).to_vec();
                let (bytes, in_domain) = crate::iter::PrefixRun::bytes_of(x, &user);
                let run = crate::iter::PrefixRun::new(
                    x,
                    bytes,
                    in_domain,
                    Some(crate::key::BuiltinOrder::Bytewise),
                );
                if backward {
                    it.skip_run_backward(&run);
                } else {
                    it.skip_run_forward(&run);
                }
                if it.valid() {
                    let _ = (it.key(), it.value());
                    it.prev();
                }
                if let Err(e) = it.status() {
                    assert!(e.is_corruption());
                }
            }
        }
        let mut it = block.iter(cmp());
        it.seek_for_get(t, user_key_hash(crate::key::extract_user_key(t)));
        if it.valid() {
            it.next();
        }
        if let Err(e) = it.status() {
            assert!(e.is_corruption());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256),
                                   targets in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..6), 0..4)) {
        exercise(bytes, &targets);
    }

    #[test]
    fn mutated_blocks_never_panic(seed in any::<u64>(), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut rng = StdRng::seed_from_u64(seed);
        let entries = random_entries(&mut rng, 40, 64);
        let mut b = if rng.gen_bool(0.5) {
            BlockBuilder::with_hash_index(rng.gen_range(1..5), 0.75)
        } else {
            BlockBuilder::new(rng.gen_range(1..5))
        };
        for (k, v) in &entries {
            b.add(k, v);
        }
        let mut bytes = b.finish().to_vec();
        let len = bytes.len();
        for (at, x) in flips {
            bytes[at % len] ^= x | 1;
        }
        exercise(bytes, &[b"kk".to_vec(), b"kkkkc".to_vec(), vec![], b"kkkkkkkkaaaa".to_vec()]);
    }
}
