//! The block iterator. Values are borrowed from the block's bytes; a key is
//! borrowed too when it is stored whole (at restart points), and otherwise
//! rebuilt in a reused buffer from the shared prefix of the previous key.
//!
//! Iteration and seeks never look at the hash index; only
//! [`BlockIter::seek_for_get`] does.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::iter::{InternalIterator, PrefixRun};
use crate::key::prefix_search::compare_user_in;
use crate::key::{
    compare_internal, extract_user_key, BuiltinOrder, BytewiseComparator, Comparator,
    ReverseBytewiseComparator, TRAILER_BYTES,
};
use crate::util::coding::{decode_fixed32, decode_varint32};
use crate::util::key_buf::{KeyBuf, INLINE as KEY_INLINE_BYTES};
use crate::util::prefetch::{prefetch_at, prefetch_range, CACHE_LINE};

use super::hash_index::{HashIndex, BUCKET_COLLISION, BUCKET_EMPTY};
use super::Block;

/// A cursor over one block's entries.
///
/// Invariant: the iterator is valid iff `current < restarts_offset` and the
/// status is Ok; an invalid iterator has `current == restarts_offset`.
pub struct BlockIter {
    data: Bytes,
    cmp: Arc<dyn Comparator>,
    /// Set when `cmp` is the internal-key comparator over this built-in
    /// order (or, with `user_keys`, that order itself): comparisons are
    /// then statically dispatched.
    internal_order: Option<BuiltinOrder>,
    /// The block's keys are user keys, not internal keys (an index block
    /// whose separators are user keys): `cmp` is the user comparator,
    /// `internal_order` the user order when built in, and seeks take the
    /// user key of their internal-key target.
    user_keys: bool,
    restarts_offset: usize,
    num_restarts: u32,
    hash_index: Option<HashIndex>,
    file: Arc<str>,
    block_offset: u64,
    /// Offset of the current entry.
    current: usize,
    /// Offset just past the current entry.
    next: usize,
    /// Index of the restart interval holding `current`.
    restart_index: u32,
    /// The current key when it is not borrowed. Inline up to
    /// [`KEY_INLINE_BYTES`], so a point lookup (a new iterator per block)
    /// allocates nothing for the usual key.
    key_buf: KeyBuf,
    /// The entries of one restart interval, decoded by a backward step so
    /// that the backward steps after it within the interval scan nothing
    /// (as RocksDB's `prev_entries_`).
    cache: IntervalCache,
    /// The cache entry restored last: while the iterator is still there
    /// (same offset), `prev` takes the entry before it directly.
    cache_pos: usize,
    /// Every prefix change in the block is a restart point (the table
    /// recorded it for the reader's prefix extractor).
    prefix_restarts: bool,
    /// Where the current key is: `key_buf`, or whole in `data`, or in the
    /// interval cache (after a backward step).
    key_at: KeyAt,
    value: Range<usize>,
    status: Result<()>,
}

impl std::fmt::Debug for BlockIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockIter")
            .field("file", &self.file)
            .field("block_offset", &self.block_offset)
            .field("current", &self.current)
            .finish()
    }
}

/// Most cache lines a seek (point lookup or iterator seek) prefetches of
/// the restart interval it scans (1 KiB: a default 16-entry interval of
/// small entries).
const INTERVAL_PREFETCH_LINES: usize = 1024 / CACHE_LINE;

/// Entries of one restart interval, by offset, with copies of their keys.
#[derive(Debug, Default)]
struct IntervalCache {
    /// The interval held, if any.
    interval: Option<u32>,
    entries: Vec<CachedEntry>,
    keys: Vec<u8>,
}

#[derive(Debug)]
struct CachedEntry {
    current: usize,
    next: usize,
    value: Range<usize>,
    /// The key's range in [`IntervalCache::keys`].
    key: Range<usize>,
}

/// Restart keys a forward prefix skip loads at once (their addresses are
/// all in the restart array) before testing them in order, so that a run
/// of a few intervals costs one wait for memory instead of a scan through
/// its entries; longer runs binary-search the rest of the block.
const RESTART_LOOKAHEAD: u32 = 8;

/// Covered restart entries a forward prefix skip passes by scanning before
/// it looks ahead in the restart array: most runs end within one or two.
const RESTARTS_SCANNED_MAX: u32 = 1;

/// What [`BlockIter::prev_run_first_in_block`] found.
#[derive(Debug)]
pub(crate) enum PrevRun {
    /// At the first entry of the run before.
    Landed,
    /// The run before covers the block's first entry and may begin in an
    /// earlier block; it is the run of this internal key. Not moved.
    FromBlockStart(SmallVec<[u8; KEY_INLINE_BYTES]>),
    /// The current run begins at the block's first entry: the run before
    /// ends in an earlier block. Not moved.
    BeforeBlock,
    /// The block's last entry is not in the run expected there. Not moved.
    Outside,
    /// Not found from what the block holds (or the block is corrupt,
    /// recorded in its status). Not moved.
    Unknown,
}

/// Where a block iterator's current key is stored.
#[derive(Debug, Clone)]
enum KeyAt {
    /// In `key_buf` (rebuilt from shared bytes).
    Buf,
    /// Whole in the block's data, at this range.
    Data(Range<usize>),
    /// In the interval cache's keys, at this range.
    Cache(Range<usize>),
}

/// The decoded header of one entry.
pub(crate) struct EntryHeader {
    pub(crate) shared: usize,
    pub(crate) non_shared: usize,
    pub(crate) value_len: usize,
    /// Offset of the key delta.
    pub(crate) key_start: usize,
}

