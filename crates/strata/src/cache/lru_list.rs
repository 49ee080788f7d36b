//! A doubly linked recency list whose nodes live in a `Vec` slab.
//!
//! Nodes link to each other by slot index (`newer` toward the most recently
//! used end, `older` toward the least recently used end), so pushing,
//! unlinking and moving a node to the front are O(1) and need no `unsafe`.
//! Freed slots go on a free list and are reused before the slab grows, so the
//! slab never holds more slots than the peak number of live nodes.
//!
//! Invariants (checked by `check_invariants`): every linked slot is occupied
//! and every occupied slot is linked exactly once; `len` counts them;
//! `charge_total` is the sum of their charges; free slots are vacant.
//!
//! Not thread-safe on its own; each cache shard owns one behind its
//! read-write lock. Only [`LruList::mark_referenced`] runs under the shared
//! lock.

use std::sync::atomic::{AtomicBool, Ordering};

/// "No node": the end of the list in either direction.
const NIL: usize = usize::MAX;

/// One cached entry and its links.
struct Node<K> {
    key: K,
    charge: usize,
    /// Slot of the next more recently used node, or `NIL` at the MRU end.
    newer: usize,
    /// Slot of the next less recently used node, or `NIL` at the LRU end.
    older: usize,
    /// Read since it was linked or last given a second chance. Atomic so
    /// that hits, which hold the shard's lock shared, may set it.
    referenced: AtomicBool,
}

/// Entries ordered from most to least recently used.
pub(super) struct LruList<K> {
    /// `None` marks a free slot (listed in `free`).
    slots: Vec<Option<Node<K>>>,
    free: Vec<usize>,
    mru: usize,
    lru: usize,
    len: usize,
    charge_total: usize,
}

impl<K> LruList<K> {
    /// Bytes of one slab slot: an entry's key, charge and links.
    pub(super) const SLOT_BYTES: usize = std::mem::size_of::<Option<Node<K>>>();

    /// An empty list that has allocated nothing.
    pub(super) fn new() -> Self {
        LruList {
            slots: Vec::new(),
            free: Vec::new(),
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

    /// Slot of the least recently used entry.
    pub(super) fn lru(&self) -> Option<usize> {
        (self.lru != NIL).then_some(self.lru)
    }

    /// Links a new entry at the MRU end and returns its slot.
    pub(super) fn push_mru(&mut self, key: K, charge: usize) -> usize {
        let node = Node {
            key,
            charge,
            newer: NIL,
            older: self.mru,
            referenced: AtomicBool::new(false),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                assert!(self.slots[slot].is_none(), "free slot {slot} is occupied");
                self.slots[slot] = Some(node);
                slot
            }
            None => {
                self.slots.push(Some(node));
                self.slots.len() - 1
            }
        };
        match self.mru {
            NIL => self.lru = slot,
            old_mru => self.node_mut(old_mru).newer = slot,
        }
        self.mru = slot;
        self.len += 1;
        // Cannot overflow: the shard admits an entry only when the total stays
        // within its capacity, itself a `usize`.
        self.charge_total += charge;
        slot
    }

    /// Unlinks the entry in `slot`, frees the slot and returns its key.
    pub(super) fn remove(&mut self, slot: usize) -> K {
        self.unlink(slot);
        let node = self.slots[slot]
            .take()
            .unwrap_or_else(|| panic!("LRU slot {slot} was just unlinked but is vacant"));
        self.free.push(slot);
        self.len -= 1;
        self.charge_total -= node.charge;
        node.key
    }

    /// Records a read of the entry in `slot`: it will be given a second
    /// chance instead of being evicted the next time it is the LRU entry.
    /// Unlike [`touch`](Self::touch) this writes only the node itself, and
    /// takes `&self`: readers of the shard may call it side by side. The
    /// store is relaxed: eviction reads the mark under the exclusive lock,
    /// which orders it after every shared holder's store.
    pub(super) fn mark_referenced(&self, slot: usize) {
        self.node(slot).referenced.store(true, Ordering::Relaxed);
    }

    /// If the entry in `slot` was read since it was linked (or last given a
    /// second chance), clears that mark, moves it to the MRU end and
    /// returns true.
    pub(super) fn second_chance(&mut self, slot: usize) -> bool {
        let referenced = self.node_mut(slot).referenced.get_mut();
        if !*referenced {
            return false;
        }
        *referenced = false;
        self.touch(slot);
        true
    }

    /// Moves the entry in `slot` to the MRU end.
    pub(super) fn touch(&mut self, slot: usize) {
        if self.mru == slot {
            return;
        }
        self.unlink(slot);
        let old_mru = self.mru;
        let node = self.node_mut(slot);
        node.newer = NIL;
        node.older = old_mru;
        match old_mru {
            NIL => self.lru = slot,
            old_mru => self.node_mut(old_mru).newer = slot,
        }
        self.mru = slot;
    }

    /// Detaches `slot` from its neighbours; the node itself keeps stale links
    /// until the caller relinks or frees it.
    fn unlink(&mut self, slot: usize) {
        let (newer, older) = {
            let node = self.node(slot);
            (node.newer, node.older)
        };
        match newer {
            NIL => self.mru = older,
            newer => self.node_mut(newer).older = older,
        }
        match older {
            NIL => self.lru = newer,
            older => self.node_mut(older).newer = newer,
        }
    }

    fn node(&self, slot: usize) -> &Node<K> {
        match self.slots.get(slot) {
            Some(Some(node)) => node,
            _ => panic!("LRU slot {slot} is not a linked entry"),
        }
    }

    fn node_mut(&mut self, slot: usize) -> &mut Node<K> {
        match self.slots.get_mut(slot) {
            Some(Some(node)) => node,
            _ => panic!("LRU slot {slot} is not a linked entry"),
        }
    }

    /// Slots and keys from MRU to LRU (walks the whole list).
    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn iter_mru_to_lru(&self) -> impl Iterator<Item = (usize, &K)> + '_ {
        let mut slot = self.mru;
        // Bounded by the slab size, so a corrupted (cyclic) list cannot spin.
        (0..self.slots.len()).map_while(move |_| {
            if slot == NIL {
                return None;
            }
            let node = self.node(slot);
            let item = (slot, &node.key);
            slot = node.older;
            Some(item)
        })
    }

