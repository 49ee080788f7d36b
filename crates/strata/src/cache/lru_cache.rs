//! The sharded LRU cache; its design is documented on [`LruCache`].

use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use smallvec::SmallVec;

use super::lru_shard::{key_hash, Dropped, LruShard};

/// When the shard count is chosen automatically, each shard holds at least
/// this much capacity (RocksDB's default minimum shard size).
pub const MIN_SHARD_CAPACITY_BYTES: usize = 512 * 1024;

/// Most shard bits chosen automatically: at most 64 shards.
pub const DEFAULT_SHARD_BITS_MAX: u32 = 6;

/// Most keys [`LruCache::get_many_with`] takes in one call.
pub(crate) const GET_MANY_MAX: usize = 16;

/// Most shard bits accepted from the caller (RocksDB rejects 20 and up).
pub const SHARD_BITS_MAX: u32 = 19;

/// The shard bits RocksDB would choose for `capacity`: as many as give each
/// shard at least [`MIN_SHARD_CAPACITY_BYTES`], at most
/// [`DEFAULT_SHARD_BITS_MAX`], and 0 (one shard) for small caches.
pub fn default_shard_bits(capacity: usize) -> u32 {
    match capacity / MIN_SHARD_CAPACITY_BYTES {
        0 => 0,
        shards => shards.ilog2().min(DEFAULT_SHARD_BITS_MAX),
    }
}