/// The offset of restart point `index` of a block's `data` whose restart
/// array begins at `restarts_offset`, checked to lie inside the entries
/// area (`None` when it does not, or `index` is past the array).
#[inline]
pub(crate) fn restart_point(data: &[u8], restarts_offset: usize, index: u32) -> Option<usize> {
    let at = restarts_offset + index as usize * 4;
    let point = decode_fixed32(data.get(at..)?)? as usize;
    (point <= restarts_offset).then_some(point)
}

/// The header of the entry at `at` of a block's `data` whose entries end
/// at `end`, its lengths checked to stay inside the entries area.
#[inline(always)]
pub(crate) fn decode_entry_header(data: &[u8], end: usize, at: usize) -> Option<EntryHeader> {
    // Three one-byte lengths, the usual header of a small entry: read
    // together, without the general varint decoder.
    if let Some(&[shared, non_shared, value_len]) = data.get(at..at + 3) {
        if (shared | non_shared | value_len) < 0x80 {
            let key_start = at + 3;
            if key_start + non_shared as usize + value_len as usize > end {
                return None;
            }
            return Some(EntryHeader {
                shared: shared as usize,
                non_shared: non_shared as usize,
                value_len: value_len as usize,
                key_start,
            });
        }
    }
    decode_entry_header_varints(data, end, at)
}

#[inline(never)]
fn decode_entry_header_varints(data: &[u8], end: usize, at: usize) -> Option<EntryHeader> {
    let area = data.get(at..end)?;
    let (shared, n1) = decode_varint32(area)?;
    let (non_shared, n2) = decode_varint32(&area[n1..])?;
    let (value_len, n3) = decode_varint32(&area[n1 + n2..])?;
    let header = n1 + n2 + n3;
    let body = (non_shared as u64) + (value_len as u64);
    if header as u64 + body > area.len() as u64 {
        return None;
    }
    Some(EntryHeader {
        shared: shared as usize,
        non_shared: non_shared as usize,
        value_len: value_len as usize,
        key_start: at + header,
    })
}

impl BlockIter {
    pub(super) fn new(block: &Block, cmp: Arc<dyn Comparator>) -> BlockIter {
        Self::from_block(block.clone(), cmp)
    }

    pub(super) fn from_block(block: Block, cmp: Arc<dyn Comparator>) -> BlockIter {
        BlockIter {
            data: block.data,
            cmp,
            internal_order: None,
            user_keys: false,
            restarts_offset: block.restarts_offset,
            num_restarts: block.num_restarts,
            hash_index: block.hash_index,
            file: block.file,
            block_offset: block.offset,
            current: block.restarts_offset,
            next: block.restarts_offset,
            restart_index: block.num_restarts,
            key_buf: KeyBuf::default(),
            cache: IntervalCache::default(),
            cache_pos: 0,
            prefix_restarts: false,
            key_at: KeyAt::Buf,
            value: 0..0,
            status: Ok(()),
        }
    }

    /// An iterator over a block of no entries (of table `file`): never
    /// valid. Stands in where a block could not be read and the owner
    /// reports that error itself.
    pub(crate) fn empty(file: Arc<str>) -> BlockIter {
        // No entries; one restart point at offset 0; footer: 1 restart,
        // no hash index.
        const EMPTY: [u8; 8] = [0, 0, 0, 0, 1, 0, 0, 0];
        let block = Block::new(Bytes::from_static(&EMPTY), file, 0)
            .expect("the empty block is well formed");
        Self::from_block(block, Arc::new(crate::key::BytewiseComparator))
    }

    /// Declares that every prefix change in the block is a restart point,
    /// for the extractor of the prefix runs it will be asked to skip.
    pub(crate) fn with_prefix_restarts(mut self, v: bool) -> BlockIter {
        self.prefix_restarts = v;
        self
    }

    /// Declares that the iterator's comparator is the internal-key
    /// comparator over the built-in `order` (from the user comparator's
    /// [`Comparator::builtin_order`]), so that comparisons skip the trait
    /// object. Debug builds check the claim at every comparison.
    pub fn with_internal_order(mut self, order: Option<BuiltinOrder>) -> BlockIter {
        self.internal_order = order;
        self
    }

    /// Declares that the block's keys are user keys ordered by `cmp` (the
    /// iterator's comparator, the user comparator) of built-in `order`
    /// when it has one: an index block whose separators are user keys.
    /// Seeks still take internal keys and search for their user keys;
    /// prefix runs are tested on the keys as they are.
    pub(crate) fn with_user_keys(mut self, order: Option<BuiltinOrder>) -> BlockIter {
        self.user_keys = true;
        self.internal_order = order;
        self
    }

    /// The user key of the current entry.
    #[inline]
    pub(crate) fn user_key(&self) -> &[u8] {
        if self.user_keys {
            self.key()
        } else {
            extract_user_key(self.key())
        }
    }

