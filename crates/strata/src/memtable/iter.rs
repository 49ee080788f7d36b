//! The memtable iterator: a cursor on skiplist nodes, yielding internal keys.
//!
//! It owns an `Arc` of its memtable, so it may outlive the borrow it was made
//! from; the node it points at lives as long as that memtable. Moving
//! backwards searches for the last node before the current key (the list has
//! no back links), as in LevelDB: `prev` costs a search, O(log n).

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::Comparator;

use super::entry::{decode_entry, entry_key};
use super::skiplist::{NodeRef, RawNode};
use super::MemTable;

/// An [`InternalIterator`] over a [`MemTable`]'s entries; see [`MemTable::iter`].
///
/// Invariant: `node`, when set, is a node of `mem`'s skiplist.
#[derive(Debug)]
pub struct MemTableIterator {
    mem: Arc<MemTable>,
    node: Option<RawNode>,
}

impl MemTableIterator {
    /// An unpositioned iterator over `mem`.
    pub(super) fn new(mem: Arc<MemTable>) -> MemTableIterator {
        MemTableIterator { mem, node: None }
    }

    /// The current node, borrowed for as long as `self`.
    fn current(&self) -> Option<NodeRef<'_>> {
        // SAFETY: `node` came from `self.mem`'s list (type invariant), which
        // `self.mem` keeps alive at least as long as the returned borrow.
        self.node.map(|raw| unsafe { NodeRef::from_raw(raw) })
    }

    /// The current (internal key, value); empty slices when invalid.
    fn current_entry(&self) -> (&[u8], &[u8]) {
        debug_assert!(self.valid(), "key or value of an invalid iterator");
        self.current()
            .map_or((&[], &[]), |n| decode_entry(n.entry()))
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.node.is_some()
    }

    fn seek_to_first(&mut self) {
        self.node = self.mem.list.first().map(NodeRef::into_raw);
    }

    fn seek_to_last(&mut self) {
        self.node = self.mem.list.last().map(NodeRef::into_raw);
    }

    fn seek(&mut self, target: &[u8]) {
        self.node = self.mem.list.seek(target).map(NodeRef::into_raw);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // The exact key, else the last key before it. (Not "seek, then step
        // back": a concurrent insert could land between the two steps.)
        let list = &self.mem.list;
        let exact = list.seek(target).filter(|n| {
            let key = entry_key(n.entry());
            self.mem.comparator().compare(key, target) == Ordering::Equal
        });
        self.node = exact
            .or_else(|| list.find_less_than(target))
            .map(NodeRef::into_raw);
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        self.node = self
            .current()
            .and_then(NodeRef::next)
            .map(NodeRef::into_raw);
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        self.node = self.current().and_then(|n| {
            let key = entry_key(n.entry());
            self.mem.list.find_less_than(key).map(NodeRef::into_raw)
        });
    }

    fn key(&self) -> &[u8] {
        self.current_entry().0
    }

    fn value(&self) -> &[u8] {
        self.current_entry().1
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}
