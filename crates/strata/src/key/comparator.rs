//! The order of user keys.
//!
//! A database records its comparator's name and refuses to open with a
//! different one, because every file on disk is sorted by it.

use std::cmp::Ordering;
use std::fmt::Debug;

/// A total order over user keys, plus the hooks that shorten index keys.
pub trait Comparator: Send + Sync + Debug {
    /// Stable name recorded in the manifest and table properties.
    fn name(&self) -> &str;

    /// Three-way comparison of two user keys.
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering;

    /// If `start < limit`, may shorten `start` to a key `k` with
    /// `start <= k < limit`. Used for index separators; the default keeps `start`.
    fn find_shortest_separator(&self, _start: &mut Vec<u8>, _limit: &[u8]) {}

    /// May change `key` to a short key `k >= key`. The default keeps it.
    fn find_short_successor(&self, _key: &mut Vec<u8>) {}

    /// True if two byte-different keys can compare equal. When false, a hash
    /// of the key bytes can stand in for equality (data block hash index).
    fn can_keys_with_different_bytes_be_equal(&self) -> bool {
        true
    }

    /// The built-in order this comparator's `compare` is identical to, if
    /// any. A `Some` lets the engine replace calls through the trait object
    /// with inlined byte comparisons and search arrays of 8-byte key
    /// prefixes (the version's file search). The default, `None`, is always
    /// correct; returning `Some` for a different order makes lookups miss
    /// keys.
    fn builtin_order(&self) -> Option<BuiltinOrder> {
        None
    }
}

/// The orders of the built-in comparators, for the fast paths that depend
/// on knowing the order at compile time (see [`Comparator::builtin_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinOrder {
    /// [`BytewiseComparator`]: lexicographic byte order.
    Bytewise,
    /// [`ReverseBytewiseComparator`]: lexicographic byte order, reversed.
    ReverseBytewise,
}

/// Keys at most this long are compared inline, eight bytes at a time;
/// longer ones through the C library's `memcmp` (vectorized, but a call
/// through the PLT costs more than the comparison of a short key).
const INLINE_COMPARE_MAX: usize = 64;

/// Lexicographic order of byte strings: exactly `a.cmp(b)`, faster for the
/// short keys that lookups compare most (no call, one branch per 8 bytes).
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    if n > INLINE_COMPARE_MAX {
        return a.cmp(b);
    }
    let (mut x, mut y) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (p, q) in (&mut x).zip(&mut y) {
        let p = u64::from_be_bytes(p.try_into().expect("8-byte chunk"));
        let q = u64::from_be_bytes(q.try_into().expect("8-byte chunk"));
        if p != q {
            return p.cmp(&q);
        }
    }
    match x.remainder().cmp(y.remainder()) {
        Ordering::Equal => a.len().cmp(&b.len()),
        unequal => unequal,
    }
}

/// Lexicographic byte order: the default.
#[derive(Debug, Default, Clone, Copy)]
pub struct BytewiseComparator;

impl Comparator for BytewiseComparator {
    fn name(&self) -> &str {
        "leveldb.BytewiseComparator"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_bytes(a, b)
    }

    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
        if common >= start.len().min(limit.len()) {
            return; // one is a prefix of the other
        }
        let byte = start[common];
        if byte >= limit[common] {
            return; // not start < limit: nothing to shorten
        }
        if byte + 1 < limit[common] {
            start[common] = byte + 1;
            start.truncate(common + 1);
        } else if let Some(i) = start[common + 1..].iter().position(|&b| b != 0xff) {
            // The differing bytes are adjacent (`ab1xyz` below `ab2`):
            // raising that byte would reach `limit`, so keep it and raise
            // the first byte after it that can be raised (`ab1y`), which
            // stays below `limit` and above `start` (RocksDB's rule; a
            // separator of 9 bytes instead of 16 for neighbouring 8-byte
            // integer keys).
            let at = common + 1 + i;
            start[at] += 1;
            start.truncate(at + 1);
        }
        debug_assert!(self.compare(start, limit) == Ordering::Less);
    }

    fn find_short_successor(&self, key: &mut Vec<u8>) {
        if let Some(i) = key.iter().position(|&b| b != 0xff) {
            key[i] += 1;
            key.truncate(i + 1);
        }
    }

    fn can_keys_with_different_bytes_be_equal(&self) -> bool {
        false
    }

    fn builtin_order(&self) -> Option<BuiltinOrder> {
        Some(BuiltinOrder::Bytewise)
    }
}

/// Reverse lexicographic byte order.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReverseBytewiseComparator;

