//! The merging iterator: one sorted view over several sorted children
//! (memtables and tables), as LevelDB's `table/merger.cc`.
//!
//! A binary heap of child indices picks the current child: a min-heap while
//! moving forward, a max-heap while moving backward. Changing direction
//! repositions every other child around the current key, as LevelDB does, so
//! that `next` and `prev` can be mixed freely.
//!
//! Order of equal keys: internal keys are unique (sequence numbers are), so
//! equal keys in two children only happen in tests. They are ordered by child
//! index, lower index first: the merged order is the order of
//! `(key, child index, position in child)`, and a backward scan is the exact
//! reverse of a forward scan.
//!
//! Errors: after every child move, an invalid child is asked for its status.
//! The first error seen is kept for good (sticky) and makes the merging
//! iterator invalid: going on without a child would silently hide its
//! entries.
//!
//! Not thread-safe: one owner moves it (it is `Send`, not `Sync`).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::error::Result;
use crate::iter::{InternalIterator, PrefixRun, SeekReads};
use crate::key::Comparator;

/// Which way the children are positioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Every child not in the heap is exhausted; children in the heap are at
    /// entries at or after the current entry.
    Forward,
    /// As `Forward`, mirrored: children are at or before the current entry.
    Reverse,
}

/// A sorted view over the union of several sorted children.
///
/// Duplicates are not removed: every entry of every child is visited once.
/// See the module comment for the order of equal keys and for errors.
pub struct MergingIterator {
    cmp: Arc<dyn Comparator>,
    children: Vec<Box<dyn InternalIterator>>,
    /// Indices of the valid children; `heap[0]` is the current child.
    heap: Vec<usize>,
    direction: Direction,
    status: Result<()>,
    /// The current key, copied while the children turn around.
    turn_key: Vec<u8>,
    /// Children landed on a run's first entry (kept to reuse its memory).
    landed: Vec<usize>,
    /// The blocks a seek reads at once, before the children seek
    /// (`None`: they seek on their own; see [`MergingIterator::with_seek_reads`]).
    seek_reads: Option<SeekReads>,
}

impl fmt::Debug for MergingIterator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MergingIterator")
            .field("comparator", &self.cmp.name())
            .field("children", &self.children.len())
            .field("current", &self.heap.first())
            .field("direction", &self.direction)
            .field("status", &self.status)
            .finish()
    }
}

impl MergingIterator {
    /// With `on`, each seek first gathers the blocks its children are about
    /// to read from files read with direct I/O and reads them at once
    /// ([`SeekReads`]); for a database with `use_direct_reads`, where each
    /// of those reads waits on the device.
    pub(crate) fn with_seek_reads(mut self, on: bool) -> Self {
        self.seek_reads = on.then(SeekReads::default);
        self
    }

    /// With seek reads on, reads at once the blocks a seek to `target`
    /// (within `run`, for a prefix seek) is about to read in every child
    /// (see [`Self::with_seek_reads`]).
    fn read_seek_blocks(&mut self, target: &[u8], run: Option<&PrefixRun<'_>>) {
        if let Some(mut reads) = self.seek_reads.take() {
            match run {
                Some(run) => self.plan_seek_within(target, run, &mut reads),
                None => self.plan_seek(target, &mut reads),
            }
            reads.read_all();
            self.seek_reads = Some(reads);
        }
    }

    /// Merges `children`, each sorted by `cmp`. Starts unpositioned (invalid).
    pub fn new(cmp: Arc<dyn Comparator>, children: Vec<Box<dyn InternalIterator>>) -> Self {
        let heap = Vec::with_capacity(children.len());
        MergingIterator {
            cmp,
            children,
            heap,
            direction: Direction::Forward,
            status: Ok(()),
            turn_key: Vec::new(),
            landed: Vec::new(),
            seek_reads: None,
        }
    }

    /// The index of the child the iterator is positioned at (compaction
    /// tells newer inputs from older ones by it).
    pub(crate) fn current_child(&self) -> usize {
        self.current()
    }

