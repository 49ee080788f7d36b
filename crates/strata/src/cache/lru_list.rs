//! A doubly linked recency list over a slab of fixed-size chunks, holding
//! each entry's key and value in one array and its links, charge and hash
//! in another.
//!
//! Nodes link to each other by slot number (`newer` toward the most
//! recently used end, `older` toward the least recently used end), so
//! pushing, unlinking and moving a node to the front are O(1) and need no
//! `unsafe`. Freed slots go on a free list threaded through the vacant
//! slots themselves and are reused before the slab grows. The slab grows by
//! one chunk of [`CHUNK_SLOTS`] slots at a time and never moves a node: it
//! holds at most the peak number of live nodes plus one chunk, and growing
//! it copies nothing (a `Vec` slab doubles, so up to half of it can be
//! spare, and while it grows the old and new buffers are both live).
//!
//! The two arrays of a chunk split what a hit reads (key and value) from
//! what eviction walks (links, charge and the reference mark, 32 bytes a
//! slot): eviction passes over entries marked as read, moving each to the
//! front, and with the links apart from the values those passes touch two
//! slots per cache line instead of one slot in two or three lines. The
//! hash kept with the links lets eviction and the shard's index find an
//! entry's bucket without reading or hashing its key.
//!
//! Invariants (checked by `check_invariants`): every linked slot is
//! occupied and every occupied slot is linked exactly once; `len` counts
//! them; `charge_total` is the sum of their charges; every other slot is on
//! the free list exactly once. A vacant slot's links are stale.
//!
//! Not thread-safe on its own; each cache shard owns one behind its
//! read-write lock. Under the lock held shared, readers call only `&self`
//! methods, of which [`LruList::read_marked`] alone writes (an atomic
//! mark).

use std::sync::atomic::{AtomicBool, Ordering};

/// "No node": the end of the list in either direction, and of the free
/// list.
const NIL: u32 = u32::MAX;

/// Slots per chunk of the slab (a power of two).
pub(super) const CHUNK_SLOTS: usize = 64;
const CHUNK_SHIFT: u32 = CHUNK_SLOTS.trailing_zeros();

/// A linked entry's place in the recency order, and what eviction needs
/// to know of it.
struct Links {
    /// The hash the owner files the entry under, as given to
    /// [`LruList::push_mru`].
    hash: u64,
    charge: usize,
    /// Slot of the next more recently used node, or `NIL` at the MRU end.
    newer: u32,
    /// Slot of the next less recently used node, or `NIL` at the LRU end.
    older: u32,
    /// Read since it was linked or last given a second chance. Atomic so
    /// that hits, which hold the shard's lock shared, may set it.
    referenced: AtomicBool,
}

enum Slot<K, V> {
    /// On the free list, before `next_free` (or last, at `NIL`).
    Vacant {
        next_free: u32,
    },
    Linked {
        key: K,
        value: V,
    },
}

struct Chunk<K, V> {
    links: [Links; CHUNK_SLOTS],
    slots: [Slot<K, V>; CHUNK_SLOTS],
}

/// Entries ordered from most to least recently used.
pub(super) struct LruList<K, V> {
    chunks: Vec<Box<Chunk<K, V>>>,
    /// First slot of the free list, or `NIL`.
    free: u32,
    mru: u32,
    lru: u32,
    len: usize,
    charge_total: usize,
}

impl<K, V> LruList<K, V> {
    /// Bytes of one slab slot: an entry's key and value, its links,
    /// charge and hash.
    pub(super) const SLOT_BYTES: usize = std::mem::size_of::<Chunk<K, V>>() / CHUNK_SLOTS;

    /// Most bytes the slab takes per slot in use at its peak, besides one
    /// partly used chunk: the slot, and its share of the array of chunks
    /// (which may be up to half spare).
    pub(super) const BYTES_PER_ENTRY_MAX: usize =
        Self::SLOT_BYTES + (2 * std::mem::size_of::<Box<Chunk<K, V>>>()).div_ceil(CHUNK_SLOTS);

    /// An empty list that has allocated nothing.
    pub(super) fn new() -> Self {
        LruList {
            chunks: Vec::new(),
            free: NIL,
            mru: NIL,
            lru: NIL,
            len: 0,
            charge_total: 0,
        }
    }

