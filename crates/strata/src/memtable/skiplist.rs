//! A concurrent skiplist of byte-string entries, allocated in an [`Arena`].
//!
//! Concurrency, as in LevelDB's `db/skiplist.h`, with RocksDB's concurrent
//! inserts beside it:
//! - Writes come in two modes that never overlap in time: one writer alone
//!   ([`SkipList::writer`], the exclusive side of an internal lock), or any
//!   number of concurrent inserters ([`SkipList::concurrent_writer`], its
//!   shared side), each linking its node level by level with a
//!   compare-and-swap that fails, and is retried from a fresh search of that
//!   level, when another inserter got there first. Reads take no lock and
//!   may run during either.
//! - A node is fully initialized (size, entry bytes, its own links) before
//!   it is published by a `Release` store into its predecessor's link at
//!   level 0, then each higher level. Readers load links with `Acquire`, so a
//!   node they reach is always complete. A reader may see a node at level 0
//!   before the upper levels: that only makes its search slower.
//! - Nodes are never changed after publication (except for their links,
//!   which only ever point to a newer node that sorts between the two) and
//!   never freed before the list drops, so a [`NodeRef`] stays valid for the
//!   list's lifetime.
//! - `max_height` is read `Relaxed`: a reader that sees the new height before
//!   the head's new links finds null there, which means "end of level".
//!
//! Inserts start from a *splice* (RocksDB's `InlineSkipList`): the writer
//! keeps, for every level, the two adjacent nodes between which its last
//! insert went. The next insert climbs from level 0 to the lowest level
//! whose pair still brackets its key and searches down from there, so an
//! insert next to the previous one (sequential keys, a sorted batch) costs
//! one or two key comparisons instead of a search from the head. The splice
//! is the writer's own state, kept under the writer lock; it stays exact
//! because only the writer changes links, except when concurrent inserts
//! came between two of its runs. A concurrent inserter keeps a splice of
//! its own for its run of inserts. So a pair may have stopped being
//! adjacent: the climb stops only at an adjacent pair (RocksDB's
//! `InlineSkipList::Insert` checks the same), and a pair above it that is
//! no longer adjacent is searched again from its left node when the new
//! node is linked there (by the one writer after a check of the link, by
//! a concurrent inserter when its compare-and-swap fails).
//!
//! Node layout (one arena allocation, 8-byte aligned), the tower below the
//! node header so that a node pointer needs no height to find its entry:
//!
//! ```text
//! link[height-1] hint[height-1] .. link[1] hint[1] hint[0] | link[0] | size | entry bytes
//!                                                            ^ node pointer
//! ```
//!
//! **Hints.** Each link carries a *hint*: the 8-byte key
//! prefix ([`EntryOrder::prefix`]) of the node it points to, or
//! [`NO_HINT`]. A search of a level ends at the first node that sorts
//! after the key, and that node is a cache miss of its own; where the
//! prefixes differ, the hint in the link just loaded decides the
//! comparison without visiting it. Only the one writer reads hints, under
//! the writer lock, where this invariant holds: *every hint is [`NO_HINT`]
//! or the prefix of the node its link points to.* The one writer keeps it
//! (a new node's hint is its predecessor's old one; the predecessor's
//! becomes the new key's), and fills in a missing hint when a comparison
//! visits the node anyway. A concurrent inserter cannot keep it (two of
//! them may relink one slot at once), so after each link it makes it
//! sets the slot's hint to [`NO_HINT`]; the writer lock orders that before
//! the one writer's next read. Level 0's hint (stop 67) costs eight bytes
//! on every node and saves the insert's last comparison, the one that
//! ends the level-0 search at a node it would otherwise read only for
//! that: a 10M fill ran 8% faster with it (docs/benchmarks.md).
//!
//! Readers, which take no lock, may meet a stale hint: a link changed and
//! its hint not yet, or the other way round. They trust a hint only to go
//! *down*: a hint after the key ends the level's search without visiting
//! the node. Going down early is always correct (the levels below hold
//! every node); it only costs steps. Level 0 decides the answer, so there
//! readers never use the hint, and always compare. To go right they
//! visit the node, as before.
//!
//! `size` is a varint of `entry_len << 4 | height` (RocksDB's
//! `InlineSkipList` stores neither: its entries delimit themselves). One
//! or two bytes for most entries, where two `u32`s took eight: a node of a
//! 16-byte key and 100-byte value is 136 bytes instead of 144, so a
//! memtable holds 5% more such entries and flushes 5% less often. The
//! hints add 8 bytes per level: 10.7 bytes per node on average (every
//! node has level 0, a quarter reach level 1).
//!
//! Invariant: at each level, links run in strictly increasing key order and
//! end in null. Inserting a key equal to an existing one is a caller bug.

use std::cmp::Ordering as CmpOrdering;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::arena::{Arena, SpareBlocks};
use crate::util::coding::varint_length;
use crate::util::random::{next_random, thread_seed};

/// Tallest tower.
pub(crate) const MAX_HEIGHT: usize = 12;

/// One in this many nodes of height `h` also reaches `h + 1`.
const BRANCHING: u32 = 4;

/// How the list orders its entries.
pub(crate) trait EntryOrder: Send + Sync {
    /// The part of a stored entry the list orders by.
    fn key<'a>(&self, entry: &'a [u8]) -> &'a [u8];
    /// Three-way comparison of two keys.
    fn compare(&self, a: &[u8], b: &[u8]) -> CmpOrdering;
    /// A 64-bit prefix of `key` monotone in the order: `prefix(a) <
    /// prefix(b)` implies that `a` sorts before `b` (equal prefixes say
    /// nothing). `None` (the default): the order has none, and the list
    /// keeps no hints.
    fn prefix(&self, _key: &[u8]) -> Option<u64> {
        None
    }
}

