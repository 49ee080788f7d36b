//! Point lookups through the data block hash index against binary search
//! and a sorted-vector model: random blocks of internal keys with many
//! versions per user key, forced collisions, the 253-interval limit, and
//! damaged hash indexes.

use std::sync::Arc;

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::hash_index::{BUCKET_COLLISION, BUCKET_EMPTY, NUM_BUCKETS_BYTES};
use super::*;
use crate::iter::InternalIterator;
use crate::key::{
    extract_user_key, BytewiseComparator, InternalKey, InternalKeyComparator, ValueKind,
    MAX_SEQUENCE_NUMBER,
};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn icmp() -> Arc<dyn Comparator> {
    Arc::new(InternalKeyComparator::new(Arc::new(BytewiseComparator)))
}

fn ikey(user: &[u8], seq: u64) -> Vec<u8> {
    InternalKey::new(user, seq, ValueKind::Value)
        .encoded()
        .to_vec()
}

fn seek_key(user: &[u8], seq: u64) -> Vec<u8> {
    InternalKey::new(user, seq, ValueKind::FOR_SEEK)
        .encoded()
        .to_vec()
}

/// Builds `entries` into a block, with a hash index at `ratio` if given.
fn build(entries: &Entries, restart_interval: usize, ratio: Option<f64>) -> Block {
    let mut b = match ratio {
        Some(r) => BlockBuilder::with_hash_index(restart_interval, r),
        None => BlockBuilder::new(restart_interval),
    };
    for (k, v) in entries {
        b.add(k, v);
    }
    let est = b.current_size_estimate();
    let bytes = Bytes::copy_from_slice(b.finish());
    assert_eq!(bytes.len(), est, "size estimate");
    let block = Block::new(bytes, Arc::from("hash.sst"), 0).unwrap();
    assert_eq!(Some(block.index_type()), b.finished_index_type());
    block
}

/// `n` user keys of 1..=`max_versions` versions each (newest first), in
/// internal-key order. Version counts are skewed so that some keys span
/// several restart intervals.
fn versioned_entries(rng: &mut StdRng, n: usize, max_versions: u64) -> Entries {
    let mut users = std::collections::BTreeSet::new();
    while users.len() < n {
        let len = rng.gen_range(1..10);
        users.insert(
            (0..len)
                .map(|_| rng.gen_range(b'b'..=b'y'))
                .collect::<Vec<u8>>(),
        );
    }
    let mut out = Vec::new();
    for user in users {
        let versions = if rng.gen_bool(0.2) {
            rng.gen_range(1..=max_versions)
        } else {
            rng.gen_range(1..=2)
        };
        let mut seq = rng.gen_range(5_000..1_000_000u64);
        for _ in 0..versions {
            let value: Vec<u8> = (0..rng.gen_range(0..12)).map(|_| rng.gen()).collect();
            out.push((ikey(&user, seq), value));
            seq -= rng.gen_range(1..100);
        }
    }
    out
}

/// Lookup targets: every user key at several sequence numbers, and user
/// keys that are absent (between, before and after the block's keys).
fn targets(rng: &mut StdRng, entries: &Entries) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (k, _) in entries {
        let p = crate::key::parse_internal_key(k).unwrap();
        for seq in [
            MAX_SEQUENCE_NUMBER,
            p.sequence,
            p.sequence.saturating_sub(1),
            0,
        ] {
            out.push(seek_key(p.user_key, seq));
        }
    }
    for _ in 0..200 {
        let len = rng.gen_range(0..11);
        let user: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect();
        out.push(seek_key(&user, rng.gen_range(0..=MAX_SEQUENCE_NUMBER)));
    }
    out.push(seek_key(b"", MAX_SEQUENCE_NUMBER));
    out.push(seek_key(b"zzzzzzzzzzzz", 0));
    out
}

/// Checks `seek_for_get`'s contract against the model for one target, and
/// that its answer equals binary search's (`reference`, a plain seek).
fn check_lookup(hashed: &mut BlockIter, reference: &mut BlockIter, entries: &Entries, t: &[u8]) {
    let cmp = icmp();
    let user = extract_user_key(t);
    let lower = entries.partition_point(|(k, _)| cmp.compare(k, t).is_lt());
    hashed.seek_for_get(t, user_key_hash(user));
    hashed.status().unwrap();
    reference.seek(t);
    if lower == entries.len() {
        assert!(
            !hashed.valid(),
            "every key < target, yet the lookup stopped"
        );
        assert!(!reference.valid());
        return;
    }
    assert!(hashed.valid(), "a key >= target exists, yet none was found");
    assert!(
        cmp.compare(hashed.key(), t).is_ge(),
        "positioned before the target"
    );
    let (want_key, want_value) = &entries[lower];
    if extract_user_key(want_key) == user {
        assert_eq!(hashed.key(), want_key.as_slice());
        assert_eq!(hashed.value(), want_value.as_slice());
        assert_eq!(reference.key(), want_key.as_slice());
    } else {
        assert!(
            extract_user_key(hashed.key()) > user,
            "stopped on a key whose user key is not greater"
        );
        assert_ne!(extract_user_key(reference.key()), user);
    }
}