    /// The child the iterator is positioned at.
    fn current(&self) -> usize {
        assert!(self.valid(), "MergingIterator used while invalid");
        self.heap[0]
    }

    /// Records the error of child `i` if it stopped because of one.
    fn check_child(&mut self, i: usize) {
        if self.status.is_ok() && !self.children[i].valid() {
            if let Err(e) = self.children[i].status() {
                self.status = Err(e);
            }
        }
    }

    /// Rebuilds the heap from every valid child, for `direction`.
    fn rebuild_heap(&mut self, direction: Direction) {
        self.direction = direction;
        self.heap.clear();
        for i in 0..self.children.len() {
            self.check_child(i);
            if self.children[i].valid() {
                self.heap.push(i);
            }
        }
        let order = HeapOrder {
            cmp: self.cmp.as_ref(),
            children: &self.children,
            direction,
        };
        for at in (0..self.heap.len() / 2).rev() {
            order.sift_down(&mut self.heap, at);
        }
    }

    /// After the current child moved: keeps it at the top or drops it.
    fn fix_top(&mut self) {
        let top = self.heap[0];
        if !self.children[top].valid() {
            self.check_child(top);
            self.heap.swap_remove(0);
        }
        if self.heap.len() < 2 {
            return; // a heap of one is in order
        }
        let order = HeapOrder {
            cmp: self.cmp.as_ref(),
            children: &self.children,
            direction: self.direction,
        };
        order.sift_down(&mut self.heap, 0);
    }

    /// Positions every child but the current one after the current entry,
    /// then makes the heap a min-heap. Children with a lower index come
    /// before the current one at an equal key, so they skip past it.
    ///
    /// A child still positioned from the backward scan is at its last
    /// entry before the current one (every backward move passes entries
    /// the current one is before), so one `next` puts it after; only
    /// children that ran off their start are sought.
    fn switch_to_forward(&mut self) {
        let current = self.current();
        let mut key = std::mem::take(&mut self.turn_key);
        key.clear();
        key.extend_from_slice(self.children[current].key());
        for i in 0..self.children.len() {
            if i == current {
                continue;
            }
            let child = &mut self.children[i];
            if child.valid() {
                let c = self.cmp.compare(child.key(), &key);
                debug_assert!(
                    c != Ordering::Greater,
                    "reverse child after the current key"
                );
                if c == Ordering::Less || i < current {
                    child.next();
                }
                continue;
            }
            if child.status().is_err() {
                continue;
            }
            child.seek(&key);
            if i < current {
                // Bounded by the child's length: each step moves forward.
                while child.valid() && self.cmp.compare(child.key(), &key) == Ordering::Equal {
                    child.next();
                }
            }
        }
        self.turn_key = key;
        self.rebuild_heap(Direction::Forward);
        debug_assert_eq!(self.heap.first(), Some(&current));
    }

    /// Mirror of [`Self::switch_to_forward`]: positions every other child
    /// before the current entry, then makes the heap a max-heap. A child
    /// still positioned from the forward scan is at its first entry after
    /// the current one, so one `prev` puts it before.
    fn switch_to_reverse(&mut self) {
        let current = self.current();
        let mut key = std::mem::take(&mut self.turn_key);
        key.clear();
        key.extend_from_slice(self.children[current].key());
        for i in 0..self.children.len() {
            if i == current {
                continue;
            }
            let child = &mut self.children[i];
            if child.valid() {
                debug_assert!(
                    self.cmp.compare(child.key(), &key).then(i.cmp(&current)) == Ordering::Greater,
                    "forward child before the current entry"
                );
                child.prev();
                continue;
            }
            if child.status().is_err() {
                continue;
            }
            if i < current {
                // Its entries equal to `key` come before the current one.
                child.seek_for_prev(&key);
            } else {
                // Its entries equal to `key` come after: step before them.
                child.seek(&key);
                if child.valid() {
                    child.prev();
                } else if child.status().is_ok() {
                    child.seek_to_last();
                }
            }
        }
        self.turn_key = key;
        self.rebuild_heap(Direction::Reverse);
        debug_assert_eq!(self.heap.first(), Some(&current));
    }
}