/// A node header; see the module docs for the surrounding layout.
#[repr(C)]
struct Node {
    /// The level-0 link. The link for level `i` is `i` slots below it.
    next0: AtomicPtr<Node>,
}

/// Low bits of a node's size varint that hold its height.
const HEIGHT_BITS: u32 = 4;
const _: () = assert!(MAX_HEIGHT < 1 << HEIGHT_BITS);

/// Bytes of a link above level 0: the link and its hint.
const UPPER_LINK_BYTES: usize = 16;

/// Bytes of level 0's hint, below `next0`.
const HINT0_BYTES: usize = 8;

/// A hint that says nothing: the comparison visits the node. (A key whose
/// prefix is this value is only compared the slow way.)
const NO_HINT: u64 = u64::MAX;

/// Longest size varint (a `u64`).
const SIZE_VARINT_MAX: usize = 10;

/// Writes `v` as a varint at `dst` (in arena memory, so not through
/// [`crate::util::coding::put_varint64`], which appends to a `Vec`),
/// returning the bytes written.
///
/// # Safety
/// `dst` must be valid for [`varint_length`]`(v)` byte writes.
unsafe fn write_varint(dst: NonNull<u8>, mut v: u64) -> usize {
    let mut i = 0;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        let more = v != 0;
        // SAFETY: `i < varint_length(v)` (caller's contract).
        unsafe { dst.add(i).write(byte | (u8::from(more) << 7)) };
        i += 1;
        if !more {
            return i;
        }
    }
}

/// A node's height, the offset of its entry from the node pointer, and the
/// entry's length, read from its size varint.
///
/// # Safety
/// `node` must point to a node whose size varint is written: a published
/// node, the head, or one this thread has allocated.
#[inline]
unsafe fn node_layout(node: NonNull<Node>) -> (usize, usize, usize) {
    let size = node.cast::<u8>().as_ptr().wrapping_add(size_of::<Node>());
    let (mut v, mut i) = (0u64, 0);
    loop {
        // SAFETY: the varint follows the header inside the node's
        // allocation and ends at its first byte below 0x80 (contract).
        let byte = unsafe { size.add(i).read() };
        v |= u64::from(byte & 0x7f) << (7 * i);
        i += 1;
        if byte < 0x80 || i == SIZE_VARINT_MAX {
            break;
        }
    }
    let height = (v & ((1 << HEIGHT_BITS) - 1)) as usize;
    (height, size_of::<Node>() + i, (v >> HEIGHT_BITS) as usize)
}

/// Pointer to a link slot of `node`.
///
/// # Safety
/// `node` must point to an allocated node (initialized or being initialized
/// by the writer) whose height is greater than `level`.
unsafe fn link(node: NonNull<Node>, level: usize) -> NonNull<AtomicPtr<Node>> {
    // SAFETY: the size varint is written before any link is used
    // (`allocate_node`) and never changes.
    debug_assert!(level < unsafe { node_layout(node) }.0);
    // SAFETY: the tower holds level 0's hint right below `next0`, and
    // below it `height - 1` upper links (each with its hint), all in the
    // node's allocation, and `level < height` (caller's contract).
    match level {
        0 => node.cast(),
        _ => unsafe {
            node.cast::<u8>()
                .sub(UPPER_LINK_BYTES * level + HINT0_BYTES)
                .cast()
        },
    }
}

/// Pointer to the hint of `node`'s link at `level`; see the module docs.
///
/// # Safety
/// As for [`link`].
unsafe fn hint(node: NonNull<Node>, level: usize) -> NonNull<AtomicU64> {
    // SAFETY: level 0's hint is right below `next0`; an upper hint follows
    // its link inside the same 16-byte slot (contract of `link`).
    match level {
        0 => unsafe { node.cast::<u8>().sub(HINT0_BYTES).cast() },
        _ => unsafe { link(node, level).cast::<u8>().add(8).cast() },
    }
}

/// Loads the link of `node` at `level` with `Acquire`.
///
/// # Safety
/// `node` must be a published node (or the head) of height greater than `level`.
unsafe fn next(node: NonNull<Node>, level: usize) -> Option<NonNull<Node>> {
    // SAFETY: the slot exists (contract) and was initialized before `node`
    // was published; links are only ever accessed atomically.
    let slot = unsafe { link(node, level).as_ref() };
    NonNull::new(slot.load(Ordering::Acquire))
}

/// A published node, valid for the list's lifetime `'a`.
#[derive(Clone, Copy)]
pub(crate) struct NodeRef<'a> {
    node: NonNull<Node>,
    _list: PhantomData<&'a ()>,
}

impl fmt::Debug for NodeRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("NodeRef").field(&self.node).finish()
    }
}

/// A [`NodeRef`] without its lifetime, for iterators that own their list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawNode(NonNull<Node>);

// SAFETY: a `RawNode` is only an address; dereferencing it needs
// `NodeRef::from_raw`, whose contract requires the list to be alive, and
// published nodes are immutable apart from atomic links.
unsafe impl Send for RawNode {}
// SAFETY: as for `Send`.
unsafe impl Sync for RawNode {}

impl<'a> NodeRef<'a> {
    /// The node's entry bytes.
    pub(crate) fn entry(self) -> &'a [u8] {
        // SAFETY: a `NodeRef` only exists for a published node of a live list
        // (`'a`), whose bytes were written before publication and never
        // change.
        unsafe { node_entry(self.node) }
    }

    /// The next node at level 0, if any.
    pub(crate) fn next(self) -> Option<NodeRef<'a>> {
        // SAFETY: every node has height >= 1 and this one is published.
        let node = unsafe { next(self.node, 0) }?;
        Some(NodeRef {
            node,
            _list: PhantomData,
        })
    }

    /// Drops the lifetime; see [`NodeRef::from_raw`].
    pub(crate) fn into_raw(self) -> RawNode {
        RawNode(self.node)
    }

    /// Restores a node handle from [`NodeRef::into_raw`].
    ///
    /// # Safety
    /// `raw` must come from a list that outlives `'a`.
    pub(crate) unsafe fn from_raw(raw: RawNode) -> NodeRef<'a> {
        NodeRef {
            node: raw.0,
            _list: PhantomData,
        }
    }
}