    /// Number of linked entries.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Sum of the charges of the linked entries.
    pub(super) fn charge_total(&self) -> usize {
        self.charge_total
    }

    /// Heap bytes the slab takes: its chunks and the array of them.
    #[cfg(test)]
    pub(super) fn allocation_bytes(&self) -> usize {
        self.chunks.len() * std::mem::size_of::<Chunk<K, V>>()
            + self.chunks.capacity() * std::mem::size_of::<Box<Chunk<K, V>>>()
    }

    /// Slot of the least recently used entry.
    pub(super) fn lru(&self) -> Option<u32> {
        (self.lru != NIL).then_some(self.lru)
    }

    /// The key of the entry in `slot`.
    pub(super) fn key(&self, slot: u32) -> &K {
        self.entry(slot).0
    }

    /// The hash the entry in `slot` was pushed with. Reads its links only.
    pub(super) fn hash(&self, slot: u32) -> u64 {
        self.links(slot).hash
    }

    /// Links a new entry at the MRU end and returns its slot, which stays
    /// the entry's until it is removed. `hash` is the owner's, kept for
    /// [`LruList::hash`].
    ///
    /// # Panics
    ///
    /// If the list would hold `u32::MAX` slots.
    pub(super) fn push_mru(&mut self, key: K, value: V, hash: u64, charge: usize) -> u32 {
        if self.free == NIL {
            self.grow();
        }
        let slot = self.free;
        let old_mru = self.mru;
        let (links, cell) = self.parts_mut(slot);
        let Slot::Vacant { next_free } = *cell else {
            panic!("free LRU slot {slot} is occupied");
        };
        *cell = Slot::Linked { key, value };
        *links = Links {
            hash,
            charge,
            newer: NIL,
            older: old_mru,
            referenced: AtomicBool::new(false),
        };
        self.free = next_free;
        match old_mru {
            NIL => self.lru = slot,
            old_mru => self.links_mut(old_mru).newer = slot,
        }
        self.mru = slot;
        self.len += 1;
        // Cannot overflow: the shard admits an entry only when the total stays
        // within its capacity, itself a `usize`.
        self.charge_total += charge;
        slot
    }

    /// Adds a chunk of vacant slots, all on the free list (which is empty).
    fn grow(&mut self) {
        debug_assert_eq!(self.free, NIL);
        // Slot numbers stay below `NIL`.
        let slots = self.chunks.len() * CHUNK_SLOTS;
        let Some(first) = u32::try_from(slots)
            .ok()
            .filter(|&first| first < NIL - CHUNK_SLOTS as u32)
        else {
            panic!("an LRU list of more than {slots} slots");
        };
        let end = first + CHUNK_SLOTS as u32;
        self.chunks.push(Box::new(Chunk {
            links: std::array::from_fn(|_| Links {
                hash: 0,
                charge: 0,
                newer: NIL,
                older: NIL,
                referenced: AtomicBool::new(false),
            }),
            slots: std::array::from_fn(|i| {
                let next = first + i as u32 + 1;
                Slot::Vacant {
                    next_free: if next == end { NIL } else { next },
                }
            }),
        }));
        self.free = first;
    }

    /// Unlinks the entry in `slot`, frees the slot and returns the entry's
    /// key and value.
    pub(super) fn remove(&mut self, slot: u32) -> (K, V) {
        self.unlink(slot);
        let vacant = Slot::Vacant {
            next_free: self.free,
        };
        let charge = self.links(slot).charge;
        let Slot::Linked { key, value } = std::mem::replace(self.parts_mut(slot).1, vacant) else {
            panic!("LRU slot {slot} was just unlinked but is vacant");
        };
        self.free = slot;
        self.len -= 1;
        self.charge_total -= charge;
        (key, value)
    }