/// The heap order over child indices for one direction.
struct HeapOrder<'a> {
    cmp: &'a dyn Comparator,
    children: &'a [Box<dyn InternalIterator>],
    direction: Direction,
}

impl HeapOrder<'_> {
    /// True if child `a` must be visited before child `b`.
    fn before(&self, a: usize, b: usize) -> bool {
        let by_key = self
            .cmp
            .compare(self.children[a].key(), self.children[b].key())
            .then(a.cmp(&b));
        match self.direction {
            Direction::Forward => by_key == Ordering::Less,
            Direction::Reverse => by_key == Ordering::Greater,
        }
    }

    fn sift_down(&self, heap: &mut [usize], mut at: usize) {
        loop {
            let (left, right) = (2 * at + 1, 2 * at + 2);
            let mut first = at;
            if left < heap.len() && self.before(heap[left], heap[first]) {
                first = left;
            }
            if right < heap.len() && self.before(heap[right], heap[first]) {
                first = right;
            }
            if first == at {
                return;
            }
            heap.swap(at, first);
            at = first;
        }
    }
}

impl MergingIterator {
    /// Runs `f` on the one child in the heap (reverse, with the others
    /// holding nothing before the current entry), which moves without the
    /// others; a child left invalid (failed: its status says why) leaves
    /// the heap. `None` without a child.
    fn with_only_child<T>(&mut self, f: impl FnOnce(&mut dyn InternalIterator) -> T) -> Option<T> {
        let &top = self.heap.first()?;
        let out = f(self.children[top].as_mut());
        if !self.children[top].valid() {
            self.heap.clear();
        }
        Some(out)
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.status.is_ok() && !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        for child in &mut self.children {
            child.seek_to_first();
        }
        self.rebuild_heap(Direction::Forward);
    }

    fn seek_to_last(&mut self) {
        for child in &mut self.children {
            child.seek_to_last();
        }
        self.rebuild_heap(Direction::Reverse);
    }

    fn seek(&mut self, target: &[u8]) {
        self.read_seek_blocks(target, None);
        for child in &mut self.children {
            child.seek(target);
        }
        self.rebuild_heap(Direction::Forward);
    }

    fn plan_seek(&mut self, target: &[u8], reads: &mut SeekReads) {
        for child in &mut self.children {
            child.plan_seek(target, reads);
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // A child's `seek_for_prev` lands in the block its `seek` would,
        // unless `target` falls between two blocks (then the one before,
        // read on its own): the same blocks, read at once, serve it.
        self.read_seek_blocks(target, None);
        for child in &mut self.children {
            child.seek_for_prev(target);
        }
        self.rebuild_heap(Direction::Reverse);
    }

    fn next(&mut self) {
        let current = self.current();
        if self.direction != Direction::Forward {
            self.switch_to_forward();
            if !self.valid() {
                return;
            }
        }
        self.children[current].next();
        self.fix_top();
    }

    fn prev(&mut self) {
        let current = self.current();
        if self.direction != Direction::Reverse {
            self.switch_to_reverse();
            if !self.valid() {
                return;
            }
        }
        self.children[current].prev();
        self.fix_top();
    }

    fn key(&self) -> &[u8] {
        self.children[self.current()].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.current()].value()
    }