/// Where an inserter's last insert went: at each level `i`, `prev[i]` (the
/// head, or a node) sorts before `next[i]` (null: the end), and the pairs
/// nest: going up, `prev` moves left and `next` right, or stays. At levels
/// at or above the list's height they are the head and null. A pair was
/// adjacent at its level when it was made; other inserters may have put
/// nodes between its two since (concurrent inserters at any time; for the
/// one writer, those of a parallel group between two of its runs).
struct Splice {
    prev: [NonNull<Node>; MAX_HEIGHT],
    next: [*mut Node; MAX_HEIGHT],
}

impl Splice {
    /// The splice of an empty list, or one to be searched from the head:
    /// head and null at every level.
    fn new(head: NonNull<Node>) -> Splice {
        Splice {
            prev: [head; MAX_HEIGHT],
            next: [ptr::null_mut(); MAX_HEIGHT],
        }
    }
}

/// What the one writer keeps between inserts, under the writer lock.
struct WriterState {
    /// The random-height generator's state.
    rng: u64,
    splice: Splice,
}

/// A skiplist; see the module docs for its concurrency contract.
pub(crate) struct SkipList<C> {
    order: C,
    arena: Arena,
    /// Sentinel of height [`MAX_HEIGHT`] with an empty entry; never compared.
    head: NonNull<Node>,
    /// Height of the tallest node so far (at least 1).
    max_height: AtomicUsize,
    /// Number of entries, incremented after each publication.
    len: AtomicUsize,
    /// The writer lock (exclusive: the one writer; shared: concurrent
    /// inserters) and the one writer's state.
    writer: RwLock<WriterState>,
}

// SAFETY: the list owns its arena and nodes. Published nodes are immutable
// apart from atomic links; the one writer mutates only under `writer`.
unsafe impl<C: Send> Send for SkipList<C> {}
// SAFETY: as for `Send`; shared access only reads nodes or takes the lock.
unsafe impl<C: Sync> Sync for SkipList<C> {}

impl<C> fmt::Debug for SkipList<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkipList")
            .field("len", &self.len.load(Ordering::Relaxed))
            .field("max_height", &self.max_height.load(Ordering::Relaxed))
            .field("arena", &self.arena)
            .finish_non_exhaustive()
    }
}

impl<C: EntryOrder> SkipList<C> {
    /// An empty list ordered by `order`, its arena's blocks growing to
    /// `block_size` bytes (see [`super::arena::block_size_for`]), its
    /// mapped blocks recycled through `spare`.
    pub(crate) fn new(order: C, block_size: usize, spare: Option<Arc<SpareBlocks>>) -> SkipList<C> {
        let arena = Arena::new(block_size, spare);
        let head = allocate_node(&arena, MAX_HEIGHT, &[]);
        SkipList {
            order,
            arena,
            head,
            max_height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            writer: RwLock::new(WriterState {
                rng: 0xdead_beef,
                splice: Splice::new(head),
            }),
        }
    }

    /// The order the list was built with.
    pub(crate) fn order(&self) -> &C {
        &self.order
    }

    /// Number of published entries.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Bytes held by the list's arena.
    pub(crate) fn memory_usage(&self) -> usize {
        self.arena.memory_usage()
    }

    /// Inserts the entry made of `parts` concatenated. Takes the writer lock;
    /// readers are not blocked. Panics if an equal key is present.
    #[cfg(test)]
    pub(crate) fn insert(&self, parts: &[&[u8]]) {
        self.writer().insert(parts);
    }

