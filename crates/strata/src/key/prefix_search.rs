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
//!
//! A long array (a table's index, thousands of entries) can come with a
//! *summary*: the last prefix of every full bucket of [`SUMMARY_STRIDE`]
//! entries ([`summarize`]). The search then runs over the summary, small
//! enough to stay in the CPU caches across lookups, and over one bucket,
//! whose few cache lines are all requested at once: one memory latency
//! instead of one per halving of a cold array.

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

/// Entries per bucket of a prefix summary: 32 prefixes are 256 bytes,
/// four cache lines.
pub(crate) const SUMMARY_STRIDE: usize = 32;

/// The summary of `prefixes` (see the module comment): the last prefix of
/// each full bucket of [`SUMMARY_STRIDE`] entries, so
/// `prefixes.len() / SUMMARY_STRIDE` of them.
pub(crate) fn summarize(prefixes: &[u64]) -> Vec<u64> {
    prefixes
        .chunks_exact(SUMMARY_STRIDE)
        .map(|bucket| bucket[SUMMARY_STRIDE - 1])
        .collect()
}

/// The number of `prefixes` that come before `target` under `C`
/// (`prefixes.partition_point(|p| C::prefix_before(p, target))`), through
/// `summary` (empty, or [`summarize`]`(prefixes)`).
#[inline]
fn prefixes_before<C: PrefixOrder>(prefixes: &[u64], summary: &[u64], target: u64) -> usize {
    if summary.is_empty() {
        return prefixes.partition_point(|&p| C::prefix_before(p, target));
    }
    debug_assert_eq!(summary.len(), prefixes.len() / SUMMARY_STRIDE);
    // Every prefix of buckets before `bucket` is at most that bucket's last
    // one, which is before `target`; the last prefix of `bucket` (if it is
    // full) is not, so the answer is inside it.
    let bucket = summary.partition_point(|&p| C::prefix_before(p, target));
    let lo = bucket * SUMMARY_STRIDE;
    let hi = (lo + SUMMARY_STRIDE).min(prefixes.len());
    let slots = &prefixes[lo..hi];
    crate::util::prefetch::prefetch_slice(slots);
    lo + slots.partition_point(|&p| C::prefix_before(p, target))
}

/// The index of the first key at or after the internal key `ikey` under
/// the internal-key order over `C`, among sorted internal keys whose
/// prefixes are `prefixes` (summarized by `summary`: empty, or
/// [`summarize`]`(prefixes)`) and whose `i`-th key is `key_at(i)`;
/// `prefixes.len()` if none is.
/// With `USER_KEYS`, the keys and `ikey` are user keys instead, ordered by
/// `C` itself.
#[inline]
fn lower_bound_by_prefix_of<'a, C: PrefixOrder, const USER_KEYS: bool>(
    prefixes: &[u64],
    summary: &[u64],
    key_at: impl Fn(usize) -> &'a [u8],
    ikey: &[u8],
) -> usize {
    let target = key_prefix(if USER_KEYS {
        ikey
    } else {
        extract_user_key(ikey)
    });
    let (start, run) = if prefixes.first() == prefixes.last() {
        // Every key has the same prefix (or there are none): searching the
        // prefixes could only cost time.
        match prefixes.first() {
            Some(&p) if p == target => (0, prefixes.len()),
            Some(&p) if C::prefix_before(p, target) => return prefixes.len(),
            _ => return 0,
        }
    } else {
        let start = prefixes_before::<C>(prefixes, summary, target);
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
        let order = if USER_KEYS {
            user.compare(key_at(mid), ikey)
        } else {
            compare_internal(&user, key_at(mid), ikey)
        };
        if order == Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// [`lower_bound_by_prefix_of`] over internal keys under the built-in `order`, resolved here once
/// per search; None for a user comparator (no built-in order), whose
/// callers search full keys through the comparator instead.
#[inline]
pub(crate) fn lower_bound_in<'a>(
    order: Option<BuiltinOrder>,
    prefixes: &[u64],
    summary: &[u64],
    key_at: impl Fn(usize) -> &'a [u8],
    ikey: &[u8],
) -> Option<usize> {
    lower_bound_in_of::<false>(order, prefixes, summary, key_at, ikey)
}

/// [`lower_bound_in`] over sorted user keys (`key_at(i)`, with their
/// prefixes `prefixes`): the first at or after the user key `user_key`.
#[inline]
pub(crate) fn lower_bound_user_in<'a>(
    order: Option<BuiltinOrder>,
    prefixes: &[u64],
    summary: &[u64],
    key_at: impl Fn(usize) -> &'a [u8],
    user_key: &[u8],
) -> Option<usize> {
    lower_bound_in_of::<true>(order, prefixes, summary, key_at, user_key)
}

/// The order's dispatch of [`lower_bound_in`] and [`lower_bound_user_in`].
#[inline]
fn lower_bound_in_of<'a, const USER_KEYS: bool>(
    order: Option<BuiltinOrder>,
    prefixes: &[u64],
    summary: &[u64],
    key_at: impl Fn(usize) -> &'a [u8],
    key: &[u8],
) -> Option<usize> {
    Some(match order? {
        BuiltinOrder::Bytewise => lower_bound_by_prefix_of::<BytewiseComparator, USER_KEYS>(
            prefixes, summary, key_at, key,
        ),
        BuiltinOrder::ReverseBytewise => lower_bound_by_prefix_of::<
            ReverseBytewiseComparator,
            USER_KEYS,
        >(prefixes, summary, key_at, key),
    })
}

/// Compares the user keys `a` and `b` under the built-in `order`,
/// statically dispatched; through `ucmp` for a user comparator.
#[inline]
pub(crate) fn compare_user_in(
    order: Option<BuiltinOrder>,
    ucmp: &dyn Comparator,
    a: &[u8],
    b: &[u8],
) -> Ordering {
    match order {
        Some(BuiltinOrder::Bytewise) => BytewiseComparator.compare(a, b),
        Some(BuiltinOrder::ReverseBytewise) => ReverseBytewiseComparator.compare(a, b),
        None => ucmp.compare(a, b),
    }
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

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The summarized search gives `partition_point`'s answer, for arrays
    /// around the bucket size and long runs of equal prefixes, in both
    /// orders.
    #[test]
    fn summarized_search_matches_partition_point() {
        let mut rng = StdRng::seed_from_u64(7);
        for len in (0..200).chain([255, 256, 257, 1000, 4099]) {
            for _ in 0..20 {
                let spread = rng.gen_range(1..=2 * len as u64 + 2);
                let mut prefixes: Vec<u64> = (0..len).map(|_| rng.gen_range(0..spread)).collect();
                prefixes.sort_unstable();
                let summary = summarize(&prefixes);
                assert_eq!(summary.len(), len / SUMMARY_STRIDE);
                let mut reversed = prefixes.clone();
                reversed.reverse();
                let rsummary = summarize(&reversed);
                for target in 0..=spread {
                    assert_eq!(
                        prefixes_before::<BytewiseComparator>(&prefixes, &summary, target),
                        prefixes.partition_point(|&p| p < target),
                        "len {len} target {target}"
                    );
                    assert_eq!(
                        prefixes_before::<ReverseBytewiseComparator>(&reversed, &rsummary, target),
                        reversed.partition_point(|&p| p > target),
                        "reversed, len {len} target {target}"
                    );
                }
            }
        }
    }
}
