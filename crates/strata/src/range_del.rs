//! Range deletions: tombstones over half-open user-key ranges `[start, end)`,
//! and the fragmented form reads and compactions use.
//!
//! A tombstone with sequence number `t` deletes every entry of a key in its
//! range with a smaller sequence number, for readers at sequence `t` or
//! later. Tombstones overlap freely as written; [`FragmentedRangeTombstones`]
//! cuts them at every start and end into non-overlapping fragments, each
//! with the sequence numbers of the tombstones covering it (newest first),
//! so "the newest tombstone over this key visible at `s`" is a binary search
//! (RocksDB's `FragmentedRangeTombstoneList`). See docs/format/range_del.md.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, Comparator, InternalKey, SequenceNumber, ValueKind};
use crate::limits::KEY_SIZE_BYTES_MAX;
use crate::sst::block::{Block, BlockBuilder};

/// One range deletion as written: `[start, end)` at `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeTombstone {
    pub(crate) start: Vec<u8>,
    pub(crate) end: Vec<u8>,
    pub(crate) seq: SequenceNumber,
}

/// A piece of the key space covered by the same tombstones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fragment {
    pub(crate) start: Vec<u8>,
    pub(crate) end: Vec<u8>,
    /// The covering tombstones' sequence numbers, descending, no repeats.
    pub(crate) seqs: Vec<SequenceNumber>,
}

/// Tombstones cut into non-overlapping fragments, ascending by start.
pub(crate) struct FragmentedRangeTombstones {
    frags: Vec<Fragment>,
    ucmp: Arc<dyn Comparator>,
}

impl std::fmt::Debug for FragmentedRangeTombstones {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FragmentedRangeTombstones")
            .field("fragments", &self.frags.len())
            .finish()
    }
}

impl FragmentedRangeTombstones {
    /// Fragments `tombstones` (any order; empty ranges are ignored).
    pub(crate) fn new<'a>(
        tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
        ucmp: Arc<dyn Comparator>,
    ) -> FragmentedRangeTombstones {
        let c = &*ucmp;
        let mut ts: Vec<&RangeTombstone> = tombstones
            .into_iter()
            .filter(|t| c.compare(&t.start, &t.end) == Ordering::Less)
            .collect();
        ts.sort_by(|a, b| c.compare(&a.start, &b.start));
        let mut bounds: Vec<&[u8]> = ts
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        bounds.sort_by(|a, b| c.compare(a, b));
        bounds.dedup_by(|a, b| c.compare(a, b) == Ordering::Equal);
        let mut frags: Vec<Fragment> = Vec::new();
        // The tombstones covering the current piece: (end, seq).
        let mut active: Vec<(&[u8], SequenceNumber)> = Vec::new();
        let mut next = 0;
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            while next < ts.len() && c.compare(&ts[next].start, lo) != Ordering::Greater {
                active.push((&ts[next].end, ts[next].seq));
                next += 1;
            }
            active.retain(|(end, _)| c.compare(end, lo) == Ordering::Greater);
            if active.is_empty() {
                continue;
            }
            let mut seqs: Vec<SequenceNumber> = active.iter().map(|&(_, s)| s).collect();
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            // A piece continuing the last one with the same tombstones
            // joins it.
            if let Some(last) = frags.last_mut() {
                if last.seqs == seqs && c.compare(&last.end, lo) == Ordering::Equal {
                    last.end = hi.to_vec();
                    continue;
                }
            }
            frags.push(Fragment {
                start: lo.to_vec(),
                end: hi.to_vec(),
                seqs,
            });
        }
        let list = FragmentedRangeTombstones { frags, ucmp };
        list.debug_check();
        list
    }

    /// Invariants: every fragment non-empty with descending sequence
    /// numbers, fragments ascending and disjoint.
    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            let c = &*self.ucmp;
            for f in &self.frags {
                debug_assert_eq!(c.compare(&f.start, &f.end), Ordering::Less);
                debug_assert!(!f.seqs.is_empty() && f.seqs.windows(2).all(|w| w[0] > w[1]));
            }
            for w in self.frags.windows(2) {
                debug_assert_ne!(c.compare(&w[0].end, &w[1].start), Ordering::Greater);
            }
        }
    }

    /// True with no fragment.
    pub(crate) fn is_empty(&self) -> bool {
        self.frags.is_empty()
    }

    /// The fragments, ascending.
    pub(crate) fn fragments(&self) -> &[Fragment] {
        &self.frags
    }

    /// The index of the fragment covering `key`, if any.
    pub(crate) fn fragment_at(&self, key: &[u8]) -> Option<usize> {
        let c = &*self.ucmp;
        let i = self
            .frags
            .partition_point(|f| c.compare(&f.start, key) != Ordering::Greater);
        let i = i.checked_sub(1)?;
        (c.compare(key, &self.frags[i].end) == Ordering::Less).then_some(i)
    }

    /// The sequence number of the newest tombstone over `key` that a reader
    /// at `read_seq` sees; 0 if none. Entries of `key` older than it are
    /// deleted for that reader.
    pub(crate) fn max_covering(&self, key: &[u8], read_seq: SequenceNumber) -> SequenceNumber {
        match self.fragment_at(key) {
            Some(i) => newest_at_or_below(&self.frags[i].seqs, read_seq),
            None => 0,
        }
    }

    /// The tombstones as fragments, each sequence number its own entry
    /// (start, end, seq), in the range-deletion block's order.
    #[cfg(test)]
    pub(crate) fn to_tombstones(&self) -> Vec<RangeTombstone> {
        let mut out = Vec::new();
        for f in &self.frags {
            for &seq in &f.seqs {
                out.push(RangeTombstone {
                    start: f.start.clone(),
                    end: f.end.clone(),
                    seq,
                });
            }
        }
        out
    }
}