    fn plan_seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>, reads: &mut SeekReads) {
        for child in &mut self.children {
            child.plan_seek_within(target, run, reads);
        }
    }

    fn seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>) {
        self.read_seek_blocks(target, Some(run));
        for child in &mut self.children {
            child.seek_within(target, run);
        }
        self.rebuild_heap(Direction::Forward);
    }

    fn skip_run_forward(&mut self, run: &PrefixRun<'_>) {
        if !self.valid() {
            return;
        }
        if self.direction != Direction::Forward {
            self.switch_to_forward();
        }
        // Bounded: each turn moves one child past the run (children not in
        // the run are already past it, or are the new current child).
        while self.valid() {
            let top = self.heap[0];
            if !run.covers(self.children[top].key()) {
                return;
            }
            self.children[top].skip_run_forward(run);
            self.fix_top();
        }
    }

    fn skip_run_backward(&mut self, run: &PrefixRun<'_>) {
        if !self.valid() {
            return;
        }
        if self.direction != Direction::Reverse {
            self.switch_to_reverse();
        }
        while self.valid() {
            let top = self.heap[0];
            if !run.covers(self.children[top].key()) {
                return;
            }
            self.children[top].skip_run_backward(run);
            self.fix_top();
        }
    }

    fn skip_run_backward_to_first(&mut self, run: &PrefixRun<'_>) {
        debug_assert!(self.valid() && run.covers(self.key()));
        if self.direction != Direction::Reverse {
            self.switch_to_reverse();
        }
        // Every child is at its last entry at or before the current one: a
        // child there inside the run lands on its first run entry; any other
        // child holds no run entry before the current one.
        let mut landed = std::mem::take(&mut self.landed);
        landed.clear();
        for i in 0..self.children.len() {
            let child = &mut self.children[i];
            if child.valid() && run.covers(child.key()) {
                child.skip_run_backward_to_first(run);
                landed.push(i);
            }
        }
        // The smallest landed entry becomes current (equal keys: the lower
        // child index first, as in the merged order); every other landed
        // child steps back before the run, below it.
        let first = landed
            .iter()
            .copied()
            .filter(|&i| self.children[i].valid())
            .min_by(|&a, &b| {
                self.cmp
                    .compare(self.children[a].key(), self.children[b].key())
                    .then(a.cmp(&b))
            });
        for &i in &landed {
            if Some(i) != first && self.children[i].valid() {
                self.children[i].prev();
            }
        }
        self.landed = landed;
        self.rebuild_heap(Direction::Reverse);
    }

    fn prev_run_first(&mut self, run: &PrefixRun<'_>) -> bool {
        // With one child left in reverse, the others hold nothing before
        // the current entry: the step is that child's own.
        if self.direction != Direction::Reverse || self.heap.len() != 1 {
            return false;
        }
        self.with_only_child(|c| c.prev_run_first(run))
            .unwrap_or(false)
    }

    fn return_from_prev_run(&mut self, prev: &PrefixRun<'_>) {
        debug_assert!(self.direction == Direction::Reverse && self.heap.len() == 1);
        self.with_only_child(|c| c.return_from_prev_run(prev));
    }

    /// The first error met; else the first error of any child, by index.
    fn status(&self) -> Result<()> {
        self.status.clone()?;
        self.children.iter().try_for_each(|c| c.status())
    }
}

/// Test helpers shared with other modules' tests.
#[cfg(test)]
pub(crate) mod testutil {
    use std::cmp::Ordering;
    use std::sync::Arc;

    use crate::error::{Error, Result};
    use crate::iter::InternalIterator;
    use crate::key::Comparator;

    /// An [`InternalIterator`] over a Vec sorted by its comparator. With
    /// [`VecIter::failing_at`], landing on one entry fails instead (a corrupt
    /// block), and the error is sticky.
    #[derive(Debug)]
    pub(crate) struct VecIter {
        cmp: Arc<dyn Comparator>,
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        pos: Option<usize>,
        fail_at: Option<usize>,
        status: Result<()>,
    }

    impl VecIter {
        /// Iterates over `entries`; asserts they are sorted by `cmp`.
        pub(crate) fn new(cmp: Arc<dyn Comparator>, entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
            assert!(
                entries
                    .windows(2)
                    .all(|w| cmp.compare(&w[0].0, &w[1].0) != Ordering::Greater),
                "VecIter entries must be sorted"
            );
            VecIter {
                cmp,
                entries,
                pos: None,
                fail_at: None,
                status: Ok(()),
            }
        }

        /// Like [`VecIter::new`], but landing on entry `index` reports a
        /// corruption and makes the iterator invalid for good.
        pub(crate) fn failing_at(
            cmp: Arc<dyn Comparator>,
            entries: Vec<(Vec<u8>, Vec<u8>)>,
            index: usize,
        ) -> Self {
            VecIter {
                fail_at: Some(index),
                ..VecIter::new(cmp, entries)
            }
        }

