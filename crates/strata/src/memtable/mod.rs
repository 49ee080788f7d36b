//! The memtable: recent writes, sorted in memory until they are flushed to a
//! table file.
//!
//! A [`MemTable`] is a concurrent skiplist (`skiplist.rs`) of entries
//! (internal key, value; encoded as in `entry.rs` and
//! `docs/format/memtable.md`), whose nodes live in an arena (`arena.rs`).
//!
//! Thread safety: a `MemTable` is `Send + Sync`. Writers take either the
//! skiplist's writer lock, one at a time ([`MemTable::writer`]), or its
//! shared side, inserting concurrently ([`MemTable::concurrent_writer`],
//! RocksDB's `allow_concurrent_memtable_write`); readers (`get`,
//! iterators) take no lock and may run during a write. Every entry stays at
//! the same address until the memtable drops, so values borrow it directly
//! and an iterator keeps it alive with an `Arc`.
//!
//! Invariants:
//! - Internal keys are unique: callers give every write its own sequence
//!   number (a duplicate is a bug, and `add` panics).
//! - Entries are ordered by [`InternalKeyComparator`]: user key ascending,
//!   then sequence descending, so the newest visible version comes first.
//! - Memory only grows; [`MemTable::approximate_memory_usage`] is what the
//!   write path compares against the write buffer size to decide a flush.

mod arena;
pub(crate) use arena::SpareBlocks;
mod entry;
mod iter;
mod skiplist;
#[cfg(test)]
mod tests;

use crate::db::merge_operator::MergeOperands;
use crate::range_del::{FragmentedRangeTombstones, RangeTombstone};
use arc_swap::ArcSwapOption;
use parking_lot::Mutex;
use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::key::{
    pack_trailer, parse_internal_key, InternalKey, InternalKeyComparator, ParsedInternalKey,
    SequenceNumber, ValueKind, MAX_SEQUENCE_NUMBER, TRAILER_BYTES,
};
use crate::limits::{KEY_SIZE_BYTES_MAX, VALUE_SIZE_BYTES_MAX};

use entry::{decode_entry, InternalKeyOrder, Varint32};
use skiplist::{ConcurrentListWriter, ListWriter, SkipList};

pub use iter::MemTableIterator;

/// Seek keys up to this size are built on the stack.
const SEEK_KEY_STACK_BYTES: usize = 128;

/// The result of [`MemTable::get`] when the memtable holds a version of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemTableGet<'a> {
    /// The newest visible version is this value.
    Value(&'a [u8]),
    /// The newest visible version is a deletion.
    Deleted,
    /// The newest visible version is a merge operand: the answer needs
    /// the older versions too.
    Merge,
}