/// The first of `seqs` (descending) at or below `read_seq`; 0 if none.
pub(crate) fn newest_at_or_below(
    seqs: &[SequenceNumber],
    read_seq: SequenceNumber,
) -> SequenceNumber {
    let i = seqs.partition_point(|&s| s > read_seq);
    seqs.get(i).copied().unwrap_or(0)
}

/// The range deletions one read sees: the lists of its memtables and of its
/// version's tables. Empty for most reads, and then free.
#[derive(Debug, Default, Clone)]
pub(crate) struct RangeDelView {
    lists: Vec<Arc<FragmentedRangeTombstones>>,
}

impl RangeDelView {
    /// Adds a source's list (an empty one is left out).
    pub(crate) fn push(&mut self, list: Arc<FragmentedRangeTombstones>) {
        if !list.is_empty() {
            self.lists.push(list);
        }
    }

    /// True if no tombstone is in view.
    pub(crate) fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// See [`FragmentedRangeTombstones::max_covering`]: over every source.
    #[inline]
    pub(crate) fn max_covering(&self, key: &[u8], read_seq: SequenceNumber) -> SequenceNumber {
        self.lists
            .iter()
            .map(|l| l.max_covering(key, read_seq))
            .max()
            .unwrap_or(0)
    }

    /// A fragment over `key` holding a tombstone visible at `read_seq`, if
    /// any source has one.
    pub(crate) fn covering_fragment(
        &self,
        key: &[u8],
        read_seq: SequenceNumber,
    ) -> Option<&Fragment> {
        self.lists.iter().find_map(|l| {
            let f = &l.frags[l.fragment_at(key)?];
            (newest_at_or_below(&f.seqs, read_seq) > 0).then_some(f)
        })
    }

    /// True if a tombstone visible at `read_seq` deletes the entry of `key`
    /// with sequence number `seq`.
    #[inline]
    pub(crate) fn covers(&self, key: &[u8], seq: SequenceNumber, read_seq: SequenceNumber) -> bool {
        !self.lists.is_empty() && self.max_covering(key, read_seq) > seq
    }
}