impl Comparator for ReverseBytewiseComparator {
    fn name(&self) -> &str {
        "rocksdb.ReverseBytewiseComparator"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_bytes(b, a)
    }

    fn can_keys_with_different_bytes_be_equal(&self) -> bool {
        false
    }

    fn builtin_order(&self) -> Option<BuiltinOrder> {
        Some(BuiltinOrder::ReverseBytewise)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The inline comparison is the slice order, for keys of every
        /// length around the 8-byte steps and the inline limit, with long
        /// shared prefixes (the byte that differs anywhere).
        #[test]
        fn compare_bytes_is_the_slice_order(
            common in proptest::collection::vec(any::<u8>(), 0..80),
            a_tail in proptest::collection::vec(0u8..4, 0..12),
            b_tail in proptest::collection::vec(0u8..4, 0..12),
        ) {
            let a = [&common[..], &a_tail[..]].concat();
            let b = [&common[..], &b_tail[..]].concat();
            prop_assert_eq!(compare_bytes(&a, &b), a.cmp(&b));
            prop_assert_eq!(compare_bytes(&b, &a), b.cmp(&a));
            prop_assert_eq!(compare_bytes(&a, &a), Ordering::Equal);
            prop_assert_eq!(BytewiseComparator.compare(&a, &b), a.cmp(&b));
            prop_assert_eq!(ReverseBytewiseComparator.compare(&a, &b), b.cmp(&a));
        }

        /// A separator lies in `[start, limit)` and is no longer than
        /// `start`, for keys that share long prefixes, differ by adjacent
        /// bytes and carry runs of 0xff (the cases each rule handles).
        #[test]
        fn bytewise_separator_separates(
            common in proptest::collection::vec(prop_oneof![Just(0xffu8), any::<u8>()], 0..10),
            a_tail in proptest::collection::vec(prop_oneof![Just(0xffu8), Just(0u8), 1u8..4], 0..8),
            b_tail in proptest::collection::vec(prop_oneof![Just(0xffu8), Just(0u8), 1u8..4], 0..8),
        ) {
            let a = [&common[..], &a_tail[..]].concat();
            let b = [&common[..], &b_tail[..]].concat();
            let (start, limit) = match a.cmp(&b) {
                Ordering::Less => (a, b),
                Ordering::Greater => (b, a),
                Ordering::Equal => return Ok(()),
            };
            let mut sep = start.clone();
            BytewiseComparator.find_shortest_separator(&mut sep, &limit);
            prop_assert!(start <= sep && sep < limit, "{:?} {:?} {:?}", start, sep, limit);
            prop_assert!(sep.len() <= start.len());
        }
    }

    #[test]
    fn bytewise_separator_and_successor() {
        let c = BytewiseComparator;
        // (start, limit, separator, what the case is)
        type Case = (&'static [u8], &'static [u8], &'static [u8], &'static str);
        let cases: [Case; 7] = [
            (b"abcdefg", b"abzz", b"abd", "the differing byte raised"),
            (b"abc", b"abcd", b"abc", "prefix: unchanged"),
            (
                b"ab\x01",
                b"ab\x02",
                b"ab\x01",
                "adjacent bytes, nothing after: unchanged",
            ),
            (
                b"ab\x01xyz",
                b"ab\x02",
                b"ab\x01y",
                "adjacent bytes: the next one raised",
            ),
            (
                b"ab\x01\xff\xffq0",
                b"ab\x02a",
                b"ab\x01\xff\xffr",
                "0xff bytes skipped",
            ),
            (
                b"ab\x01\xff\xff",
                b"ab\x02",
                b"ab\x01\xff\xff",
                "only 0xff after: unchanged",
            ),
            (b"ab\x05", b"ab\x05", b"ab\x05", "equal: unchanged"),
        ];
        for (start, limit, want, what) in cases {
            let mut s = start.to_vec();
            c.find_shortest_separator(&mut s, limit);
            assert_eq!(s, want, "{what}");
        }
        let mut k = b"\xff\xffa\xff".to_vec();
        c.find_short_successor(&mut k);
        assert_eq!(k, b"\xff\xffb");
        let mut k = b"\xff\xff".to_vec();
        c.find_short_successor(&mut k);
        assert_eq!(k, b"\xff\xff");
    }

    #[test]
    fn reverse_orders_backwards() {
        let c = ReverseBytewiseComparator;
        assert_eq!(c.compare(b"a", b"b"), Ordering::Greater);
        assert_eq!(c.compare(b"", b"a"), Ordering::Greater);
    }
}