        /// Boxes it, ready to be a child.
        pub(crate) fn boxed(self) -> Box<dyn InternalIterator> {
            Box::new(self)
        }

        fn land(&mut self, pos: Option<usize>) {
            if self.status.is_err() {
                self.pos = None;
                return;
            }
            let pos = pos.filter(|&p| p < self.entries.len());
            if pos.is_some() && pos == self.fail_at {
                self.status = Err(Error::corruption(
                    "vec",
                    pos.unwrap_or(0) as u64,
                    "injected",
                ));
                self.pos = None;
                return;
            }
            self.pos = pos;
        }

        fn at(&self) -> &(Vec<u8>, Vec<u8>) {
            &self.entries[self.pos.expect("VecIter used while invalid")]
        }
    }

    impl InternalIterator for VecIter {
        fn valid(&self) -> bool {
            self.pos.is_some()
        }
        fn seek_to_first(&mut self) {
            self.land(Some(0));
        }
        fn seek_to_last(&mut self) {
            self.land(self.entries.len().checked_sub(1));
        }
        fn seek(&mut self, target: &[u8]) {
            let cmp = &self.cmp;
            let p = self
                .entries
                .partition_point(|e| cmp.compare(&e.0, target) == Ordering::Less);
            self.land(Some(p));
        }
        fn seek_for_prev(&mut self, target: &[u8]) {
            let cmp = &self.cmp;
            let p = self
                .entries
                .partition_point(|e| cmp.compare(&e.0, target) != Ordering::Greater);
            self.land(p.checked_sub(1));
        }
        fn next(&mut self) {
            let p = self.pos.expect("next on an invalid VecIter");
            self.land(Some(p + 1));
        }
        fn prev(&mut self) {
            let p = self.pos.expect("prev on an invalid VecIter");
            self.land(p.checked_sub(1));
        }
        fn key(&self) -> &[u8] {
            &self.at().0
        }
        fn value(&self) -> &[u8] {
            &self.at().1
        }
        fn status(&self) -> Result<()> {
            self.status.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::testutil::VecIter;
    use super::*;
    use crate::key::{BytewiseComparator, ReverseBytewiseComparator};

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// Random children with keys from a small alphabet (so keys repeat
    /// across children), and the expected merge: ordered by
    /// (key, child index), as the module comment promises.
    fn random_children(rng: &mut StdRng, cmp: &Arc<dyn Comparator>) -> (Vec<Entries>, Entries) {
        let n_children = rng.gen_range(0..6);
        let mut children = Vec::new();
        let mut merged: Vec<(Vec<u8>, usize, Vec<u8>)> = Vec::new();
        for c in 0..n_children {
            let n = rng.gen_range(0..20);
            let mut keys: Vec<Vec<u8>> = (0..n)
                .map(|_| {
                    let len = rng.gen_range(0..3);
                    (0..len).map(|_| b'a' + rng.gen_range(0..4u8)).collect()
                })
                .collect();
            keys.sort_by(|a, b| cmp.compare(a, b));
            keys.dedup();
            let entries: Entries = keys
                .into_iter()
                .map(|k| {
                    let v = format!("{}@{c}", String::from_utf8_lossy(&k)).into_bytes();
                    (k, v)
                })
                .collect();
            merged.extend(entries.iter().map(|(k, v)| (k.clone(), c, v.clone())));
            children.push(entries);
        }
        merged.sort_by(|a, b| cmp.compare(&a.0, &b.0).then(a.1.cmp(&b.1)));
        let merged = merged.into_iter().map(|(k, _, v)| (k, v)).collect();
        (children, merged)
    }

    fn merging(cmp: &Arc<dyn Comparator>, children: &[Entries]) -> MergingIterator {
        let boxed = children
            .iter()
            .map(|c| VecIter::new(cmp.clone(), c.clone()).boxed())
            .collect();
        MergingIterator::new(cmp.clone(), boxed)
    }

    fn at(it: &MergingIterator) -> Option<(Vec<u8>, Vec<u8>)> {
        it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
    }

    fn random_key(rng: &mut StdRng) -> Vec<u8> {
        let len = rng.gen_range(0..4);
        (0..len).map(|_| b'a' + rng.gen_range(0..5u8)).collect()
    }

    fn check_seed(seed: u64, cmp: Arc<dyn Comparator>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let (children, want) = random_children(&mut rng, &cmp);
        let mut it = merging(&cmp, &children);

        let mut got = Vec::new();
        it.seek_to_first();
        while let Some(e) = at(&it) {
            got.push(e);
            it.next();
        }
        assert_eq!(got, want, "seed {seed}: forward");
        it.status().unwrap();

        got.clear();
        it.seek_to_last();
        while let Some(e) = at(&it) {
            got.push(e);
            it.prev();
        }
        got.reverse();
        assert_eq!(got, want, "seed {seed}: backward");

        // Seeks, then a random walk mixing next and prev.
        for _ in 0..20 {
            let target = random_key(&mut rng);
            let mut pos: Option<usize>;
            if rng.gen_bool(0.5) {
                it.seek(&target);
                let p = want.partition_point(|e| cmp.compare(&e.0, &target) == Ordering::Less);
                pos = (p < want.len()).then_some(p);
                assert_eq!(
                    at(&it),
                    pos.map(|p| want[p].clone()),
                    "seed {seed}: seek {target:?}"
                );
            } else {
                it.seek_for_prev(&target);
                let p = want.partition_point(|e| cmp.compare(&e.0, &target) != Ordering::Greater);
                pos = p.checked_sub(1);
                assert_eq!(
                    at(&it),
                    pos.map(|p| want[p].clone()),
                    "seed {seed}: seek_for_prev {target:?}"
                );
            }
            for step in 0..30 {
                let Some(p) = pos else { break };
                if rng.gen_bool(0.5) {
                    it.next();
                    pos = (p + 1 < want.len()).then_some(p + 1);
                } else {
                    it.prev();
                    pos = p.checked_sub(1);
                }
                assert_eq!(
                    at(&it),
                    pos.map(|p| want[p].clone()),
                    "seed {seed}: step {step} after seek {target:?}"
                );
            }
            it.status().unwrap();
        }
    }

    #[test]
    fn matches_sorted_merge_bytewise() {
        for seed in 0..300 {
            check_seed(seed, Arc::new(BytewiseComparator));
        }
    }

    #[test]
    fn matches_sorted_merge_reverse_comparator() {
        for seed in 1000..1200 {
            check_seed(seed, Arc::new(ReverseBytewiseComparator));
        }
    }

    #[test]
    fn equal_keys_order_by_child_index_both_ways() {
        let cmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let e = |k: &str, v: &str| (k.as_bytes().to_vec(), v.as_bytes().to_vec());
        let children = vec![
            vec![e("a", "0"), e("b", "0")],
            vec![e("b", "1")],
            vec![e("a", "2"), e("b", "2"), e("c", "2")],
        ];
        let mut it = merging(&cmp, &children);
        it.seek(b"b");
        assert_eq!(it.value(), b"0");
        it.next();
        assert_eq!(it.value(), b"1");
        it.prev();
        assert_eq!(it.value(), b"0");
        it.prev();
        assert_eq!((it.key(), it.value()), (&b"a"[..], &b"2"[..]));
        it.next();
        it.next();
        it.next();
        assert_eq!(it.value(), b"2");
        it.prev();
        assert_eq!(it.value(), b"1");
    }

    /// Landing on the first entry of a row's run, from anywhere in the row
    /// and from either direction: the merged order's first entry of the
    /// prefix, with `prev` and `next` going on from there.
    #[test]
    fn skip_run_backward_to_first_lands_on_the_runs_smallest_entry() {
        use crate::key::{
            extract_user_key, InternalKey, InternalKeyComparator, SliceTransform, ValueKind,
        };
        let user: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let cmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(user.clone()));
        let transform = SliceTransform::create_fixed_prefix(3);
        for seed in 0..200 {
            let mut rng = StdRng::seed_from_u64(seed);
            // Rows "r00".."r09", versions "v0".."v9", spread over children.
            let mut children: Vec<Entries> = vec![Vec::new(); rng.gen_range(1..5)];
            let mut seq = 1;
            for row in 0..10 {
                for ver in 0..10 {
                    if rng.gen_bool(0.4) {
                        let k = InternalKey::new(
                            format!("r{row:02}v{ver}").as_bytes(),
                            seq,
                            ValueKind::Value,
                        );
                        seq += 1;
                        let c = rng.gen_range(0..children.len());
                        children[c].push((k.encoded().to_vec(), vec![c as u8]));
                    }
                }
            }
            for c in &mut children {
                c.sort_by(|a, b| cmp.compare(&a.0, &b.0));
            }
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = children.iter().flatten().cloned().collect();
            want.sort_by(|a, b| cmp.compare(&a.0, &b.0));
            for _ in 0..20 {
                let Some(p) = (!want.is_empty()).then(|| rng.gen_range(0..want.len())) else {
                    break;
                };
                let mut it = merging(&cmp, &children);
                if rng.gen_bool(0.5) {
                    it.seek(&want[p].0);
                } else {
                    it.seek_for_prev(&want[p].0);
                }
                assert_eq!(at(&it), Some(want[p].clone()), "seed {seed}");
                let prefix = &extract_user_key(&want[p].0)[..3];
                let first = want
                    .iter()
                    .position(|(k, _)| extract_user_key(k).starts_with(prefix))
                    .unwrap();
                let run = PrefixRun::new(&transform, prefix, true, user.builtin_order());
                it.skip_run_backward_to_first(&run);
                assert_eq!(at(&it), Some(want[first].clone()), "seed {seed} landing");
                if rng.gen_bool(0.5) {
                    it.prev();
                    let before = first.checked_sub(1).map(|q| want[q].clone());
                    assert_eq!(at(&it), before, "seed {seed} prev");
                } else {
                    it.next();
                    assert_eq!(at(&it), want.get(first + 1).cloned(), "seed {seed} next");
                }
                it.status().unwrap();
            }
        }
    }

