//! The key index of a cache shard: an open-addressing hash table with
//! linear probing, keyed by the 64-bit hash the cache computes once per
//! key (its upper bits pick the shard, its lower bits the bucket here).
//!
//! Why not `HashMap`: a hit in `HashMap` reads a group of control bytes,
//! then the bucket (two dependent cache misses in a cache of hundreds of
//! megabytes), hashes the key a second time, and offers no way to ask for
//! a key's memory ahead of the lookup. Here a key's bucket is one known
//! address ([`IndexTable::layout`]): a batched lookup (MultiGet)
//! asks for the buckets of all its blocks before it looks any of them up,
//! so their misses overlap, and a hit reads the bucket alone.
//!
//! Removal shifts the following entries of the probe run back (no
//! tombstones), so a lookup stops at the first empty bucket. The table
//! doubles when it would be more than 3/4 full and never shrinks (as
//! `HashMap`, which the shard used before).
//!
//! Invariants (checked by [`IndexTable::check_invariants`]): the length is
//! a power of two or zero; every entry is reachable from its home bucket
//! (`hash & mask`) without crossing an empty bucket; `len` counts the
//! entries; at most 3/4 of the buckets are full.

/// A bucket: empty, or an entry with its key's full hash. Aligned to a
/// cache line, so a bucket of a block cache entry (128 bytes) spans exactly
/// two lines, both asked for by a prefetch.
#[repr(align(64))]
struct Bucket<K, V> {
    hash: u64,
    entry: Option<(K, V)>,
}

/// Buckets in a table's first allocation.
const MIN_BUCKETS: usize = 16;

pub(super) struct IndexTable<K, V> {
    buckets: Box<[Bucket<K, V>]>,
    len: usize,
}

impl<K, V> IndexTable<K, V> {
    /// Bytes of one bucket.
    pub(super) const BUCKET_BYTES: usize = std::mem::size_of::<Bucket<K, V>>();

    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }

    /// Where the table's buckets start and its mask, (0, 0) while it has
    /// none. The home bucket of a hash is at `base + (hash & mask) *
    /// BUCKET_BYTES`: a caller mirrors the pair where it can be read
    /// without the shard's lock, to ask for a key's bucket ahead of its
    /// lookup ([`LruCache::prefetch`](super::LruCache::prefetch)).
    pub(super) fn layout(&self) -> (usize, usize) {
        if self.buckets.is_empty() {
            return (0, 0);
        }
        (self.buckets.as_ptr() as usize, self.mask())
    }
}

impl<K: Eq, V> IndexTable<K, V> {
    pub(super) fn new() -> Self {
        IndexTable {
            buckets: Box::new([]),
            len: 0,
        }
    }