    /// The value of the entry in `slot`, recording a read of it: it will be
    /// given a second chance instead of being evicted the next time it is
    /// the LRU entry. Unlike [`touch`](Self::touch) this writes only the
    /// entry's mark, and takes `&self`: readers of the shard may call it
    /// side by side. The store is relaxed: eviction reads the mark under
    /// the exclusive lock, which orders it after every shared holder's
    /// store.
    pub(super) fn read_marked(&self, slot: u32) -> &V {
        let value = self.entry(slot).1;
        self.links(slot).referenced.store(true, Ordering::Relaxed);
        value
    }

    /// If the entry in `slot` was read since it was linked (or last given a
    /// second chance), clears that mark, moves it to the MRU end and
    /// returns true.
    pub(super) fn second_chance(&mut self, slot: u32) -> bool {
        let referenced = self.links_mut(slot).referenced.get_mut();
        if !*referenced {
            return false;
        }
        *referenced = false;
        self.touch(slot);
        true
    }

    /// Moves the entry in `slot` to the MRU end.
    pub(super) fn touch(&mut self, slot: u32) {
        if self.mru == slot {
            return;
        }
        self.unlink(slot);
        let old_mru = self.mru;
        let links = self.links_mut(slot);
        links.newer = NIL;
        links.older = old_mru;
        match old_mru {
            NIL => self.lru = slot,
            old_mru => self.links_mut(old_mru).newer = slot,
        }
        self.mru = slot;
    }

    /// Detaches `slot` from its neighbours; the node itself keeps stale links
    /// until the caller relinks or frees it.
    fn unlink(&mut self, slot: u32) {
        let (newer, older) = {
            let links = self.links(slot);
            (links.newer, links.older)
        };
        match newer {
            NIL => self.mru = older,
            newer => self.links_mut(newer).older = older,
        }
        match older {
            NIL => self.lru = newer,
            older => self.links_mut(older).newer = newer,
        }
    }

    fn chunk(&self, slot: u32) -> &Chunk<K, V> {
        match self.chunks.get(slot as usize >> CHUNK_SHIFT) {
            Some(chunk) => chunk,
            None => panic!("LRU slot {slot} is past the slab"),
        }
    }

    /// The key and value in `slot`, which must be linked.
    fn entry(&self, slot: u32) -> (&K, &V) {
        match &self.chunk(slot).slots[slot as usize & (CHUNK_SLOTS - 1)] {
            Slot::Linked { key, value } => (key, value),
            Slot::Vacant { .. } => panic!("LRU slot {slot} is not a linked entry"),
        }
    }

    /// The links of `slot`, which must be linked (the list's links lead
    /// only to linked slots; a vacant slot's links are stale).
    fn links(&self, slot: u32) -> &Links {
        &self.chunk(slot).links[slot as usize & (CHUNK_SLOTS - 1)]
    }

    fn links_mut(&mut self, slot: u32) -> &mut Links {
        self.parts_mut(slot).0
    }

    fn parts_mut(&mut self, slot: u32) -> (&mut Links, &mut Slot<K, V>) {
        let at = slot as usize;
        match self.chunks.get_mut(at >> CHUNK_SHIFT) {
            Some(chunk) => {
                let i = at & (CHUNK_SLOTS - 1);
                (&mut chunk.links[i], &mut chunk.slots[i])
            }
            None => panic!("LRU slot {slot} is past the slab"),
        }
    }

    /// Slots and keys from MRU to LRU (walks the whole list).
    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn iter_mru_to_lru(&self) -> impl Iterator<Item = (u32, &K)> + '_ {
        let mut slot = self.mru;
        // Bounded by the slab size, so a corrupted (cyclic) list cannot spin.
        (0..self.chunks.len() * CHUNK_SLOTS).map_while(move |_| {
            if slot == NIL {
                return None;
            }
            let item = (slot, self.key(slot));
            slot = self.links(slot).older;
            Some(item)
        })
    }

    /// Panics unless the links, counts and free list are consistent.
    /// O(slots); tests and the `invariants` feature call it.
    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn check_invariants(&self) {
        let slots = self.chunks.len() * CHUNK_SLOTS;
        let mut seen = vec![false; slots];
        let mut newer = NIL;
        let mut slot = self.mru;
        let mut len = 0usize;
        let mut charge_total = 0usize;
        while slot != NIL {
            assert!(!seen[slot as usize], "LRU slot {slot} is linked twice");
            seen[slot as usize] = true;
            self.entry(slot); // panics if vacant
            let links = self.links(slot);
            assert_eq!(links.newer, newer, "LRU slot {slot}: bad newer link");
            len += 1;
            charge_total += links.charge;
            newer = slot;
            slot = links.older;
        }
        assert_eq!(self.lru, newer, "LRU end does not match the list walk");
        assert_eq!(self.len, len, "LRU len does not match the list walk");
        assert_eq!(self.charge_total, charge_total, "LRU charge total is off");
        let mut free = self.free;
        let mut vacant = 0usize;
        while free != NIL {
            assert!(
                !seen[free as usize],
                "free LRU slot {free} is linked or listed twice"
            );
            seen[free as usize] = true;
            vacant += 1;
            let Slot::Vacant { next_free } =
                self.chunk(free).slots[free as usize & (CHUNK_SLOTS - 1)]
            else {
                panic!("free LRU slot {free} is occupied");
            };
            free = next_free;
        }
        assert_eq!(vacant + len, slots, "slots are neither linked nor free");
    }
}