/// The snapshot stripe of `seq` among `snapshots` (ascending): entries in
/// one stripe are seen by the same readers.
fn stripe(snapshots: &[SequenceNumber], seq: SequenceNumber) -> usize {
    snapshots.partition_point(|&s| s < seq)
}

/// What a flush or compaction keeps of its inputs' range deletions: per
/// fragment, only the newest sequence number of each snapshot stripe (an
/// older one in the same stripe deletes nothing the newer does not), and
/// none where `droppable` says no reader and no older data needs it.
pub(crate) fn compact_fragments(
    list: &FragmentedRangeTombstones,
    snapshots: &[SequenceNumber],
    mut droppable: impl FnMut(&Fragment, SequenceNumber) -> bool,
) -> Vec<Fragment> {
    let mut out = Vec::new();
    for f in list.fragments() {
        let mut seqs = Vec::new();
        let mut last_stripe = usize::MAX;
        for &seq in &f.seqs {
            let s = stripe(snapshots, seq);
            if s == last_stripe {
                continue;
            }
            last_stripe = s;
            if !droppable(f, seq) {
                seqs.push(seq);
            }
        }
        if !seqs.is_empty() {
            out.push(Fragment {
                start: f.start.clone(),
                end: f.end.clone(),
                seqs,
            });
        }
    }
    out
}

/// Implements [`InternalIterator`] for a wrapper with an `inner` iterator
/// and `skip_forward` / `skip_backward` methods that move past the entries
/// it hides: every positioning goes to `inner`, then skips.
macro_rules! skipping_iterator {
    ([$($generics:tt)*] $ty:ty) => {
        impl<$($generics)*> InternalIterator for $ty {
            fn valid(&self) -> bool {
                self.inner.valid()
            }
            fn seek_to_first(&mut self) {
                self.inner.seek_to_first();
                self.skip_forward();
            }
            fn seek_to_last(&mut self) {
                self.inner.seek_to_last();
                self.skip_backward();
            }
            fn seek(&mut self, target: &[u8]) {
                self.inner.seek(target);
                self.skip_forward();
            }
            fn plan_seek(&mut self, target: &[u8], reads: &mut $crate::iter::SeekReads) {
                self.inner.plan_seek(target, reads);
            }
            fn seek_for_prev(&mut self, target: &[u8]) {
                self.inner.seek_for_prev(target);
                self.skip_backward();
            }
            fn next(&mut self) {
                self.inner.next();
                self.skip_forward();
            }
            fn prev(&mut self) {
                self.inner.prev();
                self.skip_backward();
            }
            fn key(&self) -> &[u8] {
                self.inner.key()
            }
            fn value(&self) -> &[u8] {
                self.inner.value()
            }
            fn status(&self) -> Result<()> {
                self.inner.status()
            }
        }
    };
}

/// Hides the entries of `inner` that a range deletion among its own
/// deletes for every reader: an entry of sequence `e` under a tombstone
/// `t > e` in the same snapshot stripe (no snapshot sees the entry without
/// the tombstone). A flush or compaction reads its input through it, so
/// deleted entries are dropped and a merge never folds one in.
pub(crate) struct CoveredFilter<I> {
    inner: I,
    list: Option<Arc<FragmentedRangeTombstones>>,
    snapshots: Vec<SequenceNumber>,
}

impl<I: InternalIterator> CoveredFilter<I> {
    /// Filters `inner` by `list` (none: nothing is hidden).
    pub(crate) fn new(
        inner: I,
        list: Option<Arc<FragmentedRangeTombstones>>,
        snapshots: Vec<SequenceNumber>,
    ) -> Self {
        let list = list.filter(|l| !l.is_empty());
        CoveredFilter {
            inner,
            list,
            snapshots,
        }
    }

    /// The filtered iterator.
    pub(crate) fn inner(&self) -> &I {
        &self.inner
    }