    /// Takes the writer lock for a run of inserts (a write batch): readers
    /// are not blocked, other writers wait until the handle drops.
    pub(crate) fn writer(&self) -> ListWriter<'_, C> {
        ListWriter {
            list: self,
            state: self.writer.write(),
        }
    }

    /// A handle for a run of inserts that may run at the same time as
    /// other such handles' (RocksDB's `InsertConcurrently`); a
    /// [`SkipList::writer`] waits until every one has dropped. Readers are
    /// not blocked.
    pub(crate) fn concurrent_writer(&self) -> ConcurrentListWriter<'_, C> {
        ConcurrentListWriter {
            list: self,
            _shared: self.writer.read(),
            splice: Splice::new(self.head),
            rng: thread_seed(),
        }
    }

    /// Inserts one entry from the splice in `w`; see [`ListWriter::insert`].
    fn insert_locked(&self, w: &mut WriterState, parts: &[&[u8]]) {
        let height = random_height(&mut w.rng);
        let node = allocate_node(&self.arena, height, parts);
        // SAFETY: `node` is initialized (`allocate_node`) and owned by this
        // writer until linked below; its entry bytes are immutable.
        let entry = unsafe { node_entry(node) };
        let key = self.order.key(entry);
        // The one writer reads and keeps the hints.
        let hints = self.order.prefix(key);
        let list_height = self.max_height.load(Ordering::Relaxed);
        let s = &mut w.splice;
        self.fit_splice(s, key, hints, list_height);
        if height > list_height {
            // Levels at or above the old height: the splice holds the head
            // and null there.
            self.max_height.store(height, Ordering::Relaxed);
        }
        for level in 0..height {
            let (mut before, mut after) = (s.prev[level], s.next[level]);
            // SAFETY: `before` is the head or a published node whose height
            // exceeds `level` (it was reached at `level`).
            if unsafe { link(before, level).as_ref() }.load(Ordering::Relaxed) != after {
                // Above the level the climb stopped at, concurrent inserts
                // since this writer's last insert may have put nodes between
                // the pair (they still bracket the key): search this level
                // again from `before`.
                (before, after) =
                    self.find_splice_for_level(key, hints, before, ptr::null_mut(), level);
            }
            // SAFETY: as above, and `node`'s height is `height > level`.
            // Only this writer stores links and hints now, so `after` is
            // still `before`'s successor at `level`, and `before`'s hint
            // is `after`'s prefix or none (the module docs' invariant).
            unsafe {
                link(node, level).as_ref().store(after, Ordering::Relaxed);
                if let Some(prefix) = hints {
                    let before_hint = hint(before, level).as_ref();
                    let after_prefix = before_hint.load(Ordering::Relaxed);
                    hint(node, level)
                        .as_ref()
                        .store(after_prefix, Ordering::Relaxed);
                    before_hint.store(prefix, Ordering::Relaxed);
                }
                link(before, level)
                    .as_ref()
                    .store(node.as_ptr(), Ordering::Release);
            }
            s.prev[level] = node;
        }
        // One writer: a plain store of the incremented count.
        let len = self.len.load(Ordering::Relaxed);
        self.len.store(len + 1, Ordering::Release);
    }

    /// Inserts one entry alongside other concurrent inserters; see
    /// [`ConcurrentListWriter::insert`].
    fn insert_concurrent(&self, s: &mut Splice, rng: &mut u64, parts: &[&[u8]]) {
        let height = random_height(rng);
        let node = allocate_node(&self.arena, height, parts);
        // SAFETY: as in `insert_locked`.
        let entry = unsafe { node_entry(node) };
        let key = self.order.key(entry);
        let list_height = self.max_height.load(Ordering::Relaxed);
        if height > list_height {
            // A reader that sees the new height before the links finds
            // null there: the end of the level.
            self.max_height.fetch_max(height, Ordering::Relaxed);
        }
        self.fit_splice(s, key, None, list_height);
        for level in 0..height {
            loop {
                let (before, after) = (s.prev[level], s.next[level]);
                // SAFETY: `before` is the head or a published node reached
                // at `level`; `node` (height > `level`) is not reachable at
                // `level` until the exchange below succeeds, so its link
                // there is this thread's alone.
                let linked = unsafe {
                    link(node, level).as_ref().store(after, Ordering::Relaxed);
                    link(before, level).as_ref().compare_exchange(
                        after,
                        node.as_ptr(),
                        Ordering::Release,
                        Ordering::Relaxed,
                    )
                };
                if linked.is_ok() {
                    // `before`'s hint may name `after`: it says nothing
                    // now (the module docs' invariant; `node`'s own
                    // hint is none from its allocation).
                    // SAFETY: `before` reaches `level` (above).
                    unsafe { hint(before, level).as_ref() }.store(NO_HINT, Ordering::Relaxed);
                    break;
                }
                // Another inserter linked a node after `before` here: find
                // this key's place again from `before`, which still sorts
                // before it.
                let (x, n) = self.find_splice_for_level(key, None, before, ptr::null_mut(), level);
                s.prev[level] = x;
                s.next[level] = n;
            }
            s.prev[level] = node;
        }
        self.len.fetch_add(1, Ordering::Release);
    }

    /// From `x` (the head or a node sorting before `key`, reached at
    /// `level`), walks `level` to the adjacent pair that brackets `key`,
    /// stopping at `end` (null, or a node known to sort after `key`)
    /// without comparing it. Panics if `key` is present.
    ///
    /// `hints`: the prefix of `key` when the caller is the one writer,
    /// which then uses the links' hints and fills in missing ones; `None`
    /// for a concurrent inserter.
    fn find_splice_for_level(
        &self,
        key: &[u8],
        hints: Option<u64>,
        mut x: NonNull<Node>,
        end: *mut Node,
        level: usize,
    ) -> (NonNull<Node>, *mut Node) {
        loop {
            // SAFETY: `x` is the head or a node reached at `level`.
            let n = unsafe { link(x, level).as_ref() }.load(Ordering::Acquire);
            if n == end {
                return (x, end);
            }
            // SAFETY: not null: `end` is null or reachable from `x` at
            // `level`, so a null link would have been `end`.
            let n = unsafe { NonNull::new_unchecked(n) };
            let after = match hints {
                // SAFETY: as above; the caller is the one writer.
                Some(prefix) => unsafe { self.compare_by_hint(key, prefix, x, n, level) },
                None => self.compare_new(key, n),
            };
            if after {
                return (x, n.as_ptr());
            }
            x = n;
        }
    }

    /// [`compare_new`](Self::compare_new)`(key, n)` for the one writer,
    /// where `n` follows `x` at `level` and `prefix` is `key`'s: the
    /// hint of `x`'s link decides where the prefixes differ, without
    /// reading `n`; otherwise `n` is read, and the hint filled in if it
    /// was missing.
    ///
    /// # Safety
    /// The caller holds the writer lock exclusively, and `x` reaches
    /// `level`, where its link points to `n`.
    unsafe fn compare_by_hint(
        &self,
        key: &[u8],
        prefix: u64,
        x: NonNull<Node>,
        n: NonNull<Node>,
        level: usize,
    ) -> bool {
        // SAFETY: `x` reaches `level` (contract).
        let slot = unsafe { hint(x, level).as_ref() };
        let known = slot.load(Ordering::Relaxed);
        if known != NO_HINT {
            debug_assert_eq!(Some(known), self.order.prefix(self.key_of(n)), "stale hint");
            if prefix != known {
                return prefix < known;
            }
            return self.compare_new(key, n);
        }
        let n_key = self.key_of(n);
        if let Some(n_prefix) = self.order.prefix(n_key) {
            slot.store(n_prefix, Ordering::Relaxed);
        }
        self.sorts_before(key, n_key)
    }

    /// Moves the splice `s` to bracket `key` at every level below
    /// `list_height`: climbs from level 0 to the lowest level whose pair is
    /// adjacent and brackets `key` (the pairs nest, so every level above
    /// brackets it too), then searches down from that pair; with no such
    /// level, searches down from the head. Panics if `key` is present.
    /// `hints` as for [`find_splice_for_level`](Self::find_splice_for_level).
    fn fit_splice(&self, s: &mut Splice, key: &[u8], hints: Option<u64>, list_height: usize) {
        debug_assert!(s.prev[list_height..].iter().all(|&p| p == self.head));
        debug_assert!(s.next[list_height..].iter().all(|n| n.is_null()));
        // Results of the last comparison on each side, by node: a pair
        // repeated from the level below needs no new comparison.
        let mut prev_seen: (NonNull<Node>, bool) = (self.head, true);
        let mut next_seen: (*mut Node, bool) = (ptr::null_mut(), true);
        let mut level = 0;
        while level < list_height {
            let (p, n) = (s.prev[level], s.next[level]);
            // SAFETY: `p` is the head or a node reached at `level`.
            let adjacent = unsafe { link(p, level).as_ref() }.load(Ordering::Acquire) == n;
            if adjacent {
                if p != prev_seen.0 {
                    let before = p == self.head
                        || self.order.compare(self.key_of(p), key) == CmpOrdering::Less;
                    prev_seen = (p, before);
                }
                if n != next_seen.0 {
                    let after = match (NonNull::new(n), hints) {
                        // SAFETY: `p` reaches `level` and links to `n`
                        // there; with hints the caller is the one writer.
                        (Some(n), Some(prefix)) => unsafe {
                            self.compare_by_hint(key, prefix, p, n, level)
                        },
                        (Some(n), _) => self.compare_new(key, n),
                        (None, _) => true,
                    };
                    next_seen = (n, after);
                }
                if prev_seen.1 && next_seen.1 {
                    break;
                }
            }
            level += 1;
        }
        let (mut x, mut end) = if level < list_height {
            (s.prev[level], s.next[level])
        } else {
            (self.head, ptr::null_mut())
        };
        for i in (0..level).rev() {
            (x, end) = self.find_splice_for_level(key, hints, x, end, i);
            s.prev[i] = x;
            s.next[i] = end;
        }
    }

    /// True if `key` (being inserted) sorts before published `node`; panics
    /// if they are equal.
    fn compare_new(&self, key: &[u8], node: NonNull<Node>) -> bool {
        self.sorts_before(key, self.key_of(node))
    }

    /// True if `key` (being inserted) sorts before `other`, a published
    /// node's key; panics if they are equal.
    fn sorts_before(&self, key: &[u8], other: &[u8]) -> bool {
        match self.order.compare(key, other) {
            CmpOrdering::Less => true,
            CmpOrdering::Greater => false,
            CmpOrdering::Equal => panic!("duplicate skiplist key"),
        }
    }

    /// The first entry, if any.
    pub(crate) fn first(&self) -> Option<NodeRef<'_>> {
        // SAFETY: the head has height MAX_HEIGHT.
        self.publish(unsafe { next(self.head, 0) })
    }

    /// The last entry, if any.
    pub(crate) fn last(&self) -> Option<NodeRef<'_>> {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            // SAFETY: `x` is the head or a node reached at `level`, so its
            // height exceeds `level`.
            match unsafe { next(x, level) } {
                Some(n) => x = n,
                None if level == 0 => return self.publish((x != self.head).then_some(x)),
                None => level -= 1,
            }
        }
    }

    /// The first entry with key >= `key`, if any.
    pub(crate) fn seek(&self, key: &[u8]) -> Option<NodeRef<'_>> {
        self.publish(self.find_greater_or_equal(key))
    }

    /// The last entry with key < `key`, if any.
    pub(crate) fn find_less_than(&self, key: &[u8]) -> Option<NodeRef<'_>> {
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            // SAFETY: `x` is the head or a node reached at `level`.
            let n = unsafe { next(x, level) };
            match n {
                Some(n) if self.order.compare(self.key_of(n), key) == CmpOrdering::Less => x = n,
                _ if level == 0 => return self.publish((x != self.head).then_some(x)),
                _ => level -= 1,
            }
        }
    }

    /// Finds the first node with key >= `key`.
    fn find_greater_or_equal(&self, key: &[u8]) -> Option<NonNull<Node>> {
        let prefix = self.order.prefix(key);
        let mut x = self.head;
        let mut level = self.max_height.load(Ordering::Relaxed) - 1;
        loop {
            // SAFETY: `x` is the head or a node reached at `level`.
            let n = unsafe { next(x, level) };
            match n {
                // SAFETY: as for `next`.
                Some(n)
                    if !unsafe { self.hint_says_after(prefix, x, level) }
                        && self.order.compare(self.key_of(n), key) == CmpOrdering::Less =>
                {
                    x = n
                }
                _ => {
                    if level == 0 {
                        return n;
                    }
                    level -= 1;
                }
            }
        }
    }

    /// For a reader: whether the hint of `x`'s link at `level` shows that
    /// the node the link points to sorts after a key whose prefix is
    /// `prefix`, so the search goes down a level without reading that
    /// node. A reader may meet a hint that is stale (the one writer, or a
    /// concurrent inserter, changing the link beside it), so it trusts a
    /// hint only for this: going down early is always correct (every node
    /// is on the levels below), it only costs steps; at level 0, which
    /// decides the answer, it never uses one. The writer, which alone
    /// keeps hints exact, also uses them to go right
    /// ([`compare_by_hint`](Self::compare_by_hint)).
    ///
    /// # Safety
    /// `x` is the head or a published node that reaches `level`.
    #[inline]
    unsafe fn hint_says_after(&self, prefix: Option<u64>, x: NonNull<Node>, level: usize) -> bool {
        let Some(prefix) = prefix else {
            return false;
        };
        if level == 0 {
            return false;
        }
        // SAFETY: `x` reaches `level` (contract).
        let known = unsafe { hint(x, level).as_ref() }.load(Ordering::Relaxed);
        known != NO_HINT && prefix < known
    }

    /// The ordering key of a published node.
    fn key_of(&self, node: NonNull<Node>) -> &[u8] {
        self.order.key(
            NodeRef {
                node,
                _list: PhantomData,
            }
            .entry(),
        )
    }

    /// Wraps a published node (never the head) in a handle bound to `self`.
    fn publish(&self, node: Option<NonNull<Node>>) -> Option<NodeRef<'_>> {
        debug_assert!(node != Some(self.head));
        node.map(|node| NodeRef {
            node,
            _list: PhantomData,
        })
    }
}