/// Counts bucket values of a block with a hash index: (empty, collision,
/// interval).
fn bucket_census(block: &Block) -> (usize, usize, usize) {
    let buckets = block.hash_buckets().expect("a block with a hash index");
    let n = buckets.len();
    let empty = buckets.iter().filter(|&&b| b == BUCKET_EMPTY).count();
    let collision = buckets.iter().filter(|&&b| b == BUCKET_COLLISION).count();
    (empty, collision, n - empty - collision)
}

#[test]
fn lookups_match_binary_search_on_random_blocks() {
    let (mut collisions, mut empties, mut spanning_keys) = (0, 0, 0);
    for seed in 0..60u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let interval = [1, 2, 3, 4, 16][rng.gen_range(0..5)];
        // High ratios mean few buckets and forced collisions.
        let ratio = [0.25, 0.75, 1.0, 4.0, 64.0][rng.gen_range(0..5)];
        let max_versions = [3, 8, 40][rng.gen_range(0..3)];
        let n = rng.gen_range(1..=60);
        let entries = versioned_entries(&mut rng, n, max_versions);
        if entries.len().div_ceil(interval) > 253 {
            continue;
        }
        let block = build(&entries, interval, Some(ratio));
        assert_eq!(block.index_type(), DataBlockIndexType::BinaryAndHash);
        let plain = build(&entries, interval, None);
        assert_eq!(plain.index_type(), DataBlockIndexType::BinarySearch);
        let (e, c, _) = bucket_census(&block);
        empties += e;
        collisions += c;
        spanning_keys += entries
            .windows(2)
            .enumerate()
            .filter(|(i, w)| {
                (i + 1) % interval == 0 && extract_user_key(&w[0].0) == extract_user_key(&w[1].0)
            })
            .count();

        // Iteration ignores the hash index.
        let mut it = block.iter(icmp());
        let mut scanned = Vec::new();
        it.seek_to_first();
        while it.valid() {
            scanned.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        assert!(scanned == entries, "seed {seed}: scan differs");

        let mut hashed = block.iter(icmp());
        let mut reference = plain.iter(icmp());
        for t in targets(&mut rng, &entries) {
            check_lookup(&mut hashed, &mut reference, &entries, &t);
        }
    }
    assert!(collisions > 50, "{collisions} collision buckets");
    assert!(empties > 50, "{empties} empty buckets");
    assert!(
        spanning_keys > 50,
        "{spanning_keys} keys span restart points"
    );
}

/// Every bucket a collision, or every user key alone in its bucket: both
/// extremes answer like binary search.
#[test]
fn all_collisions_and_no_collisions() {
    let mut rng = StdRng::seed_from_u64(5);
    let entries = versioned_entries(&mut rng, 60, 4);
    for (ratio, one_bucket) in [(1e6, true), (1e-3, false)] {
        let block = build(&entries, 4, Some(ratio));
        let (_, c, single) = bucket_census(&block);
        if one_bucket {
            assert_eq!((c, single), (1, 0), "one bucket, a collision");
        } else {
            assert_eq!((c, single), (0, 60), "65535 buckets, no collision");
        }
        let plain = build(&entries, 4, None);
        let (mut hashed, mut reference) = (block.iter(icmp()), plain.iter(icmp()));
        for t in targets(&mut rng, &entries) {
            check_lookup(&mut hashed, &mut reference, &entries, &t);
        }
    }
}

#[test]
fn index_is_written_up_to_253_restart_intervals() {
    let mut rng = StdRng::seed_from_u64(8);
    for (interval, n, want) in [
        (1usize, 253usize, DataBlockIndexType::BinaryAndHash),
        (1, 254, DataBlockIndexType::BinarySearch),
        (2, 506, DataBlockIndexType::BinaryAndHash),
        (2, 507, DataBlockIndexType::BinarySearch),
    ] {
        let entries: Entries = (0..n as u32)
            .map(|i| (ikey(format!("k{i:05}").as_bytes(), 7), vec![i as u8]))
            .collect();
        let block = build(&entries, interval, Some(0.75));
        assert_eq!(block.index_type(), want, "{n} entries");
        assert_eq!(block.num_restarts() as usize, n.div_ceil(interval));
        let plain = build(&entries, interval, None);
        let (mut hashed, mut reference) = (block.iter(icmp()), plain.iter(icmp()));
        for t in targets(&mut rng, &entries) {
            check_lookup(&mut hashed, &mut reference, &entries, &t);
        }
    }
}