    fn covered(&self) -> bool {
        let Some(list) = &self.list else {
            return false;
        };
        // A malformed key is left for the caller to report.
        let Some(p) = parse_internal_key(self.inner.key()) else {
            return false;
        };
        let Some(i) = list.fragment_at(p.user_key) else {
            return false;
        };
        let seqs = &list.fragments()[i].seqs;
        // The oldest tombstone newer than the entry: if it is in the
        // entry's stripe, every reader that sees the entry sees it.
        let newer = seqs.partition_point(|&s| s > p.sequence);
        newer > 0 && stripe(&self.snapshots, seqs[newer - 1]) == stripe(&self.snapshots, p.sequence)
    }

    fn skip_forward(&mut self) {
        while self.inner.valid() && self.covered() {
            self.inner.next();
        }
    }

    fn skip_backward(&mut self) {
        while self.inner.valid() && self.covered() {
            self.inner.prev();
        }
    }
}

skipping_iterator!([I: InternalIterator] CoveredFilter<I>);

/// True if every entry of a table with user keys in `[smallest, largest]`
/// and sequence numbers in `[smallest_seq, largest_seq]` lies under a newer
/// tombstone of `list` in its own snapshot stripe: a compaction may then
/// drop the table without reading it (Pebble's delete-only compaction).
/// The tombstones must cover the whole key range without a gap.
pub(crate) fn covers_table(
    list: &FragmentedRangeTombstones,
    snapshots: &[SequenceNumber],
    smallest: &[u8],
    largest: &[u8],
    (smallest_seq, largest_seq): (SequenceNumber, SequenceNumber),
) -> bool {
    let c = &*list.ucmp;
    let Some(mut i) = list.fragment_at(smallest) else {
        return false;
    };
    let stripe_of_entries = stripe(snapshots, smallest_seq);
    if stripe(snapshots, largest_seq) != stripe_of_entries {
        return false; // a snapshot between the table's own entries
    }
    loop {
        let f = &list.frags[i];
        // The oldest tombstone newer than every entry, in their stripe.
        let newer = f.seqs.partition_point(|&s| s > largest_seq);
        if newer == 0 || stripe(snapshots, f.seqs[newer - 1]) != stripe_of_entries {
            return false;
        }
        if c.compare(largest, &f.end) == Ordering::Less {
            return true;
        }
        match list.frags.get(i + 1) {
            Some(next) if c.compare(&next.start, &f.end) == Ordering::Equal => i += 1,
            _ => return false,
        }
    }
}

/// One source of a read (a memtable, a level-0 table, a level) seen
/// through the range deletions of the sources newer than it: a key under
/// one of them visible to the read has, in this source, only entries older
/// than that tombstone (newer sources hold newer versions of every key,
/// range deletions included), so the iterator seeks past the tombstone's
/// range instead of stepping over each deleted entry (RocksDB's and
/// Pebble's skipping of covered files and blocks). Entries a tombstone of
/// the same source covers are left to the reader's own check.
pub(crate) struct SkipCovered {
    inner: Box<dyn InternalIterator>,
    newer: RangeDelView,
    read_seq: SequenceNumber,
    seek_key: Vec<u8>,
}

impl SkipCovered {
    /// `inner` seen through `newer`, the fragmented range deletions of
    /// every newer source (each source's own list), for a read at
    /// `read_seq`.
    pub(crate) fn new(
        inner: Box<dyn InternalIterator>,
        newer: RangeDelView,
        read_seq: SequenceNumber,
    ) -> SkipCovered {
        SkipCovered {
            inner,
            newer,
            read_seq,
            seek_key: Vec::new(),
        }
    }