    fn find(&self, hash: u64, key: &K) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut at = hash as usize & mask;
        loop {
            let b = &self.buckets[at];
            match &b.entry {
                None => return None,
                Some((k, _)) if b.hash == hash && k == key => return Some(at),
                Some(_) => at = (at + 1) & mask,
            }
        }
    }

    pub(super) fn get(&self, hash: u64, key: &K) -> Option<&V> {
        let at = self.find(hash, key)?;
        self.buckets[at].entry.as_ref().map(|(_, v)| v)
    }

    /// Adds an entry for `key`, which the table must not hold.
    pub(super) fn insert(&mut self, hash: u64, key: K, value: V) {
        debug_assert!(self.find(hash, &key).is_none(), "key inserted twice");
        if (self.len + 1) * 4 > self.buckets.len() * 3 {
            self.grow();
        }
        self.place(hash, key, value);
        self.len += 1;
    }

    /// Puts an entry in the first empty bucket of its probe run.
    fn place(&mut self, hash: u64, key: K, value: V) {
        let mask = self.mask();
        let mut at = hash as usize & mask;
        while self.buckets[at].entry.is_some() {
            at = (at + 1) & mask;
        }
        self.buckets[at] = Bucket {
            hash,
            entry: Some((key, value)),
        };
    }

    fn grow(&mut self) {
        let size = (self.buckets.len() * 2).max(MIN_BUCKETS);
        let fresh = (0..size)
            .map(|_| Bucket {
                hash: 0,
                entry: None,
            })
            .collect();
        let old = std::mem::replace(&mut self.buckets, fresh);
        for b in old.into_vec() {
            if let Some((k, v)) = b.entry {
                self.place(b.hash, k, v);
            }
        }
    }

    /// Removes and returns the entry for `key`.
    pub(super) fn remove(&mut self, hash: u64, key: &K) -> Option<(K, V)> {
        let at = self.find(hash, key)?;
        Some(self.remove_at(at))
    }

    /// Empties bucket `hole` and shifts back the entries after it in its
    /// probe run that may move there (those whose home bucket does not lie
    /// cyclically after the hole and at or before them), so every entry
    /// stays reachable from its home bucket.
    fn remove_at(&mut self, mut hole: usize) -> (K, V) {
        let mask = self.mask();
        let removed = self.buckets[hole]
            .entry
            .take()
            .expect("removing an empty bucket");
        self.len -= 1;
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            if self.buckets[next].entry.is_none() {
                break;
            }
            let home = self.buckets[next].hash as usize & mask;
            // Distance from home to `next` at least that from the hole to
            // `next`: the hole lies between home and `next`.
            if (next.wrapping_sub(home) & mask) >= (next.wrapping_sub(hole) & mask) {
                let moved = Bucket {
                    hash: self.buckets[next].hash,
                    entry: self.buckets[next].entry.take(),
                };
                self.buckets[hole] = moved;
                hole = next;
            }
        }
        removed
    }

    /// Removes every entry whose key satisfies `pred`, passing each to
    /// `removed`. O(buckets).
    pub(super) fn remove_if(&mut self, pred: impl Fn(&K) -> bool, mut removed: impl FnMut(K, V)) {
        let mut at = 0;
        while at < self.buckets.len() {
            match &self.buckets[at].entry {
                Some((k, _)) if pred(k) => {
                    // An entry shifted back into `at` is looked at next.
                    // Shifts move entries only into the hole left at `at`
                    // or after it, or (wrapping) into buckets before `at`
                    // from the table's start, which were looked at
                    // already: none is skipped.
                    let (k, v) = self.remove_at(at);
                    removed(k, v);
                }
                _ => at += 1,
            }
        }
    }

    /// The entries, in bucket order.
    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.buckets
            .iter()
            .filter_map(|b| b.entry.as_ref().map(|(k, v)| (k, v)))
    }

    /// Panics unless the invariants in the module docs hold.
    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn check_invariants(&self) {
        let n = self.buckets.len();
        assert!(n == 0 || n.is_power_of_two(), "{n} buckets");
        assert!(self.len * 4 <= n * 3, "{} entries in {n} buckets", self.len);
        let mask = self.mask();
        let mut count = 0;
        for (at, b) in self.buckets.iter().enumerate() {
            if b.entry.is_none() {
                continue;
            }
            count += 1;
            let mut i = b.hash as usize & mask;
            while i != at {
                assert!(
                    self.buckets[i].entry.is_some(),
                    "entry at {at} unreachable from its home bucket"
                );
                i = (i + 1) & mask;
            }
        }
        assert_eq!(count, self.len, "len");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        Remove(u8),
        RemoveIf(u8),
        Get(u8),
    }

    /// Few distinct hashes (a key's hash is its value modulo 37, with a
    /// few high bits), so probe runs collide, wrap around the end and
    /// shift back often.
    fn hash_of(k: u8) -> u64 {
        (u64::from(k) % 37) | (u64::from(k) << 56)
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => any::<u8>().prop_map(Op::Insert),
            3 => any::<u8>().prop_map(Op::Remove),
            1 => (2u8..9).prop_map(Op::RemoveIf),
            2 => any::<u8>().prop_map(Op::Get),
        ]
    }

    proptest! {
        /// The table answers as a `HashMap` does under any sequence of
        /// inserts, removals (one key or by predicate) and lookups, and
        /// its invariants hold after each.
        #[test]
        fn matches_a_hash_map(ops in proptest::collection::vec(op(), 1..400)) {
            let mut t = IndexTable::new();
            let mut model = HashMap::new();
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Insert(k) => {
                        if model.insert(k, i).is_some() {
                            t.remove(hash_of(k), &k);
                        }
                        t.insert(hash_of(k), k, i);
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(t.remove(hash_of(k), &k).map(|(_, v)| v), model.remove(&k));
                    }
                    Op::RemoveIf(m) => {
                        let mut gone = Vec::new();
                        t.remove_if(|k| k % m == 0, |k, v| gone.push((k, v)));
                        let mut want: Vec<_> =
                            model.iter().filter(|(k, _)| *k % m == 0).map(|(k, v)| (*k, *v)).collect();
                        model.retain(|k, _| k % m != 0);
                        gone.sort_unstable();
                        want.sort_unstable();
                        prop_assert_eq!(gone, want);
                    }
                    Op::Get(k) => {
                        prop_assert_eq!(t.get(hash_of(k), &k), model.get(&k));
                    }
                }
                t.check_invariants();
                prop_assert_eq!(t.len(), model.len());
            }
            let mut all: Vec<_> = t.iter().map(|(k, v)| (*k, *v)).collect();
            let mut want: Vec<_> = model.into_iter().collect();
            all.sort_unstable();
            want.sort_unstable();
            prop_assert_eq!(all, want);
        }
    }

    #[test]
    fn layout_gives_the_home_bucket() {
        let mut t = IndexTable::new();
        assert_eq!(t.layout(), (0, 0));
        for k in 0..40u64 {
            t.insert(k * 7, k, ());
        }
        let (base, mask) = t.layout();
        assert_eq!(mask, 63);
        // Every entry in its home bucket sits at the address the layout
        // gives for its hash.
        let mut at_home = 0;
        for (i, b) in t.buckets.iter().enumerate() {
            if b.entry.is_some() && b.hash as usize & mask == i {
                let home = base + (b.hash as usize & mask) * IndexTable::<u64, ()>::BUCKET_BYTES;
                assert_eq!(home, std::ptr::from_ref(b) as usize);
                at_home += 1;
            }
        }
        assert!(at_home > 20, "{at_home} entries in their home buckets");
    }
}