/// The writer lock of a [`SkipList`], held for a run of inserts.
pub(crate) struct ListWriter<'a, C> {
    list: &'a SkipList<C>,
    state: RwLockWriteGuard<'a, WriterState>,
}

/// One of several concurrent inserters of a [`SkipList`]; see
/// [`SkipList::concurrent_writer`].
pub(crate) struct ConcurrentListWriter<'a, C> {
    list: &'a SkipList<C>,
    /// Keeps the one writer out while this inserter runs.
    _shared: RwLockReadGuard<'a, WriterState>,
    splice: Splice,
    rng: u64,
}

impl<C: EntryOrder> ConcurrentListWriter<'_, C> {
    /// Inserts the entry made of `parts` concatenated, publishing it to
    /// readers before returning, while other inserters may be inserting
    /// too. Panics if an equal key is present.
    pub(crate) fn insert(&mut self, parts: &[&[u8]]) {
        self.list
            .insert_concurrent(&mut self.splice, &mut self.rng, parts);
    }
}

impl<C: EntryOrder> ListWriter<'_, C> {
    /// Inserts the entry made of `parts` concatenated, publishing it to
    /// readers before returning. Panics if an equal key is present.
    pub(crate) fn insert(&mut self, parts: &[&[u8]]) {
        self.list.insert_locked(&mut self.state, parts);
    }
}