    /// The user key to seek to past the tombstone over the current entry
    /// that the read sees (its fragment's end, or its start backward), if
    /// there is one; written into `seek_key` as a key before every entry of
    /// that user key (largest sequence number, the kind that sorts first).
    fn covered_bound(&mut self, end: bool) -> bool {
        let Some(p) = parse_internal_key(self.inner.key()) else {
            return false;
        };
        let Some(f) = self.newer.covering_fragment(p.user_key, self.read_seq) else {
            return false;
        };
        let user_key = if end { &f.end } else { &f.start };
        crate::key::build_internal_key(
            &mut self.seek_key,
            user_key,
            crate::key::MAX_SEQUENCE_NUMBER,
            ValueKind::RangeDeletion,
        );
        true
    }

    fn skip_forward(&mut self) {
        // To the first entry at or after the fragment's end.
        while self.inner.valid() && self.covered_bound(true) {
            self.inner.seek(&self.seek_key);
        }
    }

    fn skip_backward(&mut self) {
        // To the last entry before the fragment's start.
        while self.inner.valid() && self.covered_bound(false) {
            self.inner.seek_for_prev(&self.seek_key);
        }
    }
}

skipping_iterator!([] SkipCovered);

/// An iterator over nothing: stands in for an input a compaction does not
/// read.
pub(crate) struct EmptyIterator;

impl InternalIterator for EmptyIterator {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _target: &[u8]) {}
    fn seek_for_prev(&mut self, _target: &[u8]) {}
    fn next(&mut self) {
        debug_assert!(false, "next on an empty iterator");
    }
    fn prev(&mut self) {
        debug_assert!(false, "prev on an empty iterator");
    }
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

/// Encodes tombstones as a range-deletion block: entries
/// `(start, seq, RangeDeletion) -> end` in internal-key order.
pub(crate) fn encode_block(tombstones: &[RangeTombstone]) -> Vec<u8> {
    let mut b = BlockBuilder::new(1);
    let mut key = Vec::new();
    for t in tombstones {
        crate::key::build_internal_key(&mut key, &t.start, t.seq, ValueKind::RangeDeletion);
        b.add(&key, &t.end);
    }
    b.finish().to_vec()
}

/// Decodes a range-deletion block (already checked against its checksum);
/// a malformed entry is `Corruption` naming `file` and `offset`.
pub(crate) fn decode_block(
    block: &Block,
    ucmp: &Arc<dyn Comparator>,
    file: &str,
    offset: u64,
) -> Result<Vec<RangeTombstone>> {
    let mut out = Vec::new();
    let mut it = block.iter(Arc::new(crate::key::InternalKeyComparator::new(
        ucmp.clone(),
    )));
    it.seek_to_first();
    while it.valid() {
        let p = parse_internal_key(it.key())
            .filter(|p| p.kind == ValueKind::RangeDeletion)
            .ok_or_else(|| {
                Error::corruption(file, offset, "range-deletion block holds a malformed key")
            })?;
        if p.user_key.len() > KEY_SIZE_BYTES_MAX || it.value().len() > KEY_SIZE_BYTES_MAX {
            return Err(Error::corruption(
                file,
                offset,
                "range-deletion block holds a bound over the key size limit",
            ));
        }
        if ucmp.compare(p.user_key, it.value()) != Ordering::Less {
            return Err(Error::corruption(
                file,
                offset,
                "range-deletion block holds a range whose end is not after its start",
            ));
        }
        out.push(RangeTombstone {
            start: p.user_key.to_vec(),
            end: it.value().to_vec(),
            seq: p.sequence,
        });
        it.next();
    }
    it.status()?;
    Ok(out)
}