    /// What a seek for the internal key `target` compares entries with.
    #[inline]
    fn seek_target<'t>(&self, target: &'t [u8]) -> &'t [u8] {
        if self.user_keys {
            extract_user_key(target)
        } else {
            target
        }
    }

    /// True if `run` covers the entry key `key` (an internal key, or a
    /// user key in a block of user keys).
    #[inline]
    fn run_covers(&self, run: &PrefixRun<'_>, key: &[u8]) -> bool {
        if self.user_keys {
            run.covers_user_key(key)
        } else {
            run.covers(key)
        }
    }

    /// [`PrefixRun::covered_by_shared`] for an entry key `len` bytes long
    /// in this block (a user key is the internal key without its trailer).
    #[inline]
    fn run_covered_by_shared(&self, run: &PrefixRun<'_>, shared: usize, len: usize) -> bool {
        let len = if self.user_keys {
            len + TRAILER_BYTES
        } else {
            len
        };
        run.covered_by_shared(shared, len)
    }

    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        if self.user_keys {
            return compare_user_in(self.internal_order, &*self.cmp, a, b);
        }
        let c = match self.internal_order {
            Some(BuiltinOrder::Bytewise) => compare_internal(&BytewiseComparator, a, b),
            Some(BuiltinOrder::ReverseBytewise) => {
                compare_internal(&ReverseBytewiseComparator, a, b)
            }
            None => return self.cmp.compare(a, b),
        };
        debug_assert_eq!(c, self.cmp.compare(a, b), "internal order claimed wrongly");
        c
    }

    /// The current value as a reference-counted slice of the block (no copy).
    pub fn value_bytes(&self) -> Bytes {
        debug_assert!(self.valid());
        self.data.slice(self.value.clone())
    }

    /// Where the current value lies in the block's data.
    pub(crate) fn value_range(&self) -> Range<usize> {
        debug_assert!(self.valid());
        self.value.clone()
    }

    fn corrupt(&mut self, at: usize, what: &str) {
        self.fail(format!("block entry at byte {at}: {what}"));
    }

    fn fail(&mut self, what: String) {
        if self.status.is_ok() {
            self.status = Err(Error::corruption(&*self.file, self.block_offset, what));
        }
        self.invalidate();
    }

    fn invalidate(&mut self) {
        self.current = self.restarts_offset;
        self.next = self.restarts_offset;
        self.restart_index = self.num_restarts;
        self.key_at = KeyAt::Buf;
        self.key_buf.clear();
    }

    /// The offset of restart point `index`, checked to lie inside the
    /// entries area.
    fn restart_point(&self, index: u32) -> Option<usize> {
        debug_assert!(index < self.num_restarts);
        restart_point(&self.data, self.restarts_offset, index)
    }

    /// The header of the entry at `at`, its lengths checked to stay inside
    /// the entries area.
    #[inline(always)]
    fn decode_header(&self, at: usize) -> Option<EntryHeader> {
        decode_entry_header(&self.data, self.restarts_offset, at)
    }

    fn seek_to_restart(&mut self, index: u32) -> bool {
        let Some(point) = self.restart_point(index) else {
            let at = self.restarts_offset + index as usize * 4;
            self.corrupt(at, "restart point outside the entries area");
            return false;
        };
        self.key_at = KeyAt::Buf;
        self.key_buf.clear();
        self.restart_index = index;
        self.next = point;
        true
    }

    /// Decodes the entry at `self.next`. Returns false at the end or on
    /// corruption.
    fn parse_next(&mut self) -> bool {
        self.current = self.next;
        if self.current >= self.restarts_offset {
            self.invalidate();
            return false;
        }
        let at = self.current;
        let Some(h) = self.decode_header(at) else {
            self.corrupt(at, "entry header or lengths run past the entries area");
            return false;
        };
        let prev_len = match &self.key_at {
            KeyAt::Data(r) | KeyAt::Cache(r) => r.len(),
            KeyAt::Buf => self.key_buf.len(),
        };
        if h.shared > prev_len {
            self.corrupt(
                at,
                &format!(
                    "shares {} bytes with a {prev_len}-byte previous key",
                    h.shared
                ),
            );
            return false;
        }
        let key_end = h.key_start + h.non_shared;
        if h.shared == 0 {
            self.key_at = KeyAt::Data(h.key_start..key_end);
        } else {
            match std::mem::replace(&mut self.key_at, KeyAt::Buf) {
                KeyAt::Data(r) => {
                    self.key_buf.clear();
                    self.key_buf.append(&self.data, r.start, h.shared);
                }
                KeyAt::Cache(r) => {
                    self.key_buf.clear();
                    self.key_buf.append(&self.cache.keys, r.start, h.shared);
                }
                KeyAt::Buf => self.key_buf.truncate(h.shared),
            }
            self.key_buf.append(&self.data, h.key_start, h.non_shared);
        }
        self.value = key_end..key_end + h.value_len;
        self.next = self.value.end;
        while self.restart_index + 1 < self.num_restarts {
            match self.restart_point(self.restart_index + 1) {
                Some(p) if p <= self.current => self.restart_index += 1,
                Some(_) => break,
                None => {
                    self.corrupt(at, "restart point outside the entries area");
                    return false;
                }
            }
        }
        true
    }

    /// Asks the CPU for the lines of restart interval `index`, which a
    /// seek is about to scan: their misses then overlap instead of
    /// coming one entry after another. At most [`INTERVAL_PREFETCH_LINES`].
    #[inline]
    fn prefetch_interval(&self, index: u32) {
        let Some(start) = self.restart_point(index) else {
            return;
        };
        let end = if index + 1 < self.num_restarts {
            self.restart_point(index + 1).unwrap_or(start)
        } else {
            self.restarts_offset
        };
        prefetch_range(&self.data, start, end, INTERVAL_PREFETCH_LINES);
    }

    /// Asks the CPU for the line of the entry at restart point `index`.
    #[inline]
    fn prefetch_restart_key(&self, index: u32) {
        if index < self.num_restarts {
            if let Some(point) = self.restart_point(index) {
                prefetch_at(&self.data, point);
            }
        }
    }

    /// The whole key stored at restart point `index`.
    fn restart_key(&self, index: u32) -> Option<Range<usize>> {
        let point = self.restart_point(index)?;
        let h = self.decode_header(point)?;
        (h.shared == 0).then_some(h.key_start..h.key_start + h.non_shared)
    }

    /// The index of the last restart point whose key is < `target` (0 if none).
    fn search_restarts(&mut self, target: &[u8]) -> Option<u32> {
        let (mut left, mut right) = (0u32, self.num_restarts - 1);
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            // Both restart keys the next step may compare start loading
            // while this one's arrives.
            self.prefetch_restart_key(mid + (right - mid).div_ceil(2));
            self.prefetch_restart_key(left + (mid - 1 - left).div_ceil(2));
            let Some(r) = self.restart_key(mid) else {
                let at = self.restart_point(mid).unwrap_or(self.restarts_offset);
                self.corrupt(at, "restart entry is malformed or shares a prefix");
                return None;
            };
            if self.compare(&self.data[r], target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        Some(left)
    }
}

