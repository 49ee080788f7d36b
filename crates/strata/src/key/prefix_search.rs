//! Binary search over sorted internal keys through an array of their
//! 8-byte user-key prefixes, shared by the level file search
//! (`version::file_search`) and the index search inside a table
//! (`sst::index_array`).
//!
//! A key's *prefix* is the first 8 bytes of its user key as a big-endian
//! `u64`, zero padded. Under bytewise order the prefix is monotone: `a <= b`
//! implies `prefix(a) <= prefix(b)` (reverse bytewise: `>=`). So in a sorted
//! array of keys, an entry whose prefix comes before the target's is before
//! the target, one whose prefix comes after it is after it, and only the run
//! of entries with exactly the target's prefix needs full-key comparisons.
//! Those are made with the comparator's type known at compile time, so they
//! inline to a `memcmp`. The end of the run is found by galloping, so its
//! cost grows with the run, not the array.

use std::cmp::Ordering;

use super::{
    compare_internal, extract_user_key, BuiltinOrder, BytewiseComparator, Comparator,
    ReverseBytewiseComparator,
};

/// The first 8 bytes of `user_key` as a big-endian integer, zero padded.
#[inline]
pub(crate) fn key_prefix(user_key: &[u8]) -> u64 {
    match user_key.first_chunk::<8>() {
        Some(head) => u64::from_be_bytes(*head),
        None => {
            let mut bytes = [0u8; 8];
            bytes[..user_key.len()].copy_from_slice(user_key);
            u64::from_be_bytes(bytes)
        }
    }
}

/// A comparator whose order is known at compile time, and what that order
/// means for key prefixes.
pub(crate) trait PrefixOrder: Comparator + Default {
    /// True if every key with prefix `a` sorts before every key with prefix
    /// `b`.
    fn prefix_before(a: u64, b: u64) -> bool;
}

impl PrefixOrder for BytewiseComparator {
    #[inline]
    fn prefix_before(a: u64, b: u64) -> bool {
        a < b
    }
}

impl PrefixOrder for ReverseBytewiseComparator {
    #[inline]
    fn prefix_before(a: u64, b: u64) -> bool {
        a > b
    }
}

/// The index of the first key at or after the internal key `ikey` under
/// the internal-key order over `C`, among sorted internal keys whose
/// prefixes are `prefixes` and whose `i`-th key is `key_at(i)`;
/// `prefixes.len()` if none is.
#[inline]
pub(crate) fn lower_bound_by_prefix<'a, C: PrefixOrder>(
    prefixes: &[u64],
    key_at: impl Fn(usize) -> &'a [u8],
    ikey: &[u8],
) -> usize {
    let target = key_prefix(extract_user_key(ikey));
    let (start, run) = if prefixes.first() == prefixes.last() {
        // Every key has the same prefix (or there are none): searching the
        // prefixes could only cost time.
        match prefixes.first() {
            Some(&p) if p == target => (0, prefixes.len()),
            Some(&p) if C::prefix_before(p, target) => return prefixes.len(),
            _ => return 0,
        }
    } else {
        let start = prefixes.partition_point(|&p| C::prefix_before(p, target));
        match prefixes.get(start..) {
            Some(rest) if rest.first() == Some(&target) => (start, equal_run(rest, target)),
            _ => return start,
        }
    };
    // Binary search over [start, start + run) with full keys.
    let user = C::default();
    let (mut lo, mut hi) = (start, start + run);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if compare_internal(&user, key_at(mid), ikey) == Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// [`lower_bound_by_prefix`] under the built-in `order`, resolved here once
/// per search; None for a user comparator (no built-in order), whose
/// callers search full keys through the comparator instead.
#[inline]
pub(crate) fn lower_bound_in<'a>(
    order: Option<BuiltinOrder>,
    prefixes: &[u64],
    key_at: impl Fn(usize) -> &'a [u8],
    ikey: &[u8],
) -> Option<usize> {
    Some(match order? {
        BuiltinOrder::Bytewise => {
            lower_bound_by_prefix::<BytewiseComparator>(prefixes, key_at, ikey)
        }
        BuiltinOrder::ReverseBytewise => {
            lower_bound_by_prefix::<ReverseBytewiseComparator>(prefixes, key_at, ikey)
        }
    })
}

/// Compares the internal keys `a` and `b` under the internal-key order over
/// the built-in `order`, statically dispatched (an inlined `memcmp`); through
/// `icmp` for a user comparator (`order` is `None`).
#[inline]
pub(crate) fn compare_internal_in(
    order: Option<BuiltinOrder>,
    icmp: &dyn Comparator,
    a: &[u8],
    b: &[u8],
) -> Ordering {
    match order {
        Some(BuiltinOrder::Bytewise) => compare_internal(&BytewiseComparator, a, b),
        Some(BuiltinOrder::ReverseBytewise) => compare_internal(&ReverseBytewiseComparator, a, b),
        None => icmp.compare(a, b),
    }
}

/// Length of the run of `target` at the start of `prefixes`, whose first
/// element is `target`. Galloping, so O(log run) rather than O(log len):
/// runs are short unless many keys share their first 8 bytes.
pub(crate) fn equal_run(prefixes: &[u64], target: u64) -> usize {
    debug_assert_eq!(prefixes.first(), Some(&target));
    // prefixes[known] == target; prefixes[known + step] is the next probe.
    let (mut known, mut step) = (0usize, 1usize);
    while prefixes.get(known + step) == Some(&target) {
        known += step;
        step *= 2; // at most 64 doublings before known + step leaves the slice
    }
    let limit = (known + step).min(prefixes.len());
    let rest = prefixes.get(known + 1..limit).unwrap_or_default();
    known + 1 + rest.partition_point(|&p| p == target)
}
