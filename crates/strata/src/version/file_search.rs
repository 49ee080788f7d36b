//! Finding the file of a sorted level (1 or deeper) that may hold a key:
//! the first file whose largest internal key is at or after the target.
//!
//! The plain search (LevelDB's `FindFile`) is a binary search over the
//! files' largest internal keys, each step a call through the comparator
//! trait object on full keys reached through two pointers (the `Arc` and the
//! key's heap buffer).
//!
//! The prefix search keeps, per level, a contiguous array with the first 8
//! bytes of each file's largest user key as a big-endian `u64`, zero padded
//! (its *prefix*). Under bytewise order the prefix is monotone, `a <= b`
//! implies `prefix(a) <= prefix(b)`, so along a level the prefixes never
//! decrease (never increase under reverse bytewise order). Hence a file
//! whose prefix comes before the target's ends before the target, a file
//! whose prefix comes after it ends after it, and only the run of files with
//! exactly the target's prefix needs full-key comparisons. Those are made
//! with the comparator's type known at compile time, so they inline to a
//! `memcmp`. The result is always the plain search's. The end of the run is
//! found by galloping, so its cost grows with the run, not the level; a
//! level whose files all share one prefix skips the integer search and is
//! a statically dispatched full-key search.
//!
//! User comparators of unknown order take the plain search: their order
//! says nothing about byte prefixes.
//!
//! Cost, from `cargo bench -p strata --bench level_search`: with 8-byte
//! integer keys, about 45 ns instead of 400-470 ns at 10,000 files; with
//! keys whose first 8 bytes are all equal, about the plain search's time at
//! 1,000 files and less at more (0.8x at 10,000, 0.4x at 100,000).

use std::cmp::Ordering;
use std::sync::Arc;

use super::FileMetaData;
#[cfg(test)]
use crate::key::compare_internal;
#[cfg(test)]
use crate::key::prefix_search::equal_run;
use crate::key::prefix_search::key_prefix;
#[cfg(test)]
use crate::key::{BytewiseComparator, ReverseBytewiseComparator, TRAILER_BYTES};
use crate::key::{Comparator, InternalKeyComparator};

/// The prefix of each file's largest user key, in level order.
pub(super) fn largest_prefixes(files: &[Arc<FileMetaData>]) -> Vec<u64> {
    files
        .iter()
        .map(|f| key_prefix(f.largest.user_key()))
        .collect()
}

/// The plain search: index of the first file whose largest key is at or
/// after `ikey` under `icmp`; `files.len()` if none is.
pub(super) fn find_file_plain(
    icmp: &InternalKeyComparator,
    files: &[Arc<FileMetaData>],
    ikey: &[u8],
) -> usize {
    files.partition_point(|f| icmp.compare(f.largest.encoded(), ikey) == Ordering::Less)
}

#[cfg(test)]
mod tests {
    //! The prefix search against the plain search and a linear scan, over
    //! random levels built for each built-in order and a user comparator.
    //! Seeds are fixed and printed on failure.

    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::key::{InternalKey, ValueKind, MAX_SEQUENCE_NUMBER};
    use crate::version::{Version, VersionBuilder, VersionEdit};

    /// Shorter keys first, then bytewise: an order with no prefix property.
    #[derive(Debug)]
    struct LengthFirst;

    impl Comparator for LengthFirst {
        fn name(&self) -> &str {
            "test.LengthFirst"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
            a.len().cmp(&b.len()).then_with(|| a.cmp(b))
        }
    }

    /// Reverse bytewise order that claims to be bytewise.
    #[derive(Debug)]
    struct Lying;

    impl Comparator for Lying {
        fn name(&self) -> &str {
            "test.Lying"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
            b.cmp(a)
        }
        fn builtin_order(&self) -> Option<crate::key::BuiltinOrder> {
            Some(crate::key::BuiltinOrder::Bytewise)
        }
    }