/// Point lookups through the hash index.
impl BlockIter {
    /// Positions the iterator for a point lookup of `target`, an internal
    /// key whose user key has [`super::user_key_hash`] `hash`, through the
    /// block's hash index when it has one. Afterwards:
    ///
    /// - valid: the current key is `>= target`. If its user key is the
    ///   target's, it is the first key `>= target` in the block: the
    ///   answer. If not, its user key is greater, so neither this block nor
    ///   any later one holds the target's user key at or after `target`.
    /// - invalid with an Ok status: every key of the block is `< target`;
    ///   the answer, if any, is in a later block.
    ///
    /// [`InternalIterator::seek`] meets the same contract; this skips its
    /// binary search whenever the bucket names a restart interval, and
    /// proves absence from an empty bucket. Relies on the builder's rules:
    /// versions of a user key are adjacent and its bucket names the
    /// interval of its first entry; user keys are equal only when their
    /// bytes are (the builder writes no index for other comparators).
    pub fn seek_for_get(&mut self, target: &[u8], hash: u64) {
        debug_assert!(!self.user_keys, "seek_for_get is for data blocks");
        if self.status.is_err() {
            return;
        }
        let Some(index) = self.hash_index else {
            return self.seek(target);
        };
        match index.lookup(&self.data, hash) {
            (BUCKET_COLLISION, _) => self.seek(target),
            (BUCKET_EMPTY, _) => self.seek_in_last_interval(target),
            (interval, _) if u32::from(interval) < self.num_restarts => {
                self.seek_from_interval(target, u32::from(interval));
            }
            (interval, at) => self.fail(format!(
                "hash bucket at byte {at} names restart interval {interval}; the block has {}",
                self.num_restarts
            )),
        }
    }

    /// Scans from restart point `interval` (where the target's user key
    /// starts, if the block holds it) to the first key `>= target`.
    fn seek_from_interval(&mut self, target: &[u8], interval: u32) {
        self.prefetch_interval(interval);
        if !self.seek_to_restart(interval) {
            return;
        }
        while self.parse_next() {
            if self.compare(self.key(), target) != Ordering::Less {
                return;
            }
            if self.restart_index > interval {
                // The first key of the next interval is still < target.
                if extract_user_key(self.key()) == extract_user_key(target) {
                    // The user key's versions run past its first interval
                    // and the one asked for is further on: binary search
                    // bounds the work however many versions there are.
                    self.seek(target);
                } else {
                    // A smaller user key after the target's first interval:
                    // the target's user key is not in this block.
                    self.seek_in_last_interval(target);
                }
                return;
            }
        }
    }

    /// For a target whose user key the block does not hold: scans the last
    /// restart interval to the first key `>= target`. If the last restart
    /// key is `<= target`, this is an exact seek; if it is greater, it stops
    /// there, on a key whose user key is greater than the target's, which
    /// is all [`BlockIter::seek_for_get`] promises.
    fn seek_in_last_interval(&mut self, target: &[u8]) {
        self.seek_from(target, self.num_restarts - 1);
    }
}

/// A seek in stages, for a batch of point lookups that runs each stage for
/// all its keys before the next, so that the cache misses of different
/// keys overlap instead of following one another: the restart keys of
/// each block ([`BlockIter::prefetch_restart_keys`]), each key's restart
/// search ([`BlockIter::seek_start`], which asks for the lines of the
/// interval it picks), then each key's scan ([`BlockIter::seek_from`]).
/// `seek_start` then `seek_from` is exactly [`InternalIterator::seek`].
impl BlockIter {
    /// True when the block has a hash index, which
    /// [`BlockIter::seek_for_get`] uses instead of the staged seek.
    pub(crate) fn has_hash_index(&self) -> bool {
        self.hash_index.is_some()
    }

    /// Asks the CPU for the lines of the first `max` restart keys, which
    /// the restart search of a seek reads.
    pub(crate) fn prefetch_restart_keys(&self, max: u32) {
        for index in 0..self.num_restarts.min(max) {
            self.prefetch_restart_key(index);
        }
    }

    /// The restart interval where a seek for `target` starts its scan (the
    /// last restart key below `target`, or 0), with its lines asked for;
    /// `None` after corruption (recorded in the status). Does not move the
    /// iterator.
    pub(crate) fn seek_start(&mut self, target: &[u8]) -> Option<u32> {
        if self.status.is_err() {
            return None;
        }
        let index = self.search_restarts(target)?;
        self.prefetch_interval(index);
        Some(index)
    }

    /// Finishes a seek for `target` that [`BlockIter::seek_start`] started
    /// at restart interval `index`: scans from there to the first key
    /// `>= target`.
    pub(crate) fn seek_from(&mut self, target: &[u8], index: u32) {
        if self.status.is_err() || !self.seek_to_restart(index) {
            return;
        }
        while self.parse_next() {
            if self.compare(self.key(), target) != Ordering::Less {
                return;
            }
        }
    }
}