/// What [`MemTable::lookup`] found of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemLookup<'a> {
    /// The newest visible version is this value.
    Value(&'a [u8]),
    /// The newest visible version is a deletion, or is under a range
    /// deletion.
    Deleted,
    /// The newest visible version is a merge operand. The memtable's
    /// operands of the key were pushed (newest first) down to the value or
    /// deletion under them (`Some(Some(value))`, `Some(None)`), or down to
    /// the end of the key's versions here (`None`).
    Merge(Option<Option<&'a [u8]>>),
}

/// An in-memory, sorted, concurrently readable table of recent writes.
#[derive(Debug)]
pub struct MemTable {
    list: SkipList<InternalKeyOrder>,
    num_deletes: AtomicUsize,
    /// Smallest sequence number added; `u64::MAX` while empty.
    first_sequence: AtomicU64,
    /// Largest sequence number added; 0 while empty.
    largest_sequence: AtomicU64,
    /// Range deletions, as written (RocksDB keeps them in a second
    /// skiplist; they are few, and reads use the fragmented form below).
    range_dels: Mutex<Vec<RangeTombstone>>,
    /// `range_dels.len()`, readable without the lock.
    num_range_dels: AtomicUsize,
    /// Bytes held by `range_dels`.
    range_del_bytes: AtomicUsize,
    /// The fragmented form of the first `.0` range deletions, rebuilt by
    /// the first read after one is added.
    fragmented: ArcSwapOption<(usize, Arc<FragmentedRangeTombstones>)>,
}

impl MemTable {
    /// An empty memtable ordered by `cmp`, for a column family that
    /// switches memtables at `write_buffer_size` bytes (which sizes the
    /// arena's blocks: [`arena::block_size_for`]).
    pub fn new(cmp: InternalKeyComparator, write_buffer_size: usize) -> MemTable {
        MemTable::with_spare(cmp, write_buffer_size, None)
    }

    /// [`MemTable::new`], its arena's mapped blocks taken from and given
    /// back to `spare` (its database's: [`SpareBlocks`]).
    pub(crate) fn with_spare(
        cmp: InternalKeyComparator,
        write_buffer_size: usize,
        spare: Option<Arc<SpareBlocks>>,
    ) -> MemTable {
        MemTable {
            list: SkipList::new(
                InternalKeyOrder::new(cmp),
                arena::block_size_for(write_buffer_size),
                spare,
            ),
            num_deletes: AtomicUsize::new(0),
            first_sequence: AtomicU64::new(u64::MAX),
            largest_sequence: AtomicU64::new(0),
            range_dels: Mutex::new(Vec::new()),
            num_range_dels: AtomicUsize::new(0),
            range_del_bytes: AtomicUsize::new(0),
            fragmented: ArcSwapOption::empty(),
        }
    }

    /// The range deletions added so far, fragmented; `None` if there are
    /// none. Takes a lock only for the first read after a range deletion
    /// was added. A reader filters by sequence number, so a tombstone of
    /// a write not yet visible does no harm.
    pub(crate) fn range_deletions(&self) -> Option<Arc<FragmentedRangeTombstones>> {
        let n = self.num_range_dels.load(Ordering::Acquire);
        if n == 0 {
            return None;
        }
        if let Some(cached) = &*self.fragmented.load() {
            if cached.0 >= n {
                return Some(cached.1.clone());
            }
        }
        // Copied under the lock, fragmented outside it: a writer adding a
        // range deletion waits for a copy, not for the fragmenting.
        let all = self.range_dels.lock().clone();
        let list = Arc::new(FragmentedRangeTombstones::new(
            all.iter(),
            self.comparator().user_comparator().clone(),
        ));
        self.fragmented
            .store(Some(Arc::new((all.len(), list.clone()))));
        Some(list)
    }

    /// A copy of the range deletions as written (for a flush).
    pub(crate) fn range_deletion_list(&self) -> Vec<RangeTombstone> {
        self.range_dels.lock().clone()
    }

    /// Number of range deletions added.
    pub(crate) fn num_range_deletions(&self) -> usize {
        self.num_range_dels.load(Ordering::Acquire)
    }

    /// The comparator entries are ordered by.
    pub fn comparator(&self) -> &InternalKeyComparator {
        &self.list.order().cmp
    }

    /// Adds a version of `user_key`. `seq` must be unique in this memtable
    /// and at most [`MAX_SEQUENCE_NUMBER`]; key and value must be within
    /// [`crate::limits`]. Concurrent calls are serialized internally.
    #[cfg(test)]
    pub fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.writer().add(seq, kind, user_key, value);
    }

    /// Takes the writer lock for a run of adds (a write batch, a write
    /// group): one lock, and each insert starts from where the last one went.
    pub(crate) fn writer(&self) -> MemTableWriter<'_> {
        MemTableWriter::new(self, Inserter::Alone(self.list.writer()))
    }

    /// A writer for a run of adds that may run at the same time as other
    /// concurrent writers' (the writers of one write group inserting their
    /// own batches). A [`MemTable::writer`] waits until they have all
    /// dropped, and they wait for it.
    pub(crate) fn concurrent_writer(&self) -> MemTableWriter<'_> {
        MemTableWriter::new(self, Inserter::Concurrent(self.list.concurrent_writer()))
    }

    /// Walks the list to where a new version of `user_key` would go and
    /// changes nothing: the nodes on the way are then in the cache. A
    /// writer waiting for its turn does this, so that its insert (its own
    /// or its leader's) finds them there (see `DbInner::write_or_switch`).
    pub(crate) fn warm(&self, user_key: &[u8]) {
        let node = with_seek_key(user_key, MAX_SEQUENCE_NUMBER, |probe| self.list.seek(probe));
        std::hint::black_box(node.map(|n| n.entry().as_ptr()));
    }

    /// The newest version of `user_key` with sequence <= `seq`, or `None` if
    /// the memtable holds no such version.
    #[cfg(test)]
    pub fn get(&self, user_key: &[u8], seq: SequenceNumber) -> Option<MemTableGet<'_>> {
        self.get_with_sequence(user_key, seq).map(|(g, _)| g)
    }

    /// [`MemTable::get`], with the found version's sequence number.
    pub(crate) fn get_with_sequence(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
    ) -> Option<(MemTableGet<'_>, SequenceNumber)> {
        let (_, parsed, value) = self.newest(user_key, seq)?;
        let found = match parsed.kind {
            ValueKind::Value => MemTableGet::Value(value),
            ValueKind::Merge => MemTableGet::Merge,
            ValueKind::Deletion | ValueKind::RangeDeletion => MemTableGet::Deleted,
        };
        Some((found, parsed.sequence))
    }

    /// From the newest version of `user_key` with sequence <= `seq`, pushes
    /// merge operands (newest first) onto `operands` until a value or a
    /// deletion, which it returns (`Some(Some(value))`, `Some(None)`), or
    /// the key's versions here end (`None`). One seek, then the list's
    /// bottom level. A version older than `floor` (deleted by a range
    /// deletion) ends the walk as a deletion would.
    pub(crate) fn collect_operands(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        floor: SequenceNumber,
        operands: &mut MergeOperands,
    ) -> Option<Option<&[u8]>> {
        let node = with_seek_key(user_key, seq, |probe| self.list.seek(probe));
        self.walk_operands(node, user_key, floor, operands)
    }

    /// A read's one search of the memtable: the newest version of
    /// `user_key` with sequence <= `seq`, as [`MemTable::get_with_sequence`]
    /// finds it (one older than `floor`, under a range deletion, is
    /// [`MemLookup::Deleted`]). When that version is a merge operand, the
    /// walk goes on from it as [`MemTable::collect_operands`] would, so
    /// a merge read does not search the memtable a second time.
    pub(crate) fn lookup(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
        floor: SequenceNumber,
        operands: &mut MergeOperands,
    ) -> Option<MemLookup<'_>> {
        let (node, parsed, value) = self.newest(user_key, seq)?;
        if parsed.sequence < floor {
            return Some(MemLookup::Deleted);
        }
        Some(match parsed.kind {
            ValueKind::Value => MemLookup::Value(value),
            ValueKind::Deletion | ValueKind::RangeDeletion => MemLookup::Deleted,
            ValueKind::Merge => {
                operands.push(value);
                MemLookup::Merge(self.walk_operands(node.next(), user_key, floor, operands))
            }
        })
    }

    /// The newest version of `user_key` with sequence <= `seq`: its node,
    /// internal key and value; one seek.
    fn newest(
        &self,
        user_key: &[u8],
        seq: SequenceNumber,
    ) -> Option<(skiplist::NodeRef<'_>, ParsedInternalKey<'_>, &[u8])> {
        let node = with_seek_key(user_key, seq, |probe| self.list.seek(probe))?;
        let (ikey, value) = decode_entry(node.entry());
        let parsed = parse_internal_key(ikey).expect("memtable entry: bad internal key");
        let user_cmp = self.comparator().user_comparator();
        if user_cmp.compare(parsed.user_key, user_key) != CmpOrdering::Equal {
            return None;
        }
        Some((node, parsed, value))
    }

    /// [`MemTable::collect_operands`]' walk, from `node` on.
    fn walk_operands<'a>(
        &'a self,
        mut node: Option<skiplist::NodeRef<'a>>,
        user_key: &[u8],
        floor: SequenceNumber,
        operands: &mut MergeOperands,
    ) -> Option<Option<&'a [u8]>> {
        let user_cmp = self.comparator().user_comparator();
        while let Some(n) = node {
            let (ikey, value) = decode_entry(n.entry());
            let parsed = parse_internal_key(ikey).expect("memtable entry: bad internal key");
            if user_cmp.compare(parsed.user_key, user_key) != CmpOrdering::Equal {
                return None;
            }
            if parsed.sequence < floor {
                return Some(None);
            }
            match parsed.kind {
                ValueKind::Value => return Some(Some(value)),
                ValueKind::Deletion | ValueKind::RangeDeletion => return Some(None),
                ValueKind::Merge => operands.push(value),
            }
            node = n.next();
        }
        None
    }

    /// An iterator over all entries (internal key, value), in order. It holds
    /// a reference to the memtable and sees entries added after its creation.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator::new(Arc::clone(self))
    }

    /// Bytes of memory held, including allocation slack. Cheap; any thread.
    pub fn approximate_memory_usage(&self) -> usize {
        self.list.memory_usage() + self.range_del_bytes.load(Ordering::Relaxed)
    }

    /// Number of entries (values and deletions).
    pub fn num_entries(&self) -> usize {
        self.list.len()
    }

    /// Number of deletion entries.
    #[cfg(test)]
    pub fn num_deletes(&self) -> usize {
        self.num_deletes.load(Ordering::Relaxed)
    }

    /// True if nothing was added.
    pub fn is_empty(&self) -> bool {
        self.num_entries() == 0 && self.num_range_deletions() == 0
    }

    /// The smallest sequence number added, if any.
    #[cfg(test)]
    pub(crate) fn first_sequence(&self) -> Option<SequenceNumber> {
        let seq = self.first_sequence.load(Ordering::Acquire);
        (seq != u64::MAX).then_some(seq)
    }

    /// The largest sequence number added, if any.
    #[cfg(test)]
    pub(crate) fn largest_sequence(&self) -> Option<SequenceNumber> {
        self.first_sequence()?;
        Some(self.largest_sequence.load(Ordering::Relaxed))
    }
}

