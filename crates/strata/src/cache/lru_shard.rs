//! One shard of the LRU cache: a key index over a recency list, bounded by
//! total charge.
//!
//! Reads do not move entries: a hit only marks its entry, and eviction gives
//! a marked entry at the LRU end a second chance (clears the mark and moves
//! it to the MRU end) before evicting the first unmarked one (the CLOCK
//! approximation of LRU). A hit then writes one node, where moving it would
//! write its two neighbours and the list head too, in memory the lookup had
//! no other reason to touch; in a cache of hundreds of megabytes those are
//! cache misses on every block read.
//!
//! The map holds each entry's value beside its list slot, so a hit reads
//! the map's bucket and nothing else; the list's nodes hold keys, charges
//! and links only, and a hit writes its node's mark (a store, which does not
//! wait for the line to arrive the way a load does).
//!
//! Invariants, held whenever the owning lock is not held exclusively: the
//! map and the list hold the same keys, each map entry's slot is that key's
//! list slot, and the list's charge total is at most `capacity`.
//!
//! Entries leaving the shard (evicted, replaced or erased) are pushed onto a
//! caller-supplied list ([`Dropped`]) instead of being dropped here, so the
//! caller can drop them after releasing the shard's lock: dropping a value
//! may free its memory, and that should not stall other threads waiting on
//! the shard. The list keeps a few entries inline, so an insert that
//! evicts one or two entries allocates nothing for the list.

use std::collections::HashMap;
use std::hash::Hash;

use smallvec::SmallVec;

use super::lru_list::LruList;

/// Entries that left a shard, to be dropped once its lock is released.
pub(super) type Dropped<K, V> = SmallVec<[(K, V); 4]>;

/// A key index and recency list under one capacity. Not thread-safe; the
/// cache keeps each shard behind its own read-write lock, and hits
/// ([`LruShard::read_with`]) need it only shared.
pub(super) struct LruShard<K, V> {
    index: HashMap<K, Indexed<V>, ahash::RandomState>,
    list: LruList<K>,
    capacity: usize,
}

/// A map entry: the value and its node's slot in the list.
struct Indexed<V> {
    slot: usize,
    value: V,
}

impl<K, V> LruShard<K, V> {
    /// Estimated bytes the shard spends per entry besides the heap data its
    /// value points to: the slab slot, plus the index entry (key, slot,
    /// value and a control byte) at the hash table's maximum load factor
    /// of 7/8.
    pub(super) const ENTRY_OVERHEAD_BYTES: usize =
        LruList::<K>::SLOT_BYTES + (std::mem::size_of::<(K, Indexed<V>)>() + 1) * 8 / 7;

    /// The most total charge this shard holds.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Total charge of the entries held.
    pub(super) fn usage(&self) -> usize {
        self.list.charge_total()
    }