/// Prefix steps: passing the entries of a [`PrefixRun`] without looking
/// at each one where the block's layout proves them covered.
impl BlockIter {
    /// The first restart point in `lo..hi` whose key `run` covers unless
    /// `leading` is (or does not cover if `leading` is): the restart keys
    /// of a run that is an interval are covered in one stretch, so within
    /// the range coverage is `leading` up to a point and the opposite from
    /// it. `None` on corruption (recorded).
    fn restart_partition(
        &mut self,
        run: &PrefixRun<'_>,
        lo: u32,
        hi: u32,
        leading: bool,
    ) -> Option<u32> {
        let (mut left, mut right) = (lo, hi);
        while left < right {
            let mid = left + (right - left) / 2;
            if self.restart_covered(run, mid)? == leading {
                left = mid + 1;
            } else {
                right = mid;
            }
        }
        Some(left)
    }

    /// Re-decodes the entry at `at` from the start of its restart interval,
    /// after entries before it were passed without rebuilding their keys.
    fn reparse_at(&mut self, at: usize) -> bool {
        let mut index = self.restart_index;
        while index + 1 < self.num_restarts {
            match self.restart_point(index + 1) {
                Some(p) if p <= at => index += 1,
                _ => break,
            }
        }
        if !self.seek_to_restart(index) {
            return false;
        }
        // Bounded by the interval: each turn moves forward.
        while self.parse_next() {
            if self.current >= at {
                return true;
            }
        }
        false
    }

    /// See [`InternalIterator::skip_run_forward`]; stays in this block
    /// (invalid with an Ok status when the run reaches its end).
    fn skip_run_forward_in_block(&mut self, run: &PrefixRun<'_>) {
        if !self.valid() || !self.run_covers(run, self.key()) {
            return;
        }
        if self.prefix_restarts {
            return self.skip_to_next_run_restart(run);
        }
        let shared_bytes = run.bytes().len();
        let mut passed = false;
        let mut restarts_passed = 0;
        // Bounded by the block: each turn moves forward by one entry or more.
        loop {
            let at = self.next;
            if at < self.restarts_offset {
                // One-byte lengths (the common case) decode without the
                // general varint path.
                if let Some(&[shared, non_shared, value_len]) = self.data.get(at..at + 3) {
                    if (shared | non_shared | value_len) < 0x80 {
                        let end = at + 3 + non_shared as usize + value_len as usize;
                        let len = shared as usize + non_shared as usize;
                        if end <= self.restarts_offset
                            && self.run_covered_by_shared(run, shared as usize, len)
                        {
                            self.next = end;
                            passed = true;
                            continue;
                        }
                        // A restart entry holds its whole key: test it in
                        // place. A run past a few of them jumps (below).
                        if shared == 0
                            && restarts_passed < RESTARTS_SCANNED_MAX
                            && run.is_interval()
                            && end <= self.restarts_offset
                            && self
                                .run_covers(run, &self.data[at + 3..at + 3 + non_shared as usize])
                        {
                            self.next = end;
                            passed = true;
                            restarts_passed += 1;
                            continue;
                        }
                    }
                }
                let Some(h) = self.decode_header(at) else {
                    self.corrupt(at, "entry header or lengths run past the entries area");
                    return;
                };
                // Its leading bytes are the run's: covered, and its key need
                // not be rebuilt, since every key passed this way starts with
                // the same bytes as the last one rebuilt.
                if self.run_covered_by_shared(run, h.shared, h.shared + h.non_shared) {
                    self.next = h.key_start + h.non_shared + h.value_len;
                    passed = true;
                    continue;
                }
                if passed && h.shared > shared_bytes {
                    // It shares bytes of a passed key beyond the run's own:
                    // rebuild the chain of keys to it.
                    if !self.reparse_at(at) {
                        return;
                    }
                } else if !self.parse_next() {
                    return;
                }
            } else if !self.parse_next() {
                return; // the end of the block
            }
            passed = false;
            if !self.run_covers(run, self.key()) {
                return;
            }
            let at_restart = self.restart_point(self.restart_index) == Some(self.current);
            if at_restart && run.is_interval() && self.jump_over_covered_intervals(run).is_none() {
                return;
            }
        }
    }

    /// The first restart point after restart `ri` whose key `run` does not
    /// cover (`num_restarts` if none), for a covered entry in interval
    /// `ri`. Restart keys are loaded a batch at a time (their addresses
    /// are all in the restart array) and tested in order; for a run that
    /// is an interval, past the first batch the rest is binary-searched.
    /// `None` on corruption (recorded).
    fn first_uncovered_restart_after(&mut self, run: &PrefixRun<'_>, ri: u32) -> Option<u32> {
        let n = self.num_restarts;
        let mut i = ri + 1;
        // Bounded by the restart array: each batch moves forward.
        while i < n {
            let end = (i + RESTART_LOOKAHEAD).min(n);
            for j in i..end {
                self.prefetch_restart_key(j);
            }
            for j in i..end {
                if !self.restart_covered(run, j)? {
                    return Some(j);
                }
            }
            if run.is_interval() {
                return self.restart_partition(run, end, n, true);
            }
            i = end;
        }
        Some(n)
    }

    /// Mirror of [`Self::first_uncovered_restart_after`]: the first restart
    /// point of the stretch of covered restart keys that ends at restart
    /// `ri` (whose key `run` covers), searched backward.
    fn first_covered_restart_back(&mut self, run: &PrefixRun<'_>, ri: u32) -> Option<u32> {
        let mut j = ri;
        // Bounded by the restart array: each batch moves backward.
        loop {
            let low = j.saturating_sub(RESTART_LOOKAHEAD - 1);
            for k in low..j {
                self.prefetch_restart_key(k);
            }
            for k in (low..=j).rev() {
                if !self.restart_covered(run, k)? {
                    return Some(k + 1);
                }
            }
            if low == 0 {
                return Some(0);
            }
            if run.is_interval() {
                return self.restart_partition(run, 0, low, false);
            }
            j = low - 1;
        }
    }