/// The writer lock of a [`MemTable`]; see [`MemTable::writer`]. Each entry
/// is visible to readers as soon as its `add` returns; the memtable's
/// counters are brought up to date when the writer drops.
pub(crate) struct MemTableWriter<'a> {
    mem: &'a MemTable,
    list: Inserter<'a>,
    deletes: usize,
    min_seq: SequenceNumber,
    max_seq: SequenceNumber,
}

impl<'a> MemTableWriter<'a> {
    fn new(mem: &'a MemTable, list: Inserter<'a>) -> MemTableWriter<'a> {
        MemTableWriter {
            mem,
            list,
            deletes: 0,
            min_seq: u64::MAX,
            max_seq: 0,
        }
    }

    /// As [`MemTable::add`].
    pub(crate) fn add(
        &mut self,
        seq: SequenceNumber,
        kind: ValueKind,
        user_key: &[u8],
        value: &[u8],
    ) {
        assert!(seq <= MAX_SEQUENCE_NUMBER, "sequence {seq} too large");
        assert!(user_key.len() <= KEY_SIZE_BYTES_MAX, "key too large");
        assert!(value.len() <= VALUE_SIZE_BYTES_MAX, "value too large");
        // Both fit in u32 by the limits above.
        let key_len = Varint32::new((user_key.len() + TRAILER_BYTES) as u32);
        let trailer = pack_trailer(seq, kind).to_le_bytes();
        let value_len = Varint32::new(value.len() as u32);
        let parts: [&[u8]; 5] = [
            key_len.as_bytes(),
            user_key,
            &trailer,
            value_len.as_bytes(),
            value,
        ];
        match &mut self.list {
            Inserter::Alone(list) => list.insert(&parts),
            Inserter::Concurrent(list) => list.insert(&parts),
        }
        self.deletes += usize::from(kind == ValueKind::Deletion);
        self.min_seq = self.min_seq.min(seq);
        self.max_seq = self.max_seq.max(seq);
    }

    /// Adds the range deletion `[start, end)` at `seq` (an empty range is
    /// left out: it deletes nothing).
    pub(crate) fn add_range_deletion(&mut self, seq: SequenceNumber, start: &[u8], end: &[u8]) {
        assert!(seq <= MAX_SEQUENCE_NUMBER, "sequence {seq} too large");
        self.min_seq = self.min_seq.min(seq);
        self.max_seq = self.max_seq.max(seq);
        let ucmp = self.mem.comparator().user_comparator();
        if ucmp.compare(start, end) != CmpOrdering::Less {
            return;
        }
        let mem = self.mem;
        let mut all = mem.range_dels.lock();
        all.push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
        mem.range_del_bytes
            .fetch_add(start.len() + end.len() + 64, Ordering::Relaxed);
        // Release: a reader that counts it finds it under the lock.
        mem.num_range_dels.store(all.len(), Ordering::Release);
    }
}

