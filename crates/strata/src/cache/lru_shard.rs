//! One shard of the LRU cache: a key index over a recency list, bounded by
//! total charge.
//!
//! Reads do not move entries: a hit only marks its entry, and eviction gives
//! a marked entry at the LRU end a second chance (clears the mark and moves
//! it to the MRU end) before evicting the first unmarked one (the CLOCK
//! approximation of LRU). A hit then writes one mark, where moving it would
//! write its two neighbours and the list head too, in memory the lookup had
//! no other reason to touch; in a cache of hundreds of megabytes those are
//! cache misses on every block read.
//!
//! The index is a hash table of slot numbers (4 bytes a bucket); each key
//! lives once, in its list slot beside the value (and apart from its
//! links, see [`LruList`]). A hit reads the table's bucket, which is small
//! enough to stay in the CPU's caches, then the slot's key and value, and
//! marks the entry. An earlier version kept each value (96 bytes for a
//! block) and key in the table's buckets: a hash table that inserts and
//! removes at a steady size grows until it is 7/32 to 7/16 full (it grows
//! when its tombstones use up its spare buckets while it is over 7/16
//! full, and never shrinks), so those buckets took 4.6 times an entry's
//! size each, 127 MB against 1 GB of blocks in a mixed run, and the
//! charge, which assumed a table 7/8 full, missed half of it.
//!
//! Invariants, held whenever the owning lock is not held exclusively: the
//! index holds exactly the list's slots, each under the hash of its key,
//! which the list keeps; the list's charge total is at most `capacity`; the index takes at
//! most [`LruShard::INDEX_BYTES_PER_ENTRY_MAX`] per entry (a table at least
//! 7/64 full) and [`INDEX_SLACK_BYTES`].
//!
//! Entries leaving the shard (evicted, replaced or erased) are pushed onto a
//! caller-supplied list ([`Dropped`]) instead of being dropped here, so the
//! caller can drop them after releasing the shard's lock: dropping a value
//! may free its memory, and that should not stall other threads waiting on
//! the shard. The list keeps a few entries inline, so an insert that
//! evicts one or two entries allocates nothing for the list.

use std::hash::Hash;

use hashbrown::HashTable;
use smallvec::SmallVec;

use super::lru_list::LruList;

/// Entries that left a shard, to be dropped once its lock is released.
pub(super) type Dropped<K, V> = SmallVec<[(K, V); 4]>;

/// Hashes keys, once per operation: the hash's top bits pick the shard
/// ([`super::LruCache`]), and [`index_hash`] of it places the key in the
/// shard's index. Fixed seeds, so a key always maps to the same shard.
/// aHash rather than the standard SipHash: SipHash's ~20 ns a time showed
/// in block cache hits (keys are the engine's own file ids and offsets, not
/// user input, so HashDoS resistance buys nothing here).
static KEY_HASHER: ahash::RandomState = ahash::RandomState::with_seeds(
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
);

/// The hash of `key` that the cache and its shards take.
pub(super) fn key_hash<K: Hash>(key: &K) -> u64 {
    KEY_HASHER.hash_one(key)
}