    fn comparators() -> Vec<Arc<dyn Comparator>> {
        vec![
            Arc::new(BytewiseComparator),
            Arc::new(ReverseBytewiseComparator),
            Arc::new(LengthFirst),
        ]
    }

    /// A user key of 0 to 19 bytes: often a stem shared with other keys
    /// (shorter than, exactly, or longer than 8 bytes) continued by bytes
    /// that include 0x00, so that "ab" and "ab\0" share a padded prefix.
    fn random_user_key(rng: &mut StdRng) -> Vec<u8> {
        const STEMS: [&[u8]; 5] = [b"", b"ab", b"stem--7", b"stem---8", b"a-long-shared-stem"];
        const BYTES: [u8; 7] = [0x00, 0x01, b'a', b'b', 0x7f, 0x80, 0xff];
        let stem = STEMS[rng.gen_range(0..STEMS.len())];
        let len = rng.gen_range(0..20);
        let mut key = stem[..len.min(stem.len())].to_vec();
        while key.len() < len {
            key.push(BYTES[rng.gen_range(0..BYTES.len())]);
        }
        key
    }

    fn random_kind(rng: &mut StdRng) -> ValueKind {
        if rng.gen() {
            ValueKind::Value
        } else {
            ValueKind::Deletion
        }
    }

    /// Sorted, distinct internal keys: few distinct user keys, each often
    /// with several versions, so file boundaries fall inside a user key.
    fn random_entries(rng: &mut StdRng, icmp: &InternalKeyComparator) -> Vec<InternalKey> {
        let users: Vec<Vec<u8>> = (0..rng.gen_range(1..60))
            .map(|_| random_user_key(rng))
            .collect();
        let mut entries: Vec<InternalKey> = (0..rng.gen_range(0..300))
            .map(|_| {
                let user = users.choose(rng).expect("at least one user key");
                InternalKey::new(user, rng.gen_range(1..50), random_kind(rng))
            })
            .collect();
        entries.sort_by(|a, b| icmp.compare(a.encoded(), b.encoded()));
        entries.dedup();
        entries
    }

    /// Level 1 holds `entries` cut into files of 1 to 4 keys.
    fn build_level(
        rng: &mut StdRng,
        icmp: &InternalKeyComparator,
        entries: &[InternalKey],
    ) -> Version {
        let mut edit = VersionEdit::new();
        let mut rest = entries;
        let mut number = 1;
        while !rest.is_empty() {
            let (file, tail) = rest.split_at(rng.gen_range(1..=4).min(rest.len()));
            let seqs = file.iter().map(|k| parse_seq(k.encoded()));
            let (lo, hi) = (seqs.clone().min().unwrap_or(0), seqs.max().unwrap_or(0));
            let (first, last) = (&file[0], &file[file.len() - 1]);
            edit.add_file(1, number, 1, first.clone(), last.clone(), lo, hi);
            number += 1;
            rest = tail;
        }
        let mut builder = VersionBuilder::new(icmp.clone(), &Version::empty());
        builder.apply(&edit, "test", 0).expect("disjoint files");
        builder.build()
    }

    fn parse_seq(ikey: &[u8]) -> u64 {
        crate::key::parse_internal_key(ikey)
            .expect("valid key")
            .sequence
    }

    /// A search target: near the level's keys (same user key, sequence
    /// numbers around theirs), a random key, or now and then a malformed
    /// key shorter than a trailer.
    fn random_target(rng: &mut StdRng, entries: &[InternalKey]) -> Vec<u8> {
        if rng.gen_ratio(1, 20) {
            let len = rng.gen_range(0..TRAILER_BYTES);
            return (0..len).map(|_| rng.gen()).collect();
        }
        let user = match entries.choose(rng) {
            Some(e) if rng.gen_ratio(2, 3) => e.user_key().to_vec(),
            _ => random_user_key(rng),
        };
        let seq = match rng.gen_range(0..4) {
            0 => 0,
            1 => MAX_SEQUENCE_NUMBER,
            _ => rng.gen_range(0..52),
        };
        InternalKey::new(&user, seq, random_kind(rng))
            .encoded()
            .to_vec()
    }