/// How a [`MemTableWriter`] inserts: as the one writer, or beside others.
enum Inserter<'a> {
    Alone(ListWriter<'a, InternalKeyOrder>),
    Concurrent(ConcurrentListWriter<'a, InternalKeyOrder>),
}

impl Drop for MemTableWriter<'_> {
    fn drop(&mut self) {
        if self.min_seq == u64::MAX {
            return; // nothing added
        }
        let mem = self.mem;
        mem.num_deletes.fetch_add(self.deletes, Ordering::Relaxed);
        // Largest first, and Release/Acquire on `first_sequence`: a reader
        // that sees a first sequence also sees a largest one.
        mem.largest_sequence
            .fetch_max(self.max_seq, Ordering::Relaxed);
        mem.first_sequence
            .fetch_min(self.min_seq, Ordering::Release);
    }
}

/// Calls `f` with the seek key `user_key | pack(seq, FOR_SEEK)`, built on the
/// stack when small. `seq` is clamped to [`MAX_SEQUENCE_NUMBER`].
fn with_seek_key<R>(user_key: &[u8], seq: SequenceNumber, f: impl FnOnce(&[u8]) -> R) -> R {
    let seq = seq.min(MAX_SEQUENCE_NUMBER);
    let len = user_key.len() + TRAILER_BYTES;
    if len > SEEK_KEY_STACK_BYTES {
        return f(InternalKey::new(user_key, seq, ValueKind::FOR_SEEK).encoded());
    }
    let mut buf = [0u8; SEEK_KEY_STACK_BYTES];
    buf[..user_key.len()].copy_from_slice(user_key);
    buf[user_key.len()..len].copy_from_slice(&pack_trailer(seq, ValueKind::FOR_SEEK).to_le_bytes());
    f(&buf[..len])
}