    /// From a covered entry of a run that is an interval: when later
    /// restart keys are covered too, moves to the last of them and returns
    /// `Some(true)`; else stays (`Some(false)`). `None` on corruption.
    fn jump_over_covered_intervals(&mut self, run: &PrefixRun<'_>) -> Option<bool> {
        let ri = self.restart_index;
        let last = self.first_uncovered_restart_after(run, ri)? - 1;
        if last == ri {
            return Some(false);
        }
        if !self.seek_to_restart(last) || !self.parse_next() {
            return None;
        }
        Some(true)
    }

    /// See [`InternalIterator::skip_run_backward`]; stays in this block
    /// (invalid with an Ok status when the run starts at or before its
    /// first entry).
    fn skip_run_backward_in_block(&mut self, run: &PrefixRun<'_>) {
        if !run.is_interval() && !self.prefix_restarts {
            while self.valid() && self.run_covers(run, self.key()) {
                self.prev();
            }
            return;
        }
        if !self.valid() || !self.run_covers(run, self.key()) {
            return;
        }
        // The run's first entry lies in the interval before its first
        // covered restart point (or at that point). In a block that
        // restarts at every prefix change it is that point, so the current
        // interval's restart key is covered.
        let ri = self.restart_index;
        let Some(covered_here) = self.restart_covered(run, ri) else {
            return;
        };
        if !covered_here {
            // The run starts inside this interval, after its first entry.
            let original = self.current;
            if !self.cache_interval(ri) {
                return;
            }
            let j = self.cache.entries.partition_point(|e| e.current < original);
            return self.land_before_run(run, j);
        }
        let Some(first) = self.first_covered_restart_back(run, ri) else {
            return;
        };
        if first == 0 {
            return self.invalidate();
        }
        if !self.cache_interval(first - 1) {
            return;
        }
        let n = self.cache.entries.len();
        self.land_before_run(run, n);
    }

    /// [`InternalIterator::prev_run_first`] within this block. In a block
    /// that restarts at every prefix change: from the current entry, the
    /// first of its run, the run before it is the run of the previous
    /// restart key (every restart interval holds one run), and that run's
    /// first entry is the first restart point of the stretch of restart
    /// keys it covers; only restart keys are read. In any other block the
    /// entries before the current one are read from the interval cache
    /// (see [`Self::prev_run_first_by_entries`]). Moves only when it lands.
    pub(crate) fn prev_run_first_in_block(&mut self, run: &PrefixRun<'_>) -> PrevRun {
        if !self.valid() {
            return PrevRun::Unknown;
        }
        if !self.prefix_restarts {
            return self.prev_run_first_by_entries(run);
        }
        let r = self.restart_index;
        if self.restart_point(r) != Some(self.current) {
            // Not at a restart point: not the first entry of a run here.
            return PrevRun::Unknown;
        }
        if r == 0 {
            return PrevRun::BeforeBlock;
        }
        self.run_first_back_from(run, r - 1, Some(run), None)
    }

    /// For a block that restarts at every prefix change: the first entry
    /// of the run of restart key `ri` (a run by `like`'s extractor), found
    /// back from `ri`. `not` is a run that must not cover that key (the
    /// run after it); `expect`, one that must (else [`PrevRun::Outside`]).
    /// Moves only when it lands.
    fn run_first_back_from(
        &mut self,
        like: &PrefixRun<'_>,
        ri: u32,
        not: Option<&PrefixRun<'_>>,
        expect: Option<&PrefixRun<'_>>,
    ) -> PrevRun {
        let Some(range) = self.restart_key(ri) else {
            return PrevRun::Unknown; // malformed: the stepping path reports it
        };
        let key: SmallVec<[u8; KEY_INLINE_BYTES]> = SmallVec::from_slice(&self.data[range]);
        if not.is_some_and(|r| r.covers(&key)) {
            return PrevRun::Unknown;
        }
        if expect.is_some_and(|r| !r.covers(&key)) {
            return PrevRun::Outside;
        }
        let prev = like.of_internal_key(&key);
        if !prev.covers(&key) {
            // Too short for an internal key: the stepping path reports it.
            return PrevRun::Unknown;
        }
        let Some(first) = self.first_covered_restart_back(&prev, ri) else {
            return PrevRun::Unknown; // corruption, recorded
        };
        if first == 0 {
            return PrevRun::FromBlockStart(key);
        }
        if self.seek_to_restart(first) && self.parse_next() {
            PrevRun::Landed
        } else {
            PrevRun::Unknown // corruption, recorded
        }
    }

    /// The first entry of the run of the block's last entry, by `like`'s
    /// extractor (from restart keys where the block restarts at every
    /// prefix change, else from its decoded intervals); `not` and `expect`
    /// as for [`Self::run_first_back_from`].
    pub(crate) fn last_run_first_in_block(
        &mut self,
        like: &PrefixRun<'_>,
        not: Option<&PrefixRun<'_>>,
        expect: Option<&PrefixRun<'_>>,
    ) -> PrevRun {
        if self.status.is_err() || self.num_restarts == 0 || self.restarts_offset == 0 {
            return PrevRun::Unknown;
        }
        let r = self.num_restarts - 1;
        if self.prefix_restarts {
            return self.run_first_back_from(like, r, not, expect);
        }
        if !self.cache_interval(r) {
            return PrevRun::Unknown; // corruption, recorded
        }
        // A decoded interval holds at least one entry.
        let j = self.cache.entries.len() - 1;
        let key = &self.cache.keys[self.cache.entries[j].key.clone()];
        if not.is_some_and(|r| r.covers(key)) {
            return PrevRun::Unknown;
        }
        if expect.is_some_and(|r| !r.covers(key)) {
            return PrevRun::Outside;
        }
        self.run_first_back_in_cache(like, r, j)
    }