/// The entry bytes of a node.
///
/// # Safety
/// `node` must be initialized (published, or allocated by this thread)
/// and outlive `'a`.
#[inline]
unsafe fn node_entry<'a>(node: NonNull<Node>) -> &'a [u8] {
    // SAFETY: the size varint and the `len` entry bytes after it are in the
    // node's allocation, initialized (contract).
    unsafe {
        let (_, offset, len) = node_layout(node);
        std::slice::from_raw_parts(node.cast::<u8>().as_ptr().add(offset), len)
    }
}

/// Allocates a node of `height` holding `parts` concatenated, with null
/// links and no hints.
fn allocate_node(arena: &Arena, height: usize, parts: &[&[u8]]) -> NonNull<Node> {
    assert!((1..=MAX_HEIGHT).contains(&height));
    let entry_len = parts.iter().map(|p| p.len()).sum::<usize>();
    let size = (entry_len as u64) << HEIGHT_BITS | height as u64;
    assert_eq!(
        size >> HEIGHT_BITS,
        entry_len as u64,
        "memtable entry too long"
    );
    let size_bytes = varint_length(size);
    let tower_bytes = (height - 1) * UPPER_LINK_BYTES + HINT0_BYTES;
    let base = arena.allocate(
        tower_bytes + size_of::<Node>() + size_bytes + entry_len,
        align_of::<Node>(),
    );
    // SAFETY: the allocation holds the tower, the header and the entry, and
    // is aligned for `Node` (and so for the pointer-sized links before it).
    // Every byte is written here before the node is shared.
    unsafe {
        let node = base.add(tower_bytes).cast::<Node>();
        node.write(Node {
            next0: AtomicPtr::new(ptr::null_mut()),
        });
        let mut dst = node.cast::<u8>().add(size_of::<Node>());
        dst = dst.add(write_varint(dst, size));
        debug_assert_eq!(
            node_layout(node),
            (height, size_of::<Node>() + size_bytes, entry_len)
        );
        hint(node, 0).write(AtomicU64::new(NO_HINT));
        for level in 1..height {
            link(node, level).write(AtomicPtr::new(ptr::null_mut()));
            hint(node, level).write(AtomicU64::new(NO_HINT));
        }
        for part in parts {
            ptr::copy_nonoverlapping(part.as_ptr(), dst.as_ptr(), part.len());
            dst = dst.add(part.len());
        }
        node
    }
}