/// The file bounds a table's tombstones need: the smallest start, at its
/// sequence number, and the largest end as an exclusive bound (sequence
/// [`MAX_SEQUENCE_NUMBER`](crate::key::MAX_SEQUENCE_NUMBER), kind
/// `RangeDeletion`: it sorts before every entry of that key).
pub(crate) fn bounds(
    tombstones: &[RangeTombstone],
    ucmp: &dyn Comparator,
) -> Option<(InternalKey, InternalKey)> {
    let first = tombstones.iter().min_by(|a, b| {
        ucmp.compare(&a.start, &b.start)
            .then_with(|| b.seq.cmp(&a.seq))
    })?;
    let last = tombstones
        .iter()
        .max_by(|a, b| ucmp.compare(&a.end, &b.end))?;
    Some((
        InternalKey::new(&first.start, first.seq, ValueKind::RangeDeletion),
        InternalKey::new(
            &last.end,
            crate::key::MAX_SEQUENCE_NUMBER,
            ValueKind::RangeDeletion,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{BytewiseComparator, ReverseBytewiseComparator};
    use rand::{Rng, SeedableRng};

    fn t(start: &[u8], end: &[u8], seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        }
    }

    #[test]
    fn overlapping_tombstones_fragment() {
        let ts = [t(b"a", b"e", 10), t(b"c", b"g", 20), t(b"x", b"x", 30)];
        let f = FragmentedRangeTombstones::new(&ts, Arc::new(BytewiseComparator));
        let got: Vec<_> = f
            .fragments()
            .iter()
            .map(|f| (f.start.clone(), f.end.clone(), f.seqs.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), b"c".to_vec(), vec![10]),
                (b"c".to_vec(), b"e".to_vec(), vec![20, 10]),
                (b"e".to_vec(), b"g".to_vec(), vec![20]),
            ]
        );
        assert_eq!(f.max_covering(b"b", 100), 10);
        assert_eq!(f.max_covering(b"d", 100), 20);
        assert_eq!(f.max_covering(b"d", 15), 10);
        assert_eq!(f.max_covering(b"d", 5), 0);
        assert_eq!(f.max_covering(b"g", 100), 0);
        assert_eq!(f.max_covering(b"x", 100), 0);
    }

    /// Against the definition, over random tombstones, both orders.
    #[test]
    fn max_covering_matches_brute_force() {
        let cmps: [Arc<dyn Comparator>; 2] = [
            Arc::new(BytewiseComparator),
            Arc::new(ReverseBytewiseComparator),
        ];
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for round in 0..300 {
            let c = cmps[round % 2].clone();
            let n = rng.gen_range(0..12);
            let ts: Vec<RangeTombstone> = (0..n)
                .map(|_| {
                    let a = vec![rng.gen_range(b'a'..b'k')];
                    let b = vec![rng.gen_range(b'a'..b'k')];
                    t(&a, &b, rng.gen_range(1..20))
                })
                .collect();
            let f = FragmentedRangeTombstones::new(&ts, c.clone());
            for k in b'a'..=b'k' {
                for read in 0..22 {
                    let want = ts
                        .iter()
                        .filter(|t| {
                            t.seq <= read
                                && c.compare(&t.start, &[k]) != Ordering::Greater
                                && c.compare(&[k], &t.end) == Ordering::Less
                        })
                        .map(|t| t.seq)
                        .max()
                        .unwrap_or(0);
                    assert_eq!(f.max_covering(&[k], read), want, "round {round}");
                }
            }
            // Re-fragmenting the fragments changes nothing.
            let again = FragmentedRangeTombstones::new(&f.to_tombstones(), c.clone());
            assert_eq!(again.fragments(), f.fragments());
        }
    }

    #[test]
    fn a_table_is_covered_only_by_newer_gapless_tombstones_of_its_stripe() {
        let c: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let ts = [t(b"a", b"f", 50), t(b"f", b"m", 60), t(b"p", b"z", 70)];
        let f = FragmentedRangeTombstones::new(&ts, c);
        // Inside one or two adjoining tombstones, all newer.
        assert!(covers_table(&f, &[], b"b", b"e", (1, 40)));
        assert!(covers_table(&f, &[], b"b", b"k", (1, 40)));
        // The end is exclusive; a gap between "m" and "p".
        assert!(!covers_table(&f, &[], b"b", b"m", (1, 40)));
        assert!(!covers_table(&f, &[], b"k", b"q", (1, 40)));
        // An entry as new as the tombstone, or newer.
        assert!(!covers_table(&f, &[], b"b", b"e", (1, 55)));
        // A snapshot between the entries and the tombstone sees them.
        assert!(!covers_table(&f, &[45], b"b", b"e", (1, 40)));
        assert!(covers_table(&f, &[45], b"q", b"r", (46, 60)));
        // Outside every tombstone.
        assert!(!covers_table(&f, &[], b"0", b"1", (1, 2)));
    }

    /// Counts the steps of an iterator.
    struct Counting {
        inner: crate::iter::merging::testutil::VecIter,
        steps: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl InternalIterator for Counting {
        fn valid(&self) -> bool {
            self.inner.valid()
        }
        fn seek_to_first(&mut self) {
            self.inner.seek_to_first()
        }
        fn seek_to_last(&mut self) {
            self.inner.seek_to_last()
        }
        fn seek(&mut self, t: &[u8]) {
            self.inner.seek(t)
        }
        fn seek_for_prev(&mut self, t: &[u8]) {
            self.inner.seek_for_prev(t)
        }
        fn next(&mut self) {
            self.steps
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.inner.next()
        }
        fn prev(&mut self) {
            self.steps
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.inner.prev()
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
        fn status(&self) -> Result<()> {
            self.inner.status()
        }
    }

    /// A newer source's visible tombstone makes an older source seek past
    /// its range, both ways; an invisible one changes nothing.
    #[test]
    fn older_sources_seek_past_newer_tombstones() {
        let user: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let icmp: Arc<dyn Comparator> =
            Arc::new(crate::key::InternalKeyComparator::new(user.clone()));
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (b'a'..=b'z')
            .map(|c| {
                let k = InternalKey::new(&[c], 5, ValueKind::Value);
                (k.encoded().to_vec(), vec![c])
            })
            .collect();
        let newer = Arc::new(FragmentedRangeTombstones::new(
            &[t(b"c", b"x", 10)],
            user.clone(),
        ));
        let run = |read_seq: u64, reverse: bool| -> (Vec<u8>, usize) {
            let steps = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let inner = Counting {
                inner: crate::iter::merging::testutil::VecIter::new(icmp.clone(), entries.clone()),
                steps: steps.clone(),
            };
            let mut view = RangeDelView::default();
            view.push(newer.clone());
            let mut it = SkipCovered::new(Box::new(inner), view, read_seq);
            let mut seen = Vec::new();
            if reverse {
                it.seek_to_last();
            } else {
                it.seek_to_first();
            }
            while it.valid() {
                seen.push(it.value()[0]);
                if reverse {
                    it.prev();
                } else {
                    it.next();
                }
            }
            if reverse {
                seen.reverse();
            }
            (seen, steps.load(std::sync::atomic::Ordering::Relaxed))
        };
        let (seen, steps) = run(20, false);
        assert_eq!(seen, b"abxyz");
        assert!(steps <= 6, "{steps} steps");
        let (seen, steps) = run(20, true);
        assert_eq!(seen, b"abxyz");
        assert!(steps <= 6, "{steps} steps");
        // The tombstone is newer than the read: everything is there.
        assert_eq!(run(9, false).0, (b'a'..=b'z').collect::<Vec<u8>>());
    }

    #[test]
    fn block_round_trip_and_corruption() {
        let c: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let ts = vec![t(b"a", b"c", 5), t(b"b", b"z", 3)];
        let bytes = encode_block(&ts);
        let block = Block::new(bytes::Bytes::from(bytes), "t".into(), 0).unwrap();
        assert_eq!(decode_block(&block, &c, "t", 0).unwrap(), ts);
        // An end before its start is corruption.
        let bad = encode_block(&[t(b"m", b"a", 1)]);
        let block = Block::new(bytes::Bytes::from(bad), "t".into(), 0).unwrap();
        assert!(matches!(
            decode_block(&block, &c, "t", 7),
            Err(Error::Corruption { .. })
        ));
    }
}