#[cfg(test)]
mod tests {
    use super::{LruList, CHUNK_SLOTS};

    fn keys(list: &LruList<u32, ()>) -> Vec<u32> {
        list.iter_mru_to_lru().map(|(_, &key)| key).collect()
    }

    #[test]
    fn push_touch_remove_keep_order_and_totals() {
        let mut list = LruList::new();
        let a = list.push_mru(1, (), 0, 5);
        let b = list.push_mru(2, (), 0, 7);
        let c = list.push_mru(3, (), 0, 11);
        assert_eq!(keys(&list), [3, 2, 1]);
        assert_eq!(list.lru(), Some(a));

        list.touch(a);
        assert_eq!(keys(&list), [1, 3, 2]);
        list.touch(a); // already MRU
        list.touch(b); // from the LRU end
        assert_eq!(keys(&list), [2, 1, 3]);
        assert_eq!(list.lru(), Some(c));
        list.check_invariants();

        assert_eq!(list.remove(a), (1, ())); // from the middle
        assert_eq!(keys(&list), [2, 3]);
        assert_eq!((list.len(), list.charge_total()), (2, 18));
        list.check_invariants();

        // The freed slot is reused before the slab grows.
        assert_eq!(list.push_mru(4, (), 0, 1), a);
        assert_eq!(keys(&list), [4, 2, 3]);
        list.remove(c);
        list.remove(b);
        list.remove(a);
        assert_eq!((list.len(), list.charge_total(), list.lru()), (0, 0, None));
        list.check_invariants();
    }

    #[test]
    fn the_slab_grows_a_chunk_at_a_time_and_reuses_freed_slots() {
        let mut list = LruList::new();
        assert_eq!(list.allocation_bytes(), 0);
        let mut slots = Vec::new();
        for i in 0..3 * CHUNK_SLOTS as u32 + 1 {
            slots.push(list.push_mru(i, u64::from(i) * 7, u64::from(i), 1));
            let chunks = (i as usize / CHUNK_SLOTS) + 1;
            assert_eq!(list.chunks.len(), chunks, "after {} pushes", i + 1);
        }
        list.check_invariants();
        // Every entry is where it was put.
        for (i, &slot) in slots.iter().enumerate() {
            assert_eq!(*list.key(slot), i as u32);
            assert_eq!(*list.read_marked(slot), i as u64 * 7);
            assert_eq!(list.hash(slot), i as u64);
        }
        // Churn at a steady size never grows the slab past its peak.
        let peak_chunks = list.chunks.len();
        for i in 0..10_000u32 {
            let lru = list.lru().expect("not empty");
            let (key, _) = list.remove(lru);
            assert_eq!(list.push_mru(key + 1_000_000, u64::from(i), 0, 1), lru);
        }
        assert_eq!(list.chunks.len(), peak_chunks);
        // A slot is a chunk's share plus the chunk array's pointer.
        let slot_bytes = LruList::<u32, u64>::SLOT_BYTES;
        assert!(list.allocation_bytes() <= (list.len() + CHUNK_SLOTS) * slot_bytes + 64);
        list.check_invariants();
    }
}