    /// [`Self::prev_run_first_in_block`] in a block that does not restart
    /// at every prefix change: the entry before the current one (the
    /// cache's entry before the one restored last, when the iterator is
    /// still there, as a backward step finds it) must lie outside `run`;
    /// the first entry of its run is then found back through the cached
    /// intervals.
    fn prev_run_first_by_entries(&mut self, run: &PrefixRun<'_>) -> PrevRun {
        let cur = self.current;
        let j = self.cache_pos;
        let (r, j) = match self.cache.interval {
            Some(r) if j > 0 && self.cache.entries.get(j).is_some_and(|e| e.current == cur) => {
                (r, j - 1)
            }
            _ => {
                // The interval holding the entry before `cur`.
                let r = self.restart_index;
                let r = match self.restart_point(r) {
                    Some(p) if p < cur => r,
                    Some(p) if p == cur && r > 0 => r - 1,
                    Some(p) if p == cur => return PrevRun::BeforeBlock,
                    _ => return PrevRun::Unknown, // the stepping path reports it
                };
                if !self.cache_interval(r) {
                    return PrevRun::Unknown; // corruption, recorded
                }
                let entries = &self.cache.entries;
                let j = entries.partition_point(|e| e.next < cur);
                if entries.get(j).is_none_or(|e| e.next != cur) {
                    return PrevRun::Unknown; // the stepping path reports it
                }
                (r, j)
            }
        };
        if self.run_covers(run, &self.cache.keys[self.cache.entries[j].key.clone()]) {
            // The current entry is not the first of its run here.
            return PrevRun::Unknown;
        }
        self.run_first_back_in_cache(run, r, j)
    }

    /// With interval `r` in the cache: the first entry of the run (by
    /// `like`'s extractor) of its entry `j`, found back through the
    /// entries before it, interval by interval. Moves only when it lands.
    fn run_first_back_in_cache(&mut self, like: &PrefixRun<'_>, r: u32, j: usize) -> PrevRun {
        // Within the interval, reading the cached keys in place.
        let before = {
            let key = &self.cache.keys[self.cache.entries[j].key.clone()];
            let prev = like.of_internal_key(key);
            if !prev.covers(key) {
                // Too short for an internal key: the stepping path reports it.
                return PrevRun::Unknown;
            }
            self.last_uncovered_cached(&prev, j)
        };
        if let Some(k) = before {
            self.restore_cached(k + 1);
            return PrevRun::Landed;
        }
        // The run holds the interval's first entry: on through the
        // intervals before, with a copy of the key (the cache is reused).
        let key: SmallVec<[u8; KEY_INLINE_BYTES]> =
            SmallVec::from_slice(&self.cache.keys[self.cache.entries[j].key.clone()]);
        let prev = like.of_internal_key(&key);
        let mut r = r;
        // Bounded by the block: each turn moves back an interval.
        loop {
            if r == 0 {
                return PrevRun::FromBlockStart(key);
            }
            if !self.cache_interval(r - 1) {
                return PrevRun::Unknown; // corruption, recorded
            }
            let n = self.cache.entries.len();
            match self.last_uncovered_cached(&prev, n) {
                // The run begins at restart point `r`.
                Some(k) if k + 1 == n => {
                    return if self.seek_to_restart(r) && self.parse_next() {
                        PrevRun::Landed
                    } else {
                        PrevRun::Unknown // corruption, recorded
                    };
                }
                Some(k) => {
                    self.restore_cached(k + 1);
                    return PrevRun::Landed;
                }
                None => r -= 1,
            }
        }
    }

    /// Positions at the last entry among the cached interval's first
    /// `end` that `run` does not cover (the run starts after it).
    fn land_before_run(&mut self, run: &PrefixRun<'_>, end: usize) {
        match self.last_uncovered_cached(run, end) {
            Some(k) => self.restore_cached(k),
            None => {
                let at = self.current;
                self.corrupt(at, "the restart key before a run is covered by it");
            }
        }
    }

    /// The last of the cached interval's first `end` entries that `run`
    /// does not cover, if any.
    fn last_uncovered_cached(&self, run: &PrefixRun<'_>, end: usize) -> Option<usize> {
        let cache = &self.cache;
        (0..end)
            .rev()
            .find(|&k| !self.run_covers(run, &cache.keys[cache.entries[k].key.clone()]))
    }