    /// Number of entries held.
    pub(super) fn len(&self) -> usize {
        self.list.len()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> LruShard<K, V> {
    /// An empty shard holding entries of total charge at most `capacity`.
    pub(super) fn new(capacity: usize) -> Self {
        LruShard {
            index: HashMap::default(),
            list: LruList::new(),
            capacity,
        }
    }

    /// Inserts `key` as the most recently used entry, replacing any entry for
    /// `key`, then evicts least recently used entries until the total charge
    /// fits. Returns false, holding no entry for `key`, if `charge` exceeds
    /// the capacity (or the capacity is 0).
    pub(super) fn insert(
        &mut self,
        key: K,
        value: V,
        charge: usize,
        dropped: &mut Dropped<K, V>,
    ) -> bool {
        // Remove first: the old entry's charge must not count against the new
        // one, and a rejected insert must not leave a stale value behind.
        if let Some(old) = self.remove(&key) {
            dropped.push(old);
        }
        if self.capacity == 0 || charge > self.capacity {
            return false;
        }
        // `capacity - charge` cannot underflow (checked above), and comparing
        // against it cannot overflow where `usage + charge` might.
        self.evict_while_over(self.capacity - charge, dropped);
        let slot = self.list.push_mru(key.clone(), charge);
        self.index.insert(key, Indexed { slot, value });
        self.check_invariants_if_enabled();
        true
    }

    /// `f` of the value for `key`, which is marked as read; no clone.
    pub(super) fn read_with<R>(&self, key: &K, f: impl FnOnce(&V) -> R) -> Option<R> {
        let Indexed { slot, value } = self.index.get(key)?;
        let r = f(value);
        self.list.mark_referenced(*slot);
        Some(r)
    }

    /// Removes and returns the entry for `key`.
    pub(super) fn remove(&mut self, key: &K) -> Option<(K, V)> {
        let Indexed { slot, value } = self.index.remove(key)?;
        let key = self.list.remove(slot);
        self.check_invariants_if_enabled();
        Some((key, value))
    }

    /// Removes every entry whose key satisfies `pred`. O(entries).
    pub(super) fn remove_if(&mut self, pred: &dyn Fn(&K) -> bool, dropped: &mut Dropped<K, V>) {
        for (key, Indexed { slot, value }) in self.index.extract_if(|key, _| pred(key)) {
            self.list.remove(slot);
            dropped.push((key, value));
        }
        self.check_invariants_if_enabled();
    }

    /// Sets the capacity and evicts least recently used entries until the
    /// total charge fits; capacity 0 empties the shard.
    pub(super) fn set_capacity(&mut self, capacity: usize, dropped: &mut Dropped<K, V>) {
        self.capacity = capacity;
        if capacity == 0 {
            // Zero-charge entries fit under any total, but capacity 0 means
            // nothing is cached.
            while self.evict_lru(dropped) {}
        } else {
            self.evict_while_over(capacity, dropped);
        }
        self.check_invariants_if_enabled();
    }

    /// Evicts least recently used entries while the total charge exceeds
    /// `usage_max`.
    fn evict_while_over(&mut self, usage_max: usize, dropped: &mut Dropped<K, V>) {
        // Each pass removes an entry, so this runs at most `len` times.
        while self.list.charge_total() > usage_max {
            let evicted = self.evict_lru(dropped);
            assert!(evicted, "charge total > 0 with an empty LRU list");
        }
    }

    /// Evicts the least recently used entry not read since it was last
    /// passed over; false if the shard is empty. Each pass over a marked
    /// entry clears its mark, so this takes at most `len + 1` steps.
    fn evict_lru(&mut self, dropped: &mut Dropped<K, V>) -> bool {
        let slot = loop {
            let Some(slot) = self.list.lru() else {
                return false;
            };
            if !self.list.second_chance(slot) {
                break slot;
            }
        };
        let key = self.list.remove(slot);
        let Some(indexed) = self.index.remove(&key) else {
            panic!("evicted LRU entry was not indexed");
        };
        assert_eq!(
            indexed.slot, slot,
            "evicted LRU entry indexed at another slot"
        );
        dropped.push((key, indexed.value));
        true
    }

    fn check_invariants_if_enabled(&self) {
        #[cfg(feature = "invariants")]
        self.check_invariants();
    }

    /// Panics unless the index, the list and the capacity agree. O(entries).
    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn check_invariants(&self) {
        self.list.check_invariants();
        assert_eq!(self.index.len(), self.list.len(), "index and list sizes");
        for (slot, key) in self.list.iter_mru_to_lru() {
            assert_eq!(
                self.index.get(key).map(|e| e.slot),
                Some(slot),
                "index disagrees with list"
            );
        }
        assert!(
            self.usage() <= self.capacity,
            "shard usage {} over capacity {}",
            self.usage(),
            self.capacity
        );
    }

    /// Keys from most to least recently used.
    #[cfg(test)]
    pub(super) fn keys_mru_to_lru(&self) -> Vec<K> {
        self.list
            .iter_mru_to_lru()
            .map(|(_, key)| key.clone())
            .collect()
    }
}