/// Where a key with [`key_hash`] `hash` goes in its shard's index. The
/// table takes a bucket from the hash's low bits and a tag from its top 7,
/// which within a shard start with the same shard bits for every key: a
/// multiply by an odd constant carries every bit into the top ones, while
/// each low bit still depends only on the hash's low bits, which the shard
/// choice does not use.
fn index_hash(hash: u64) -> u64 {
    hash.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Bytes of index a shard may take besides its share per entry
/// ([`LruShard::INDEX_BYTES_PER_ENTRY_MAX`]): a table this small is not
/// rebuilt smaller.
pub(super) const INDEX_SLACK_BYTES: usize = 1024;

/// A key index and recency list under one capacity. Not thread-safe; the
/// cache keeps each shard behind its own read-write lock, and hits
/// ([`LruShard::read_with`]) need it only shared.
pub(super) struct LruShard<K, V> {
    /// The list slot of every entry, hashed by the entry's key.
    index: HashTable<u32>,
    list: LruList<K, V>,
    capacity: usize,
}

impl<K, V> LruShard<K, V> {
    /// Most bytes the index takes per entry: a 4-byte slot and a control
    /// byte per bucket, at the lowest load the table keeps, 7/64 (churn
    /// keeps it over 7/32, see the module's notes;
    /// [`LruShard::shrink_index_if_sparse`] rebuilds it when entries leave
    /// for good).
    pub(super) const INDEX_BYTES_PER_ENTRY_MAX: usize =
        ((std::mem::size_of::<u32>() + 1) * 64).div_ceil(7);

    /// Bytes the shard spends per entry besides the heap data its value
    /// points to: its slab slot (key, value, charge, links) and the most its
    /// index takes per entry. An upper bound, so that charges that include
    /// it bound the memory the cache takes, but for a fixed amount per
    /// shard (one partly used slab chunk, [`INDEX_SLACK_BYTES`]) and for the
    /// slab keeping the slots of its peak number of entries: if entries
    /// become fewer and larger, their slots stay (free, and reused).
    pub(super) const ENTRY_OVERHEAD_BYTES: usize =
        LruList::<K, V>::BYTES_PER_ENTRY_MAX + Self::INDEX_BYTES_PER_ENTRY_MAX;

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

    /// Heap bytes the index takes.
    #[cfg(test)]
    pub(super) fn index_bytes(&self) -> usize {
        self.index.allocation_size()
    }

    /// Heap bytes the list's slab takes.
    #[cfg(test)]
    pub(super) fn slab_bytes(&self) -> usize {
        self.list.allocation_bytes()
    }
}

impl<K: Hash + Eq + Clone, V: Clone> LruShard<K, V> {
    /// An empty shard holding entries of total charge at most `capacity`.
    pub(super) fn new(capacity: usize) -> Self {
        LruShard {
            index: HashTable::new(),
            list: LruList::new(),
            capacity,
        }
    }

    /// Inserts `key`, whose [`key_hash`] is `hash`, as the most recently
    /// used entry, replacing any entry for `key`, then evicts least recently
    /// used entries until the total charge fits. Returns false, holding no
    /// entry for `key`, if `charge` exceeds the capacity (or the capacity
    /// is 0).
    pub(super) fn insert(
        &mut self,
        key: K,
        hash: u64,
        value: V,
        charge: usize,
        dropped: &mut Dropped<K, V>,
    ) -> bool {
        // Remove first: the old entry's charge must not count against the new
        // one, and a rejected insert must not leave a stale value behind.
        if let Some(old) = self.remove(&key, hash) {
            dropped.push(old);
        }
        if self.capacity == 0 || charge > self.capacity {
            return false;
        }
        // `capacity - charge` cannot underflow (checked above), and comparing
        // against it cannot overflow where `usage + charge` might.
        self.evict_while_over(self.capacity - charge, dropped);
        let hash = index_hash(hash);
        let slot = self.list.push_mru(key, value, hash, charge);
        let LruShard { index, list, .. } = self;
        index.insert_unique(hash, slot, |&slot| list.hash(slot));
        // Evictions may have taken more entries than the one added.
        self.shrink_index_if_sparse();
        self.check_invariants_if_enabled();
        true
    }

    /// `f` of the value for `key` (of [`key_hash`] `hash`), which is marked
    /// as read; no clone.
    pub(super) fn read_with<R>(&self, key: &K, hash: u64, f: impl FnOnce(&V) -> R) -> Option<R> {
        debug_assert_eq!(hash, key_hash(key));
        let &slot = self
            .index
            .find(index_hash(hash), |&slot| self.list.key(slot) == key)?;
        Some(f(self.list.read_marked(slot)))
    }

    /// The value for `key` (of [`key_hash`] `hash`), which is marked as
    /// read: [`LruShard::read_with`] for a caller that keeps the value
    /// borrowed while it looks up others.
    pub(super) fn get_marked(&self, key: &K, hash: u64) -> Option<&V> {
        debug_assert_eq!(hash, key_hash(key));
        let &slot = self
            .index
            .find(index_hash(hash), |&slot| self.list.key(slot) == key)?;
        Some(self.list.read_marked(slot))
    }

    /// Removes and returns the entry for `key` (of [`key_hash`] `hash`).
    pub(super) fn remove(&mut self, key: &K, hash: u64) -> Option<(K, V)> {
        debug_assert_eq!(hash, key_hash(key));
        let list = &self.list;
        let entry = self
            .index
            .find_entry(index_hash(hash), |&slot| list.key(slot) == key)
            .ok()?;
        let (slot, _) = entry.remove();
        let removed = self.list.remove(slot);
        self.shrink_index_if_sparse();
        self.check_invariants_if_enabled();
        Some(removed)
    }

    /// Removes every entry whose key satisfies `pred`. O(entries).
    pub(super) fn remove_if(&mut self, pred: &dyn Fn(&K) -> bool, dropped: &mut Dropped<K, V>) {
        let LruShard { index, list, .. } = self;
        let mut gone = Vec::new();
        index.retain(|&mut slot| {
            let keep = !pred(list.key(slot));
            if !keep {
                gone.push(slot);
            }
            keep
        });
        for slot in gone {
            dropped.push(self.list.remove(slot));
        }
        self.shrink_index_if_sparse();
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
        self.shrink_index_if_sparse();
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
        match self.index.find_entry(self.list.hash(slot), |&s| s == slot) {
            Ok(entry) => entry.remove(),
            Err(_) => panic!("evicted LRU slot {slot} was not indexed under its key"),
        };
        dropped.push(self.list.remove(slot));
        true
    }

    /// Rebuilds the index at twice its entries if removals left it under
    /// 7/64 full (so that it is then 7/32 to 7/16 full), unless it is
    /// small. Churn at a steady size keeps it over 7/32 by itself (see the
    /// module's notes), so only entries leaving for good (a smaller
    /// capacity, larger entries, erasures) get it here. The gap between
    /// the two loads makes a rebuild, O(entries), follow at least half as
    /// many removals since the table last grew, and makes the table grow
    /// again only after the entries have about doubled. (A rebuild at
    /// 7/32, where a table settles under churn, could repeat every few
    /// inserts: a shard of a full block cache sits near that load.)
    fn shrink_index_if_sparse(&mut self) {
        let len = self.index.len();
        if self.index.allocation_size() > len * Self::INDEX_BYTES_PER_ENTRY_MAX + INDEX_SLACK_BYTES
        {
            let LruShard { index, list, .. } = self;
            index.shrink_to(2 * len, |&slot| list.hash(slot));
        }
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
            let hash = index_hash(key_hash(key));
            assert_eq!(self.list.hash(slot), hash, "slot {slot} kept another hash");
            assert_eq!(
                self.index.find(hash, |&s| self.list.key(s) == key),
                Some(&slot),
                "index disagrees with list"
            );
        }
        let (len, bytes) = (self.index.len(), self.index.allocation_size());
        assert!(
            bytes <= len * Self::INDEX_BYTES_PER_ENTRY_MAX + INDEX_SLACK_BYTES,
            "index of {len} entries takes {bytes} bytes"
        );
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