/// A shard and its counters, aligned to a cache line so that threads busy
/// in neighbouring shards do not invalidate each other's lines.
#[repr(align(64))]
struct Shard<K, V> {
    lru: RwLock<LruShard<K, V>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// A concurrent LRU cache of `K` to `V`, bounded by the total charge
/// (usually bytes) of its entries, in the manner of RocksDB's `LRUCache`.
///
/// A key's hash (computed once per call) picks its shard (its upper bits),
/// and places the key in that shard's index; each shard is
/// an independent LRU under its own `parking_lot::RwLock`, so threads working
/// on different shards do not contend, and hits on one shard hold its lock
/// shared: a reader descheduled during a hit (more threads than cores)
/// holds up only that shard's inserts, not the other readers. Each shard
/// keeps its entries (key, value, charge) in the nodes of a doubly linked
/// recency list, stored in a slab that grows a chunk at a time, and finds
/// them through a hash table of slot numbers (5 bytes a bucket), so insert,
/// lookup and eviction are O(1), a hit reads a bucket and a node, and what
/// the cache takes for itself stays within the per-entry overhead it asks
/// callers to charge ([`ENTRY_OVERHEAD_BYTES`](Self::ENTRY_OVERHEAD_BYTES)). A
/// hit marks its entry instead of moving it; eviction gives a marked entry
/// at the LRU end a second chance (RocksDB's `LRUCache` relinks on every
/// hit; CLOCK-style caches such as its `HyperClockCache` do not, which is
/// what this follows). The capacity is split between
/// the shards so that their capacities add up exactly to the total: the total
/// charge held never exceeds [`capacity`](Self::capacity).
///
/// Thread safety: every method takes `&self`; share the cache in an `Arc`.
///
/// Lookups return clones of the values, which stay valid after the entry is
/// evicted or erased, so the cache needs no pinning or reference counting.
/// The cost is that memory held by clones still in use is not counted
/// against the capacity, as in RocksDB's cache without a strict capacity
/// limit, where pinned entries may push memory use past the capacity.
pub struct LruCache<K, V> {
    shards: Box<[Shard<K, V>]>,
    shard_bits: u32,
    /// The total capacity; its lock also serializes `set_capacity` calls so
    /// that the shards always share one total.
    capacity: Mutex<usize>,
}

impl<K, V> LruCache<K, V>
where
    K: Hash + Eq + Clone + Send + Sync,
    V: Clone + Send + Sync,
{
    /// A cache holding entries of total charge at most `capacity`, split over
    /// `2^num_shard_bits` shards; `None` chooses up to 64 shards, each of at
    /// least 512 KiB.
    /// A capacity of 0 caches nothing.
    ///
    /// # Panics
    ///
    /// If `num_shard_bits` exceeds 19.
    pub fn new(capacity: usize, num_shard_bits: Option<u32>) -> Self {
        let shard_bits = num_shard_bits.unwrap_or_else(|| default_shard_bits(capacity));
        assert!(
            shard_bits <= SHARD_BITS_MAX,
            "num_shard_bits {shard_bits} is over the maximum of {SHARD_BITS_MAX}"
        );
        let num_shards = 1usize << shard_bits;
        let shards = (0..num_shards)
            .map(|i| Shard {
                lru: RwLock::new(LruShard::new(shard_capacity(capacity, num_shards, i))),
                hits: AtomicU64::new(0),
                misses: AtomicU64::new(0),
            })
            .collect();
        LruCache {
            shards,
            shard_bits,
            capacity: Mutex::new(capacity),
        }
    }

    /// Inserts `key` as the most recently used entry with the given `charge`
    /// (its cost against the capacity, usually bytes), replacing any entry for
    /// `key`. Least recently used entries of the key's shard are evicted until
    /// the shard's usage fits its capacity.
    ///
    /// An entry whose charge exceeds its shard's capacity is not inserted (an
    /// entry already held for `key` is still removed, so no stale value
    /// remains); the result is then false.
    ///
    /// Charge should include the cache's own bookkeeping per entry (as
    /// the block cache's charge does): entries of charge 0 are
    /// evicted only when they reach the LRU end, so their number is not
    /// bounded by the capacity.
    pub fn insert(&self, key: K, value: V, charge: usize) -> bool {
        let mut dropped = Dropped::new();
        let hash = key_hash(&key);
        let inserted = self
            .shard(hash)
            .lru
            .write()
            .insert(key, hash, value, charge, &mut dropped);
        // The guard is gone: dropping values (possibly freeing them) here
        // does not hold up other threads.
        drop(dropped);
        inserted
    }

    /// A clone of the value cached for `key`, which becomes the most recently
    /// used entry of its shard. Counts a hit or a miss.
    pub fn get(&self, key: &K) -> Option<V> {
        self.get_with(key, |_| {})
    }

    /// [`LruCache::get`], calling `on_hit` with the cached value before it
    /// is cloned (under the shard's lock, shared, so it must be short). A
    /// reader uses it to start loading the parts of the value it will read,
    /// so that their cache misses overlap the clone's.
    pub fn get_with(&self, key: &K, on_hit: impl FnOnce(&V)) -> Option<V> {
        self.read_with(key, |value| {
            on_hit(value);
            value.clone()
        })
    }

    /// `f` of the cached value for `key`, called where the value lies,
    /// under the shard's lock (shared), without cloning it: for a reader
    /// that needs only an answer from the value (a filter probe), not the
    /// value itself. Counted as a hit or a miss like [`LruCache::get`]. `f`
    /// must be short and must not call back into this cache.
    pub fn read_with<R>(&self, key: &K, f: impl FnOnce(&V) -> R) -> Option<R> {
        let hash = key_hash(key);
        let shard = self.shard(hash);
        let r = shard.lru.read().read_with(key, hash, f);
        let counter = if r.is_some() {
            &shard.hits
        } else {
            &shard.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        r
    }

    /// [`LruCache::get_with`] for each key of `keys` (at most
    /// [`GET_MANY_MAX`]), together: `out[i]` becomes
    /// the value for `keys[i]` (or `None`), and `on_hit(i, value)` is called
    /// for each hit before any value is cloned. Counts hits and misses.
    ///
    /// The lookups run while the read locks of all the shards they touch are
    /// held, each taken once, in shard order, and released after the last
    /// clone. Taking or releasing a lock is an atomic operation, and on x86
    /// one waits for every earlier load and store: one lookup after another,
    /// each under its own lock, waits out each lookup's cache misses (its
    /// index bucket, its list slot, its mark) before the next one's start.
    /// Under the locks taken together, the misses of all the lookups
    /// overlap, and the clones (atomic increments) then find their lines
    /// cached. The fixed order keeps two batches from deadlocking on
    /// writers parked on their shards; writers take one shard at a time.
    pub(crate) fn get_many_with(
        &self,
        keys: &[K],
        mut on_hit: impl FnMut(usize, &V),
        out: &mut [Option<V>],
    ) {
        const N: usize = GET_MANY_MAX;
        assert!(keys.len() <= N && out.len() == keys.len());
        let mut hashes = [0u64; N];
        let mut shard_of = [0usize; N];
        for (i, key) in keys.iter().enumerate() {
            hashes[i] = key_hash(key);
            shard_of[i] = self.shard_index(hashes[i]);
        }
        let mut distinct: SmallVec<[usize; N]> = shard_of[..keys.len()].iter().copied().collect();
        distinct.sort_unstable();
        distinct.dedup();
        let guards: SmallVec<[_; N]> = distinct
            .iter()
            .map(|&s| self.shards[s].lru.read())
            .collect();
        // (hits, misses) of each locked shard, added to its counters once.
        let mut counts: SmallVec<[(u64, u64); N]> = SmallVec::from_elem((0, 0), distinct.len());
        let mut found: SmallVec<[Option<&V>; N]> = SmallVec::new();
        for (i, key) in keys.iter().enumerate() {
            let g = distinct
                .binary_search(&shard_of[i])
                .expect("every key's shard is locked");
            let value = guards[g].get_marked(key, hashes[i]);
            match value {
                Some(v) => {
                    counts[g].0 += 1;
                    on_hit(i, v);
                }
                None => counts[g].1 += 1,
            }
            found.push(value);
        }
        for (slot, value) in out.iter_mut().zip(&found) {
            *slot = value.cloned();
        }
        drop(found);
        drop(guards);
        for (&s, &(hits, misses)) in distinct.iter().zip(&counts) {
            let shard = &self.shards[s];
            if hits > 0 {
                shard.hits.fetch_add(hits, Ordering::Relaxed);
            }
            if misses > 0 {
                shard.misses.fetch_add(misses, Ordering::Relaxed);
            }
        }
    }

    /// True if `key` is cached (counting nothing, marking it used); false
    /// otherwise, counted as a miss: for a reader that asks before it
    /// reads ahead and inserts the value, whose own lookup then hits and
    /// counts the hit.
    pub(crate) fn cached_or_count_miss(&self, key: &K) -> bool {
        let hash = key_hash(key);
        let shard = self.shard(hash);
        let hit = shard.lru.read().read_with(key, hash, |_| ()).is_some();
        if !hit {
            shard.misses.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// Removes the entry for `key`, if any. Clones already handed out stay
    /// valid.
    pub fn erase(&self, key: &K) {
        let hash = key_hash(key);
        let removed = self.shard(hash).lru.write().remove(key, hash);
        drop(removed);
    }

    /// Removes every entry whose key satisfies `pred`, for example all blocks
    /// of a deleted file. Visits every entry, one shard at a time; `pred` runs
    /// under the shard's lock and must not call back into this cache.
    pub fn erase_if(&self, pred: impl Fn(&K) -> bool) {
        let mut dropped = Dropped::new();
        for shard in self.shards.iter() {
            shard.lru.write().remove_if(&pred, &mut dropped);
            dropped.clear();
        }
    }

    /// Changes the capacity, evicting least recently used entries from each
    /// shard until it fits its new share. Capacity 0 empties the cache.
    pub fn set_capacity(&self, capacity: usize) {
        let mut total = self.capacity.lock();
        *total = capacity;
        let mut dropped = Dropped::new();
        for (i, shard) in self.shards.iter().enumerate() {
            let shard_capacity = shard_capacity(capacity, self.shards.len(), i);
            shard.lru.write().set_capacity(shard_capacity, &mut dropped);
            dropped.clear();
        }
    }

    /// The shard of a key with [`key_hash`] `hash`: its upper bits.
    fn shard(&self, hash: u64) -> &Shard<K, V> {
        &self.shards[self.shard_index(hash)]
    }

    /// Index of the shard of a key of [`key_hash`] `hash`.
    fn shard_index(&self, hash: u64) -> usize {
        match self.shard_bits {
            0 => 0,
            bits => (hash >> (u64::BITS - bits)) as usize,
        }
    }

    /// Panics unless every shard is consistent and the shard capacities add
    /// up to the total.
    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        let capacity = self.capacity();
        let mut shard_capacity_sum = 0;
        for shard in self.shards.iter() {
            let lru = shard.lru.read();
            lru.check_invariants();
            shard_capacity_sum += lru.capacity();
        }
        assert_eq!(shard_capacity_sum, capacity, "shard capacities");
    }

    /// Keys of shard `shard` from most to least recently used.
    #[cfg(test)]
    pub(super) fn keys_mru_to_lru(&self, shard: usize) -> Vec<K> {
        self.shards[shard].lru.read().keys_mru_to_lru()
    }
}

impl<K, V> LruCache<K, V> {
    /// Most bytes of bookkeeping the cache keeps per entry (slab slot with
    /// the key and the value's inline part, and the index's share); callers
    /// add it to an entry's charge so that the capacity bounds real memory.
    /// Besides it, each shard may keep about 10 KiB, and the slots of the
    /// most entries it has held at once.
    pub const ENTRY_OVERHEAD_BYTES: usize = LruShard::<K, V>::ENTRY_OVERHEAD_BYTES;

    /// Total charge of the entries held. Shards are read one at a time, so
    /// under concurrent writes this is a recent value, not a snapshot.
    pub fn usage(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lru.read().usage())
            .sum()
    }

    /// The most total charge the cache holds.
    pub fn capacity(&self) -> usize {
        *self.capacity.lock()
    }

    /// Number of entries held (read shard by shard, like [`usage`](Self::usage)).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| shard.lru.read().len()).sum()
    }

    /// True if the cache holds no entries.
    pub fn is_empty(&self) -> bool {
        self.shards.iter().all(|shard| shard.lru.read().len() == 0)
    }

    /// Number of shards (a power of two).
    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    /// Lookups that found their key.
    pub fn hits(&self) -> u64 {
        self.shards
            .iter()
            .map(|shard| shard.hits.load(Ordering::Relaxed))
            .sum()
    }

    /// Lookups that did not find their key.
    pub fn misses(&self) -> u64 {
        self.shards
            .iter()
            .map(|shard| shard.misses.load(Ordering::Relaxed))
            .sum()
    }
}

impl<K, V> fmt::Debug for LruCache<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LruCache")
            .field("capacity", &self.capacity())
            .field("usage", &self.usage())
            .field("len", &self.len())
            .field("num_shards", &self.num_shards())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}

/// Shard `i`'s share of `capacity`: an even split, the remainder spread one
/// unit each over the first shards, so that the shares add up to `capacity`.
fn shard_capacity(capacity: usize, num_shards: usize, i: usize) -> usize {
    capacity / num_shards + usize::from(i < capacity % num_shards)
}