    /// Panics unless the links, counts and free list are consistent.
    /// O(slots); tests and the `invariants` feature call it.
    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn check_invariants(&self) {
        let mut seen = vec![false; self.slots.len()];
        let mut newer = NIL;
        let mut slot = self.mru;
        let mut len = 0usize;
        let mut charge_total = 0usize;
        while slot != NIL {
            assert!(!seen[slot], "LRU slot {slot} is linked twice");
            seen[slot] = true;
            let node = self.node(slot);
            assert_eq!(node.newer, newer, "LRU slot {slot}: bad newer link");
            len += 1;
            charge_total += node.charge;
            newer = slot;
            slot = node.older;
        }
        assert_eq!(self.lru, newer, "LRU end does not match the list walk");
        assert_eq!(self.len, len, "LRU len does not match the list walk");
        assert_eq!(self.charge_total, charge_total, "LRU charge total is off");
        for &free in &self.free {
            assert!(self.slots[free].is_none(), "free slot {free} is occupied");
        }
        assert_eq!(
            self.free.len() + len,
            self.slots.len(),
            "slots are neither linked nor free"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::LruList;

    fn keys(list: &LruList<u32>) -> Vec<u32> {
        list.iter_mru_to_lru().map(|(_, &key)| key).collect()
    }

    #[test]
    fn push_touch_remove_keep_order_and_totals() {
        let mut list = LruList::new();
        let a = list.push_mru(1, 5);
        let b = list.push_mru(2, 7);
        let c = list.push_mru(3, 11);
        assert_eq!(keys(&list), [3, 2, 1]);
        assert_eq!(list.lru(), Some(a));

        list.touch(a);
        assert_eq!(keys(&list), [1, 3, 2]);
        list.touch(a); // already MRU
        list.touch(b); // from the LRU end
        assert_eq!(keys(&list), [2, 1, 3]);
        assert_eq!(list.lru(), Some(c));
        list.check_invariants();

        assert_eq!(list.remove(a), 1); // from the middle
        assert_eq!(keys(&list), [2, 3]);
        assert_eq!((list.len(), list.charge_total()), (2, 18));
        list.check_invariants();

        // The freed slot is reused before the slab grows.
        assert_eq!(list.push_mru(4, 1), a);
        assert_eq!(keys(&list), [4, 2, 3]);
        list.remove(c);
        list.remove(b);
        list.remove(a);
        assert_eq!((list.len(), list.charge_total(), list.lru()), (0, 0, None));
        list.check_invariants();
    }
}