    #[test]
    fn empty_and_no_children() {
        let cmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let mut it = MergingIterator::new(cmp.clone(), Vec::new());
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_for_prev(b"x");
        assert!(!it.valid());
        let mut it = merging(&cmp, &[Vec::new(), Vec::new()]);
        it.seek_to_last();
        assert!(!it.valid());
        it.status().unwrap();
    }

    #[test]
    fn child_error_stops_iteration_and_is_reported() {
        let cmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let e = |k: &str| (k.as_bytes().to_vec(), Vec::new());
        let good = VecIter::new(cmp.clone(), vec![e("a"), e("c"), e("e"), e("g")]);
        let bad = VecIter::failing_at(cmp.clone(), vec![e("b"), e("d"), e("f")], 1);
        let mut it = MergingIterator::new(cmp.clone(), vec![good.boxed(), bad.boxed()]);
        let mut keys = Vec::new();
        it.seek_to_first();
        while it.valid() {
            keys.push(it.key().to_vec());
            it.next();
        }
        // Stepping the second child from "b" to "d" fails: the merge stops
        // there rather than go on without that child.
        assert_eq!(keys, vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(it.status().unwrap_err().is_corruption());
        // Sticky: seeking again does not hide the error.
        it.seek(b"a");
        assert!(!it.valid());
        assert!(it.status().is_err());

        // An error met while switching direction also stops the iterator.
        let good = VecIter::new(cmp.clone(), vec![e("a"), e("c"), e("e")]);
        let bad = VecIter::failing_at(cmp.clone(), vec![e("b"), e("d")], 0);
        let mut it = MergingIterator::new(cmp.clone(), vec![good.boxed(), bad.boxed()]);
        it.seek(b"c");
        assert!(it.valid());
        it.prev(); // repositions the failing child at "b"
        assert!(!it.valid());
        assert!(it.status().unwrap_err().is_corruption());
    }
}