/// Height 1 with probability 3/4, each further level a quarter as likely.
fn random_height(state: &mut u64) -> usize {
    let mut height = 1;
    while height < MAX_HEIGHT && next_random(state).is_multiple_of(BRANCHING) {
        height += 1;
    }
    height
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node's size varint gives back its height and entry, for every
    /// height and entry lengths around each varint length boundary.
    #[test]
    fn node_size_varint_round_trips() {
        let arena = Arena::new(4096, None);
        // Miri checks the unsafe code on short entries; long ones only
        // move the varint to three bytes.
        let lens: &[usize] = if cfg!(miri) {
            &[0, 1, 7, 8, 126, 127]
        } else {
            &[0, 1, 7, 8, 126, 127, 1023, 1024, 131_071, 131_072, 300_000]
        };
        for &len in lens {
            let entry: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            for height in 1..=MAX_HEIGHT {
                let size = (len as u64) << HEIGHT_BITS | height as u64;
                let node = allocate_node(&arena, height, &[&entry[..len / 2], &entry[len / 2..]]);
                // SAFETY: allocated just above; the arena outlives the checks.
                let (h, offset, l) = unsafe { node_layout(node) };
                assert_eq!((h, l), (height, len));
                assert_eq!(offset, size_of::<Node>() + varint_length(size));
                // SAFETY: as above.
                assert_eq!(unsafe { node_entry(node) }, &entry[..]);
            }
        }
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u64::MAX >> 1, u64::MAX] {
            let mut buf = [0u8; SIZE_VARINT_MAX];
            // SAFETY: the buffer holds the longest varint.
            let n = unsafe { write_varint(NonNull::from(&mut buf).cast(), v) };
            assert_eq!(n, varint_length(v), "{v}");
        }
    }

    /// Entries are the keys themselves, ordered bytewise.
    struct Bytewise;

    impl EntryOrder for Bytewise {
        fn key<'a>(&self, entry: &'a [u8]) -> &'a [u8] {
            entry
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> CmpOrdering {
            a.cmp(b)
        }
        // Hints on, so that every test here runs the one writer's hint
        // path (and its debug check of every hint it trusts).
        fn prefix(&self, key: &[u8]) -> Option<u64> {
            Some(crate::key::prefix_search::key_prefix(key))
        }
    }

    /// The hint invariant (module docs): every hint is none or the prefix
    /// of the node its link points to. Returns how many hints are known.
    fn check_hints(list: &SkipList<Bytewise>) -> usize {
        let mut known = 0;
        for level in 0..list.max_height.load(Ordering::Relaxed) {
            let mut x = list.head;
            // SAFETY: walking published nodes at a level they reach; no
            // writer runs.
            while let Some(n) = unsafe { next(x, level) } {
                let h = unsafe { hint(x, level).as_ref() }.load(Ordering::Relaxed);
                if h != NO_HINT {
                    assert_eq!(Some(h), list.order.prefix(list.key_of(n)), "level {level}");
                    known += 1;
                }
                x = n;
            }
        }
        known
    }

    fn collect(list: &SkipList<Bytewise>) -> Vec<Vec<u8>> {
        std::iter::successors(list.first(), |n| n.next())
            .map(|n| n.entry().to_vec())
            .collect()
    }

    #[test]
    fn empty_list() {
        let list = SkipList::new(Bytewise, 4096, None);
        assert_eq!(list.len(), 0);
        assert!(list.first().is_none() && list.last().is_none());
        assert!(list.seek(b"a").is_none() && list.find_less_than(b"a").is_none());
    }

    #[test]
    fn ordered_after_shuffled_inserts() {
        let list = SkipList::new(Bytewise, super::super::arena::HUGE_BLOCK, None);
        let n: u32 = if cfg!(miri) { 300 } else { 2000 };
        let mut keys: Vec<u32> = (0..n).map(|i| (i * 7919) % n).collect();
        for k in &keys {
            list.insert(&[&k.to_be_bytes()[..]]);
        }
        keys.sort_unstable();
        let want: Vec<Vec<u8>> = keys.iter().map(|k| k.to_be_bytes().to_vec()).collect();
        assert_eq!(collect(&list), want);
        assert_eq!(list.len(), n as usize);
        assert_eq!(list.last().map(|e| e.entry()), want.last().map(|w| &w[..]));
        let at = |n: Option<NodeRef<'_>>| n.map(|n| n.entry().to_vec());
        assert_eq!(at(list.seek(&want[10])), Some(want[10].clone()));
        assert_eq!(at(list.find_less_than(&want[10])), Some(want[9].clone()));
        assert_eq!(at(list.find_less_than(&want[0])), None);
        assert!(list.max_height.load(Ordering::Relaxed) > 1);
    }

    #[test]
    #[should_panic(expected = "duplicate")]
    fn duplicate_key_panics() {
        let list = SkipList::new(Bytewise, 4096, None);
        list.insert(&[b"a"]);
        list.insert(&[b"a"]);
    }

    /// Inserts from the splice against a `BTreeSet`: runs of ascending,
    /// descending, random and clustered keys, each run under one writer
    /// handle or one handle per key, checked whole after every run.
    #[test]
    fn splice_inserts_match_model() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        use std::collections::BTreeSet;

        // Miri runs a few of the seeds and runs: it is some 1,000x slower.
        let (seeds, runs) = if cfg!(miri) { (2, 4) } else { (20, 30) };
        for seed in 0..seeds {
            let mut rng = StdRng::seed_from_u64(seed);
            let list = SkipList::new(Bytewise, super::super::arena::HUGE_BLOCK, None);
            let mut model = BTreeSet::new();
            for _run in 0..runs {
                let len = rng.gen_range(1..200u32);
                let base = rng.gen_range(0..100_000u32);
                let keys: Vec<u32> = match rng.gen_range(0..4) {
                    0 => (base..base + len).collect(),
                    1 => (base..base + len).rev().collect(),
                    2 => (0..len).map(|_| rng.gen_range(0..100_000)).collect(),
                    // Around the previous insert point, both sides.
                    _ => (0..len).map(|_| base + rng.gen_range(0..len * 2)).collect(),
                };
                let keys: Vec<[u8; 4]> = keys
                    .into_iter()
                    .map(u32::to_be_bytes)
                    .filter(|k| model.insert(*k))
                    .collect();
                if rng.gen_bool(0.5) {
                    let mut writer = list.writer();
                    for k in &keys {
                        writer.insert(&[&k[..]]);
                    }
                } else {
                    for k in &keys {
                        list.insert(&[&k[..]]);
                    }
                }
                let want: Vec<Vec<u8>> = model.iter().map(|k| k.to_vec()).collect();
                assert_eq!(collect(&list), want, "seed {seed}");
                assert_eq!(list.len(), want.len());
                check_hints(&list);
                for _ in 0..20 {
                    let probe = rng.gen_range(0..101_000u32).to_be_bytes();
                    let at = list.seek(&probe).map(|n| n.entry().to_vec());
                    let want_at = model.range(probe..).next().map(|k| k.to_vec());
                    assert_eq!(at, want_at, "seed {seed}");
                }
            }
            // The one writer's inserts leave hints to use.
            assert!(check_hints(&list) > 0, "seed {seed}: no hints");
        }
    }

    #[test]
    #[should_panic(expected = "duplicate")]
    fn duplicate_next_to_splice_panics() {
        let list = SkipList::new(Bytewise, 4096, None);
        let mut writer = list.writer();
        writer.insert(&[b"b"]);
        writer.insert(&[b"c"]);
        writer.insert(&[b"b"]);
    }

    /// Concurrent inserters (interleaved ascending runs, descending runs
    /// and random keys, the same key space) while a reader walks the list
    /// and checks its order; then the one writer inserts into the result,
    /// its splice rebuilt after the concurrent inserts. Checked whole
    /// against a `BTreeSet` of everything inserted.
    #[test]
    fn concurrent_inserts_match_model() {
        use std::collections::BTreeSet;
        use std::sync::atomic::AtomicBool;

        let (threads, per_thread, rounds) = if cfg!(miri) { (3, 40, 2) } else { (4, 5000, 6) };
        // The keys thread `t` inserts in round `r`: the round, then a value
        // unique to the thread, in ascending, descending or random order.
        let keys = |r: usize, t: usize| -> Vec<Vec<u8>> {
            let mut rng = (t as u64 + 1) * 0x9e37_79b9 + r as u64;
            (0..per_thread as u64)
                .map(|i| {
                    let v = match (r + t) % 3 {
                        0 => i,
                        1 => per_thread as u64 - i,
                        _ => u64::from(next_random(&mut rng) % (1 << 20)) * per_thread as u64 + i,
                    };
                    let mut k = vec![r as u8];
                    k.extend_from_slice(&(v * threads as u64 + t as u64).to_be_bytes());
                    k
                })
                .collect()
        };
        let list = SkipList::new(Bytewise, super::super::arena::HUGE_BLOCK, None);
        let mut model = BTreeSet::new();
        for round in 0..rounds {
            let done = AtomicBool::new(false);
            // Keys already in the list, which every seek during the round
            // must find (readers trust hints the inserters are changing).
            let present: Vec<Vec<u8>> = model.iter().step_by(7).cloned().collect();
            std::thread::scope(|scope| {
                let list = &list;
                let done = &done;
                let present = &present;
                let reader = scope.spawn(move || {
                    let mut walks = 0;
                    while !done.load(Ordering::Acquire) || walks == 0 {
                        for k in present.iter().skip(walks % 5).step_by(5) {
                            let found = list.seek(k).map(|n| n.entry());
                            assert_eq!(found, Some(&k[..]), "a present key not found");
                        }
                        let mut prev: Option<&[u8]> = None;
                        let mut n = list.first();
                        while let Some(node) = n {
                            let k = node.entry();
                            assert!(prev.is_none_or(|p| p < k), "out of order");
                            prev = Some(k);
                            n = node.next();
                        }
                        walks += 1;
                    }
                });
                let writers: Vec<_> = (0..threads)
                    .map(|t| {
                        let mine = keys(round, t);
                        scope.spawn(move || {
                            let mut w = list.concurrent_writer();
                            for (i, k) in mine.iter().enumerate() {
                                w.insert(&[&k[..]]);
                                if i % 97 == 0 {
                                    // A new handle: a new splice, from the head.
                                    w = list.concurrent_writer();
                                }
                            }
                        })
                    })
                    .collect();
                let joined: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
                // Stop the reader before a writer's panic is passed on, or
                // the scope would wait for it for ever.
                done.store(true, Ordering::Release);
                reader.join().unwrap();
                for j in joined {
                    j.unwrap();
                }
            });
            for t in 0..threads {
                model.extend(keys(round, t));
            }
            // The one writer, between and after the concurrent runs.
            let mut w = list.writer();
            for i in 0..50u32 {
                let mut k = vec![round as u8];
                k.extend_from_slice(&(i * 7919 + 3).to_be_bytes());
                k.push(0xff);
                w.insert(&[&k[..]]);
                model.insert(k);
            }
            drop(w);
            check_hints(&list);
            let want: Vec<Vec<u8>> = model.iter().cloned().collect();
            assert_eq!(collect(&list), want, "round {round}");
            assert_eq!(list.len(), want.len());
            // Every level is in order and a subset of the one below.
            let height = list.max_height.load(Ordering::Relaxed);
            for level in 1..height {
                let mut x = list.head;
                // SAFETY: walking published nodes at a level they reach.
                while let Some(n) = unsafe { next(x, level) } {
                    let at = list.seek(list.key_of(n)).map(|r| r.node);
                    assert_eq!(at, Some(n), "level {level} node not found at level 0");
                    if x != list.head {
                        assert!(list.key_of(x) < list.key_of(n));
                    }
                    x = n;
                }
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "no unsafe code: a statistical check, slow under Miri")]
    fn heights_follow_branching_factor() {
        let mut state = 1;
        let n = 40_000;
        let tall = (0..n).filter(|_| random_height(&mut state) > 1).count();
        assert!(
            (n / 5..n * 3 / 10).contains(&tall),
            "{tall} of {n} taller than 1"
        );
    }
}