    #[test]
    fn prefix_search_matches_plain_search() {
        for (c, user) in comparators().into_iter().enumerate() {
            let icmp = InternalKeyComparator::new(user);
            for seed in 0..400u64 {
                let mut rng = StdRng::seed_from_u64(seed);
                let entries = random_entries(&mut rng, &icmp);
                let v = build_level(&mut rng, &icmp, &entries);
                v.check_consistency(&icmp).unwrap();
                let files = v.files(1);
                for _ in 0..200 {
                    let target = random_target(&mut rng, &entries);
                    let linear = files
                        .iter()
                        .position(|f| icmp.compare(f.largest.encoded(), &target).is_ge())
                        .unwrap_or(files.len());
                    let plain = v.find_file_plain(&icmp, 1, &target);
                    let fast = v.find_file(&icmp, 1, &target);
                    let at = format!("comparator {c} seed {seed} target {target:x?}");
                    assert_eq!(plain, linear, "{at}");
                    assert_eq!(fast, plain, "{at}");
                    assert_eq!(v.find_file(&icmp, 2, &target), 0, "{at}: empty level");
                }
            }
        }
    }

    #[test]
    fn static_order_matches_internal_key_comparator() {
        let mut rng = StdRng::seed_from_u64(7);
        let bytewise = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let reverse = InternalKeyComparator::new(Arc::new(ReverseBytewiseComparator));
        let keys: Vec<Vec<u8>> = (0..300).map(|_| random_target(&mut rng, &[])).collect();
        for a in &keys {
            for b in &keys {
                let want = bytewise.compare(a, b);
                assert_eq!(
                    compare_internal(&BytewiseComparator, a, b),
                    want,
                    "{a:x?} {b:x?}"
                );
                let want = reverse.compare(a, b);
                let got = compare_internal(&ReverseBytewiseComparator, a, b);
                assert_eq!(got, want, "{a:x?} {b:x?}");
            }
        }
    }

    #[test]
    fn prefix_is_big_endian_and_zero_padded() {
        assert_eq!(key_prefix(b""), 0);
        assert_eq!(key_prefix(b"\x01"), 1 << 56);
        assert_eq!(key_prefix(b"ab"), key_prefix(b"ab\0\0"));
        assert_eq!(key_prefix(b"abcdefgh"), u64::from_be_bytes(*b"abcdefgh"));
        assert_eq!(key_prefix(b"abcdefghij"), key_prefix(b"abcdefgh"));
        assert!(key_prefix(b"abcdefgg\xff") < key_prefix(b"abcdefgh"));
    }

    #[test]
    fn equal_run_gallops_to_the_end_of_the_run() {
        for len in 1..70usize {
            for run in 1..=len {
                let prefixes: Vec<u64> = (0..len).map(|i| if i < run { 5 } else { 9 }).collect();
                assert_eq!(equal_run(&prefixes, 5), run, "len {len} run {run}");
            }
        }
    }

    #[test]
    fn consistency_check_catches_a_comparator_claiming_a_wrong_order() {
        let icmp = InternalKeyComparator::new(Arc::new(Lying));
        // Built directly: under `invariants` the builder would panic first.
        let mut levels: [Vec<Arc<FileMetaData>>; crate::version::NUM_LEVELS] = Default::default();
        for (number, k) in (1..).zip([b"b", b"a"]) {
            let key = InternalKey::new(k, 1, ValueKind::Value);
            let file = FileMetaData::new(number, 1, key.clone(), key, 1, 1);
            levels[1].push(Arc::new(file));
        }
        let err = Version::from_levels(levels)
            .check_consistency(&icmp)
            .unwrap_err();
        assert!(err.contains("out of order under test.Lying"), "{err}");
    }
}