    /// Decodes restart interval `index` whole into the interval cache,
    /// unless it holds it already. False on corruption (recorded).
    fn cache_interval(&mut self, index: u32) -> bool {
        if self.cache.interval == Some(index) {
            return true;
        }
        if let KeyAt::Cache(r) = &self.key_at {
            // The current key lives in the cache about to be replaced.
            self.key_buf.set(&self.cache.keys[r.clone()]);
            self.key_at = KeyAt::Buf;
        }
        self.cache.interval = None;
        self.cache.entries.clear();
        self.cache.keys.clear();
        let end = if index + 1 < self.num_restarts {
            match self.restart_point(index + 1) {
                Some(p) => p,
                None => {
                    let at = self.restarts_offset + (index as usize + 1) * 4;
                    self.corrupt(at, "restart point outside the entries area");
                    return false;
                }
            }
        } else {
            self.restarts_offset
        };
        let Some(start) = self.restart_point(index) else {
            let at = self.restarts_offset + index as usize * 4;
            self.corrupt(at, "restart point outside the entries area");
            return false;
        };
        if start >= end {
            // Restart points increase strictly: every interval holds an
            // entry (callers take the last one).
            self.corrupt(start, "restart interval holds no entry");
            return false;
        }
        // Each key is the previous one's first `shared` bytes and its own
        // delta, built in place in the cache (the iterator does not move).
        let mut at = start;
        let mut prev_key = 0..0;
        // Bounded by the interval: each turn moves forward.
        while at < end {
            let Some(h) = self.decode_header(at) else {
                self.corrupt(at, "entry header or lengths run past the entries area");
                return false;
            };
            if h.shared > prev_key.len() || (at == start && h.shared != 0) {
                self.corrupt(at, "entry shares more bytes than the previous key has");
                return false;
            }
            let keys = &mut self.cache.keys;
            let key_start = keys.len();
            keys.extend_from_within(prev_key.start..prev_key.start + h.shared);
            keys.extend_from_slice(&self.data[h.key_start..h.key_start + h.non_shared]);
            let value_start = h.key_start + h.non_shared;
            let value_end = value_start + h.value_len;
            prev_key = key_start..keys.len();
            self.cache.entries.push(CachedEntry {
                current: at,
                next: value_end,
                value: value_start..value_end,
                key: prev_key.clone(),
            });
            at = value_end;
        }
        if at != end {
            self.corrupt(at, "restart interval ends inside an entry");
            return false;
        }
        self.cache.interval = Some(index);
        true
    }

    /// Positions at entry `i` of the interval cache.
    fn restore_cached(&mut self, i: usize) {
        self.cache_pos = i;
        let e = &self.cache.entries[i];
        self.current = e.current;
        self.next = e.next;
        self.value = e.value.clone();
        // Read in place: the cache keeps the interval until a backward
        // step or skip decodes another (which moves the key out first).
        self.key_at = KeyAt::Cache(e.key.clone());
        if let Some(interval) = self.cache.interval {
            self.restart_index = interval;
        }
    }

    /// In a block whose prefix changes are all restart points: the next
    /// run starts at the first restart key after the current entry that
    /// `run` does not cover.
    fn skip_to_next_run_restart(&mut self, run: &PrefixRun<'_>) {
        let Some(next) = self.first_uncovered_restart_after(run, self.restart_index) else {
            return;
        };
        if next == self.num_restarts {
            return self.invalidate();
        }
        if self.seek_to_restart(next) {
            self.parse_next();
        }
    }

    /// Whether `run` covers the key at restart point `index`; `None` on
    /// corruption (recorded).
    fn restart_covered(&mut self, run: &PrefixRun<'_>, index: u32) -> Option<bool> {
        match self.restart_key(index) {
            Some(r) => Some(self.run_covers(run, &self.data[r])),
            None => {
                let at = self.restart_point(index).unwrap_or(self.restarts_offset);
                self.corrupt(at, "restart entry is malformed or shares a prefix");
                None
            }
        }
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.current < self.restarts_offset && self.status.is_ok()
    }

    fn seek_to_first(&mut self) {
        if self.status.is_ok() && self.seek_to_restart(0) {
            self.parse_next();
        }
    }

    fn seek_to_last(&mut self) {
        if self.status.is_err() || !self.seek_to_restart(self.num_restarts - 1) {
            return;
        }
        while self.parse_next() && self.next < self.restarts_offset {}
    }

    fn seek(&mut self, target: &[u8]) {
        let target = self.seek_target(target);
        if let Some(index) = self.seek_start(target) {
            self.seek_from(target, index);
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.status.is_err() {
            return;
        }
        if !self.valid() {
            self.seek_to_last();
        }
        let target = self.seek_target(target);
        while self.valid() && self.compare(self.key(), target) == Ordering::Greater {
            self.prev();
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        self.parse_next();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        let original = self.current;
        // Still at the cached entry restored last (the cache holds one
        // interval of this block, so a matching offset is that entry):
        // the entry before it is the one before in the cache.
        let j = self.cache_pos;
        if j > 0
            && self.cache.interval.is_some()
            && self
                .cache
                .entries
                .get(j)
                .is_some_and(|e| e.current == original)
        {
            return self.restore_cached(j - 1);
        }
        // Find the restart interval that starts before the current entry.
        loop {
            match self.restart_point(self.restart_index) {
                Some(p) if p < original => break,
                Some(_) if self.restart_index == 0 => {
                    self.invalidate();
                    return;
                }
                Some(_) => self.restart_index -= 1,
                None => {
                    self.corrupt(original, "restart point outside the entries area");
                    return;
                }
            }
        }
        // The entry just before `original`, from the decoded interval.
        let interval = self.restart_index;
        if !self.cache_interval(interval) {
            return;
        }
        let entries = &self.cache.entries;
        let j = entries.partition_point(|e| e.next < original);
        if j < entries.len() && entries[j].next == original {
            self.restore_cached(j);
        } else {
            self.corrupt(original, "entries do not chain to the previous position");
        }
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid());
        match &self.key_at {
            KeyAt::Data(r) => &self.data[r.clone()],
            KeyAt::Cache(r) => &self.cache.keys[r.clone()],
            KeyAt::Buf => self.key_buf.as_slice(),
        }
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid());
        &self.data[self.value.clone()]
    }

    fn status(&self) -> Result<()> {
        self.status.clone()
    }

    fn skip_run_forward(&mut self, run: &PrefixRun<'_>) {
        self.skip_run_forward_in_block(run);
    }

    fn skip_run_backward(&mut self, run: &PrefixRun<'_>) {
        self.skip_run_backward_in_block(run);
    }
}
