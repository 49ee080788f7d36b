//! The run of entries that share the current key's prefix, which the
//! prefix steps (`DBRawIterator::next_prefix`, `prev_prefix`) skip.
//!
//! Every iterator can skip a run by stepping and testing each key
//! (`PrefixRun::covers`); the block, table and level iterators skip
//! faster when the run is an *interval* of the key order
//! (`PrefixRun::is_interval`): then a covered restart key, index
//! separator or file bound proves that everything between the current
//! entry and it is covered too, so whole restart intervals, blocks and
//! files are passed by binary search, and inside a block an entry that
//! shares the run's leading bytes with its predecessor is known covered
//! without rebuilding its key (`PrefixRun::covered_by_shared`).

use crate::key::{extract_user_key, BuiltinOrder, SliceTransform, TRAILER_BYTES};

/// Byte equality without a call into `memcmp` for the short prefixes runs
/// usually have (an 8-byte row is one integer comparison).
#[inline]
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    match (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b)) {
        (Ok(x), Ok(y)) => u64::from_ne_bytes(x) == u64::from_ne_bytes(y),
        _ if a.len() < 8 => a.iter().zip(b).all(|(x, y)| x == y),
        _ => a == b,
    }
}

/// Which user keys belong to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Members {
    /// Keys of at least `len` bytes starting with the run's bytes: a
    /// fixed-length extractor's prefix.
    Fixed,
    /// The one user key equal to the run's bytes: a key outside the
    /// extractor's domain is its own run.
    Exact,
    /// Keys whose prefix, as the extractor computes it, equals the run's
    /// bytes (a user extractor, or the noop one).
    Computed,
}

impl Members {
    /// How a run of `transform` is tested: by its bytes, or whole keys
    /// outside the domain.
    fn of(transform: &SliceTransform, in_domain: bool) -> Members {
        match (in_domain, transform.fixed_len()) {
            (false, _) => Members::Exact,
            (true, Some(_)) => Members::Fixed,
            (true, None) => Members::Computed,
        }
    }
}

/// The set of user keys one prefix step skips (see the module comment).
#[derive(Debug)]
pub struct PrefixRun<'a> {
    transform: &'a SliceTransform,
    bytes: &'a [u8],
    members: Members,
    /// The comparator is a built-in byte order, under which `Fixed` and
    /// `Exact` runs are intervals.
    builtin_order: bool,
}

impl<'a> PrefixRun<'a> {
    /// The run of `user_key`'s prefix (or of `user_key` alone when it is
    /// outside the domain); `bytes` must be that prefix (or the key), as
    /// [`PrefixRun::bytes_of`] gives.
    pub(crate) fn new(
        transform: &'a SliceTransform,
        bytes: &'a [u8],
        in_domain: bool,
        order: Option<BuiltinOrder>,
    ) -> PrefixRun<'a> {
        let members = Members::of(transform, in_domain);
        debug_assert!(members != Members::Fixed || transform.fixed_len() == Some(bytes.len()));
        PrefixRun {
            transform,
            bytes,
            members,
            builtin_order: order.is_some(),
        }
    }

    /// The bytes that name `user_key`'s run, and whether the key is in the
    /// extractor's domain.
    pub(crate) fn bytes_of<'k>(transform: &SliceTransform, user_key: &'k [u8]) -> (&'k [u8], bool) {
        match transform.prefix(user_key) {
            Some(p) => (p, true),
            None => (user_key, false),
        }
    }

    /// The run of another internal key, by the same extractor and order
    /// (for an iterator that finds the run before this one).
    pub(crate) fn of_internal_key<'b>(&self, internal_key: &'b [u8]) -> PrefixRun<'b>
    where
        'a: 'b,
    {
        let (bytes, in_domain) =
            PrefixRun::bytes_of(self.transform, extract_user_key(internal_key));
        PrefixRun {
            transform: self.transform,
            bytes,
            members: Members::of(self.transform, in_domain),
            builtin_order: self.builtin_order,
        }
    }

    /// True if the user key belongs to the run.
    #[inline]
    pub(crate) fn covers_user_key(&self, user_key: &[u8]) -> bool {
        match self.members {
            Members::Fixed => user_key
                .get(..self.bytes.len())
                .is_some_and(|k| short_eq(k, self.bytes)),
            Members::Exact => short_eq(user_key, self.bytes),
            Members::Computed => self.transform.prefix(user_key) == Some(self.bytes),
        }
    }

    /// True if the internal key's user key belongs to the run.
    #[inline]
    pub(crate) fn covers(&self, internal_key: &[u8]) -> bool {
        internal_key.len() >= TRAILER_BYTES && self.covers_user_key(extract_user_key(internal_key))
    }

    /// True when the covered keys form one interval of the key order, so
    /// that a covered key proves every key between it and another covered
    /// key covered.
    #[inline]
    pub(crate) fn is_interval(&self) -> bool {
        self.builtin_order && self.members != Members::Computed
    }

    /// For an internal key that shares `shared` leading bytes with a
    /// covered predecessor and is `len` bytes long in all: `true` when that
    /// alone proves it covered (its key bytes need not be rebuilt).
    #[inline]
    pub(crate) fn covered_by_shared(&self, shared: usize, len: usize) -> bool {
        let n = self.bytes.len();
        match self.members {
            Members::Fixed => shared >= n && len >= n + TRAILER_BYTES,
            Members::Exact => shared >= n && len == n + TRAILER_BYTES,
            Members::Computed => false,
        }
    }

    /// True for the run of a prefix (not of a key outside the domain).
    pub(crate) fn in_domain(&self) -> bool {
        self.members != Members::Exact
    }

    /// The run's bytes: a prefix, or a whole key outside the domain.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.bytes
    }
}