#[test]
fn empty_block_with_hash_index() {
    let block = build(&vec![], 16, Some(0.75));
    assert_eq!(block.index_type(), DataBlockIndexType::BinaryAndHash);
    assert_eq!(block.size(), 8 + 1 + NUM_BUCKETS_BYTES);
    let mut it = block.iter(icmp());
    it.seek_for_get(&seek_key(b"a", 1), user_key_hash(b"a"));
    assert!(!it.valid());
    it.status().unwrap();
}

/// A small block with a hash index, its bytes and where its parts are.
fn sample() -> (Entries, Vec<u8>, usize, usize) {
    let entries: Entries = (0..30u32)
        .map(|i| (ikey(format!("key{i:02}").as_bytes(), 9), vec![i as u8; 3]))
        .collect();
    let block = build(&entries, 4, Some(0.75));
    let bytes = block.data().to_vec();
    let count_at = bytes.len() - BLOCK_FOOTER_BYTES - NUM_BUCKETS_BYTES;
    let num_buckets = u16::from_le_bytes([bytes[count_at], bytes[count_at + 1]]) as usize;
    (entries, bytes, count_at - num_buckets, num_buckets)
}

#[test]
fn bad_hash_index_sizes_are_corruption() {
    let (_, good, _, _) = sample();
    let count_at = good.len() - BLOCK_FOOTER_BYTES - NUM_BUCKETS_BYTES;
    let footer_at = good.len() - BLOCK_FOOTER_BYTES;
    let mut cases = Vec::new();
    // No buckets; more buckets than bytes; buckets leaving no room for
    // the restart array.
    for count in [0u16, 9999, u16::MAX, count_at as u16] {
        let mut bad = good.clone();
        bad[count_at..count_at + 2].copy_from_slice(&count.to_le_bytes());
        cases.push(bad);
    }
    // Over 253 restart points with the hash bit set.
    let mut bad = good.clone();
    bad[footer_at..].copy_from_slice(&(254u32 | 1 << 31).to_le_bytes());
    cases.push(bad);
    // The bit set on a block too short for a bucket count.
    cases.push(vec![0, 0, 0, 0, 0, 0, 0, 0x80]);
    for bad in cases {
        let err = Block::new(Bytes::from(bad), Arc::from("bad.sst"), 7).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert!(err.to_string().contains("bad.sst at offset 7"), "{err}");
    }
}

#[test]
fn bucket_naming_a_missing_interval_is_corruption() {
    let (entries, good, buckets_at, num_buckets) = sample();
    for value in [8u8, 100, 253] {
        let mut bad = good.clone();
        bad[buckets_at..buckets_at + num_buckets].fill(value);
        let block = Block::new(Bytes::from(bad), Arc::from("bad.sst"), 0).unwrap();
        let mut it = block.iter(icmp());
        let user = extract_user_key(&entries[0].0);
        it.seek_for_get(&seek_key(user, MAX_SEQUENCE_NUMBER), user_key_hash(user));
        assert!(!it.valid());
        let err = it.status().unwrap_err();
        assert!(
            err.is_corruption() && err.to_string().contains("hash bucket"),
            "{err}"
        );
    }
}

/// Buckets overwritten behind the checksum's back: lookups never panic,
/// never return another key's entry or one newer than the target.
#[test]
fn damaged_buckets_never_give_another_keys_value() {
    let mut rng = StdRng::seed_from_u64(13);
    let entries = versioned_entries(&mut rng, 40, 6);
    let good = build(&entries, 2, Some(0.75)).data().to_vec();
    let end = good.len() - BLOCK_FOOTER_BYTES - NUM_BUCKETS_BYTES;
    let num_buckets = u16::from_le_bytes([good[end], good[end + 1]]) as usize;
    let cmp = icmp();
    let targets = targets(&mut rng, &entries);
    for round in 0..200 {
        let mut bad = good.clone();
        for _ in 0..rng.gen_range(1..4) {
            let at = end - num_buckets + rng.gen_range(0..num_buckets);
            bad[at] = match rng.gen_range(0..3) {
                0 => BUCKET_EMPTY,
                1 => rng.gen_range(0..40),
                _ => rng.gen(),
            };
        }
        let block = Block::new(Bytes::from(bad), Arc::from("bad.sst"), 0).unwrap();
        let mut it = block.iter(cmp.clone());
        for t in &targets {
            let user = extract_user_key(t);
            it.seek_for_get(t, user_key_hash(user));
            if let Err(e) = it.status() {
                assert!(e.is_corruption(), "round {round}: {e}");
                it = block.iter(cmp.clone());
                continue;
            }
            if it.valid() && extract_user_key(it.key()) == user {
                assert!(cmp.compare(it.key(), t).is_ge(), "round {round}: newer");
                assert!(
                    entries
                        .iter()
                        .any(|(k, v)| k.as_slice() == it.key() && v.as_slice() == it.value()),
                    "round {round}: an entry the block does not hold"
                );
            }
        }
    }
}
