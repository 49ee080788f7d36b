//! The user-facing iterator: turns the internal entries of a merged view
//! (memtables and tables, several versions per user key) into the user keys
//! and values visible at one sequence number, as LevelDB's `db/db_iter.cc`.
//!
//! Invariants, per direction (as in LevelDB):
//! - Forward: the inner iterator is at the entry that yields the current
//!   user key and value; `saved_key` is scratch (the key being skipped).
//! - Reverse: the inner iterator is just before every entry of the current
//!   user key (at the last entry of a smaller key, or invalid), and the
//!   current key and value are copied into `saved_key` and `saved_value`.
//!
//! `prev_prefix` ends forward: the row it lands on is the first entry of
//! its prefix run, its key's newest entry and a visible value, so the
//! inner iterator stays there (`at_first`), and the next `prev_prefix`
//! steps straight to the run before from there.
//!
//! Bounds are those of RocksDB's `iterate_lower_bound` (inclusive) and
//! `iterate_upper_bound` (exclusive): seeks clamp to them and iteration
//! stops at them.
//!
//! Errors: a malformed internal key stops the iterator with a Corruption
//! status; an error of the inner iterator stops it too and is reported by
//! [`DBIter::status`]. Not thread-safe: one owner moves it.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::{InternalIterator, PrefixRun};
use crate::key::{
    build_internal_key, extract_user_key, parse_entry_key, BuiltinOrder, Comparator,
    ParsedInternalKey, SequenceNumber, SliceTransform, ValueKind, MAX_SEQUENCE_NUMBER,
};

use super::merge_operator::{self, MergeOperands, MergeOperator};
use crate::range_del::RangeDelView;
use crate::util::key_buf::KeyBuf;

/// A saved value buffer larger than this (beyond the value it holds) is
/// released rather than kept, so one huge value does not pin its memory.
const SAVED_VALUE_SLACK_BYTES_MAX: usize = 1 << 20;

/// Longest key prefix quoted in a corruption message.
const QUOTED_KEY_BYTES_MAX: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Iterates over the user keys and values visible at one sequence number,
/// within optional bounds: the newest visible version of each user key, with
/// deleted keys left out. Moves both ways.
pub struct DBIter {
    inner: Box<dyn InternalIterator>,
    user_cmp: Arc<dyn Comparator>,
    /// `user_cmp`'s built-in order, if it has one (asked once).
    order: Option<BuiltinOrder>,
    sequence: SequenceNumber,
    lower_bound: Option<Vec<u8>>,
    upper_bound: Option<Vec<u8>>,
    direction: Direction,
    /// Forward, and the current entry is the first entry of its prefix
    /// run (`prev_prefix` took it): the next `prev_prefix` may step
    /// straight to the run before. Any other move clears it.
    at_first: bool,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    /// Scratch buffer for the internal keys built by seeks.
    seek_key: Vec<u8>,
    /// The extractor of the prefix steps; `None` makes them fail. A step
    /// takes it out while it runs (no reference count changes per step).
    prefix_extractor: Option<Arc<SliceTransform>>,
    /// The same extractor, for the confinement check, which runs during
    /// steps too (while the step holds `prefix_extractor`).
    confine_extractor: Option<Arc<SliceTransform>>,
    /// The bytes of the run a prefix step passes.
    run_bytes: KeyBuf,
    /// Seeks confine the iterator to their target's prefix.
    prefix_same_as_start: bool,
    /// The prefix the last seek confined the iterator to.
    confined: Option<Vec<u8>>,
    status: Result<()>,
    /// Combines the operands of keys whose newest visible version is a
    /// merge operand.
    merge_operator: Option<Arc<MergeOperator>>,
    /// Forward, at a key whose value was merged: the key and the merged
    /// value are in `saved_key` and `saved_value`, and the inner iterator
    /// is (as for any forward position) at the key's newest visible entry.
    merged: bool,
    /// Scratch for the operands of one key.
    operands: MergeOperands,
    /// The range deletions in view: an entry under a newer one visible
    /// at `sequence` reads as a deletion.
    range_dels: RangeDelView,
}

impl fmt::Debug for DBIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DBIter")
            .field("comparator", &self.user_cmp.name())
            .field("sequence", &self.sequence)
            .field(
                "lower_bound",
                &self.lower_bound.as_deref().map(<[u8]>::escape_ascii),
            )
            .field(
                "upper_bound",
                &self.upper_bound.as_deref().map(<[u8]>::escape_ascii),
            )
            .field("direction", &self.direction)
            .field("valid", &self.valid)
            .field("status", &self.status)
            .finish()
    }
}

fn parse(ikey: &[u8]) -> Result<ParsedInternalKey<'_>> {
    parse_entry_key(ikey).ok_or_else(|| {
        let shown = &ikey[..ikey.len().min(QUOTED_KEY_BYTES_MAX)];
        Error::corruption(
            "(db iterator)",
            0,
            format!(
                "malformed internal key of {} bytes: \"{}\"",
                ikey.len(),
                shown.escape_ascii()
            ),
        )
    })
}

/// True if `user_key` is at or past the exclusive upper bound.
fn past_upper(cmp: &dyn Comparator, upper: Option<&[u8]>, user_key: &[u8]) -> bool {
    upper.is_some_and(|u| cmp.compare(user_key, u) != Ordering::Less)
}

/// True if `user_key` is below the inclusive lower bound.
fn below_lower(cmp: &dyn Comparator, lower: Option<&[u8]>, user_key: &[u8]) -> bool {
    lower.is_some_and(|l| cmp.compare(user_key, l) == Ordering::Less)
}

impl DBIter {
    /// Wraps `inner`, an iterator over internal keys in internal-key order
    /// (by `user_cmp`, newest first). Shows what was visible at `sequence`,
    /// limited to `lower_bound <= key < upper_bound`. Starts unpositioned.
    /// Panics if `sequence` exceeds [`MAX_SEQUENCE_NUMBER`].
    pub fn new(
        inner: Box<dyn InternalIterator>,
        user_cmp: Arc<dyn Comparator>,
        sequence: SequenceNumber,
        lower_bound: Option<Vec<u8>>,
        upper_bound: Option<Vec<u8>>,
    ) -> Self {
        assert!(
            sequence <= MAX_SEQUENCE_NUMBER,
            "sequence {sequence} exceeds 56 bits"
        );
        DBIter {
            inner,
            order: user_cmp.builtin_order(),
            user_cmp,
            sequence,
            lower_bound,
            upper_bound,
            direction: Direction::Forward,
            at_first: false,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            seek_key: Vec::new(),
            prefix_extractor: None,
            confine_extractor: None,
            run_bytes: KeyBuf::default(),
            prefix_same_as_start: false,
            confined: None,
            status: Ok(()),
            merge_operator: None,
            merged: false,
            operands: MergeOperands::default(),
            range_dels: RangeDelView::default(),
        }
    }

    /// Sets the range deletions the iterator respects.
    pub(crate) fn with_range_deletions(mut self, view: RangeDelView) -> Self {
        self.range_dels = view;
        self
    }

    /// The kind an entry reads as: a deletion if a range deletion visible
    /// at the iterator's sequence number covers it.
    #[inline]
    fn kind_of(&self, ikey: &ParsedInternalKey<'_>) -> ValueKind {
        match ikey.kind {
            ValueKind::RangeDeletion => ValueKind::Deletion,
            _ if self
                .range_dels
                .covers(ikey.user_key, ikey.sequence, self.sequence) =>
            {
                ValueKind::Deletion
            }
            kind => kind,
        }
    }

    /// Sets the merge operator that resolves merge operands.
    pub(crate) fn with_merge_operator(mut self, op: Option<Arc<MergeOperator>>) -> Self {
        self.merge_operator = op;
        self
    }

    /// After a seek to a key in the extractor's domain, yield only keys of
    /// its prefix, and let tables whose filter rules it out be skipped
    /// (`ReadOptions::set_prefix_same_as_start`).
    pub fn with_prefix_same_as_start(mut self, v: bool) -> Self {
        self.prefix_same_as_start = v;
        self
    }

    /// Sets the prefix extractor of [`DBIter::next_prefix`] and
    /// [`DBIter::prev_prefix`].
    pub fn with_prefix_extractor(mut self, extractor: Option<Arc<SliceTransform>>) -> Self {
        self.confine_extractor = extractor.clone();
        self.prefix_extractor = extractor;
        self
    }

    /// True while positioned at a visible entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key. Panics if not [`DBIter::valid`].
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "DBIter::key while invalid");
        match self.direction {
            Direction::Forward if !self.merged => extract_user_key(self.inner.key()),
            _ => &self.saved_key,
        }
    }

    /// The current value. Panics if not [`DBIter::valid`].
    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "DBIter::value while invalid");
        match self.direction {
            Direction::Forward if !self.merged => self.inner.value(),
            _ => &self.saved_value,
        }
    }

    /// The first error met (a malformed key, or the inner iterator's error).
    pub fn status(&self) -> Result<()> {
        self.status.clone()?;
        self.inner.status()
    }

    /// Positions at the first visible key (at or after the lower bound).
    pub fn seek_to_first(&mut self) {
        self.confined = None;
        self.start(Direction::Forward);
        if self.lower_bound.is_some() {
            self.seek_inner_to_lower();
        } else {
            self.inner.seek_to_first();
        }
        self.find_next_user_entry(false);
    }

    /// Positions at the last visible key (before the upper bound).
    pub fn seek_to_last(&mut self) {
        self.confined = None;
        self.last_entry();
    }

    fn last_entry(&mut self) {
        self.start(Direction::Reverse);
        match &self.upper_bound {
            Some(upper) => {
                // The first internal key of `upper`: what precedes it is < upper.
                build_internal_key(
                    &mut self.seek_key,
                    upper,
                    MAX_SEQUENCE_NUMBER,
                    ValueKind::FOR_SEEK,
                );
                self.inner.seek_for_prev(&self.seek_key);
            }
            None => self.inner.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Positions at the first visible key >= `target` (and >= the lower bound).
    pub fn seek(&mut self, target: &[u8]) {
        self.confine_to(target);
        self.start(Direction::Forward);
        let target = match &self.lower_bound {
            Some(lower) if below_lower(self.user_cmp.as_ref(), Some(lower), target) => {
                lower.as_slice()
            }
            _ => target,
        };
        // Entries of `target` newer than the snapshot sort before this key.
        build_internal_key(
            &mut self.seek_key,
            target,
            self.sequence,
            ValueKind::FOR_SEEK,
        );
        match (&self.confined, &self.prefix_extractor) {
            (Some(prefix), Some(t)) => {
                let run = PrefixRun::new(t, prefix, true, self.order);
                self.inner.seek_within(&self.seek_key, &run);
            }
            _ => self.inner.seek(&self.seek_key),
        }
        self.find_next_user_entry(false);
    }

    /// With `prefix_same_as_start`, confines the iterator to `target`'s
    /// prefix (none when it is outside the extractor's domain).
    fn confine_to(&mut self, target: &[u8]) {
        let prefix = match &self.prefix_extractor {
            Some(t) if self.prefix_same_as_start => t.prefix(target),
            _ => None,
        };
        match prefix {
            Some(p) => {
                let buf = self.confined.get_or_insert_with(Vec::new);
                buf.clear();
                buf.extend_from_slice(p);
            }
            None => self.confined = None,
        }
    }

    /// True if the iterator is confined to a prefix `user_key` lacks.
    #[inline]
    fn outside_confinement(&self, user_key: &[u8]) -> bool {
        match (&self.confined, &self.confine_extractor) {
            (Some(p), Some(t)) => t.prefix(user_key) != Some(p.as_slice()),
            _ => false,
        }
    }

    /// Positions at the last visible key <= `target` (and < the upper bound).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.confine_to(target);
        if past_upper(self.user_cmp.as_ref(), self.upper_bound.as_deref(), target) {
            return self.last_entry();
        }
        self.start(Direction::Reverse);
        // The last internal key of `target`: sequence 0 and the smallest kind.
        build_internal_key(&mut self.seek_key, target, 0, ValueKind::Deletion);
        self.inner.seek_for_prev(&self.seek_key);
        self.find_prev_user_entry();
    }

    /// Moves to the next visible key. Panics if not [`DBIter::valid`].
    pub fn next(&mut self) {
        assert!(self.valid, "DBIter::next while invalid");
        self.merged = false;
        self.at_first = false;
        if self.direction == Direction::Reverse {
            // The inner iterator is just before the entries of `saved_key`:
            // step into them and skip them below.
            self.direction = Direction::Forward;
            self.step_in_forward();
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(extract_user_key(self.inner.key()));
            self.inner.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous visible key. Panics if not [`DBIter::valid`].
    pub fn prev(&mut self) {
        assert!(self.valid, "DBIter::prev while invalid");
        self.merged = false;
        self.at_first = false;
        if self.direction == Direction::Forward {
            // The inner iterator is at the current entry: step back past
            // every entry of the current user key.
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(extract_user_key(self.inner.key()));
            loop {
                self.inner.prev();
                if !self.inner.valid() {
                    return self.stop();
                }
                let ikey = match parse(self.inner.key()) {
                    Ok(ikey) => ikey,
                    Err(e) => return self.fail(e),
                };
                if self.user_cmp.compare(ikey.user_key, &self.saved_key) == Ordering::Less {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }

    /// Backward to forward: from just before some entries (or off the
    /// start), steps onto the first of them.
    fn step_in_forward(&mut self) {
        if self.inner.valid() {
            self.inner.next();
        } else if self.lower_bound.is_some() {
            self.seek_inner_to_lower();
        } else {
            self.inner.seek_to_first();
        }
    }

    /// Positions the inner iterator at the first entry at or after the
    /// lower bound (which must be set) visible to this reader.
    fn seek_inner_to_lower(&mut self) {
        if let Some(lower) = &self.lower_bound {
            build_internal_key(
                &mut self.seek_key,
                lower,
                self.sequence,
                ValueKind::FOR_SEEK,
            );
            self.inner.seek(&self.seek_key);
        }
    }

    /// Takes the extractor out for a prefix step (the caller puts it back),
    /// or fails the step without one. Taking it, rather than cloning the
    /// `Arc` the database's other iterators share, keeps steps from
    /// touching a reference count other threads touch too.
    fn take_extractor(&mut self, step: &str) -> Option<Arc<SliceTransform>> {
        if self.prefix_extractor.is_none() {
            self.fail(Error::invalid_argument(format!(
                "{step} needs a prefix extractor (Options::set_prefix_extractor)"
            )));
        }
        self.prefix_extractor.take()
    }

    /// Sets `run_bytes` to the run of `user_key`; returns whether the key
    /// is in the extractor's domain.
    fn set_run(&mut self, transform: &SliceTransform, user_key_from_saved: bool) -> bool {
        // `key` holds the user key and, from the inner iterator, its
        // trailer: room for a whole-chunk copy of a prefix at its start.
        let (key, user_key): (&[u8], &[u8]) = if user_key_from_saved {
            (&self.saved_key, &self.saved_key)
        } else {
            let ikey = self.inner.key();
            (ikey, extract_user_key(ikey))
        };
        let (bytes, in_domain) = PrefixRun::bytes_of(transform, user_key);
        if bytes.as_ptr() == key.as_ptr() {
            self.run_bytes.clear();
            self.run_bytes.append(key, 0, bytes.len());
        } else {
            self.run_bytes.set(bytes);
        }
        in_domain
    }

    /// Moves to the first visible entry (in key order) after the current
    /// key whose prefix differs from the current key's: with keys made of
    /// a row and a descending version, the newest version of the next row.
    /// Without a prefix extractor the iterator stops with `InvalidArgument`.
    /// Panics if not [`DBIter::valid`].
    ///
    /// Keys of one prefix must be adjacent in key order (as they are for a
    /// fixed-length extractor, or rows of one length followed by a
    /// version); a key outside the extractor's domain is a prefix of its
    /// own. Entries of the current prefix are passed without being looked
    /// at one by one where the extractor has a fixed length and the
    /// comparator is a built-in one (see [`PrefixRun`]).
    pub fn next_prefix(&mut self) {
        assert!(self.valid, "DBIter::next_prefix while invalid");
        self.merged = false;
        self.at_first = false;
        let Some(transform) = self.take_extractor("next_prefix") else {
            return;
        };
        self.next_prefix_with(&transform);
        self.prefix_extractor = Some(transform);
    }

    fn next_prefix_with(&mut self, transform: &SliceTransform) {
        let in_domain = self.set_run(transform, self.direction == Direction::Reverse);
        if self.direction == Direction::Reverse {
            // The inner iterator is before the current key's entries, with
            // only entries hidden from this reader in between: step over
            // those to the current key.
            self.direction = Direction::Forward;
            self.step_in_forward();
            // Bounded by the hidden entries: each turn moves forward.
            while self.inner.valid()
                && self
                    .user_cmp
                    .compare(extract_user_key(self.inner.key()), &self.saved_key)
                    == Ordering::Less
            {
                self.inner.next();
            }
        }
        let order = self.order;
        let run = PrefixRun::new(transform, self.run_bytes.as_slice(), in_domain, order);
        // A run of one entry (a row of one version) costs a `next`: try
        // that before the skip.
        if self.inner.valid() {
            self.inner.next();
            if self.inner.valid() {
                let key = self.inner.key();
                if run.covers(key) {
                    self.inner.skip_run_forward(&run);
                } else if parse_entry_key(key).is_some_and(|k| self.stops_at_value(&k)) {
                    // The usual case of a row of one version: the entry
                    // after it is the answer (as `find_next_user_entry`
                    // would find, without fetching the key again).
                    self.saved_key.clear();
                    self.clear_saved_value();
                    self.valid = true;
                    return;
                }
            }
        }
        self.saved_key.clear();
        self.clear_saved_value();
        self.find_next_user_entry(false);
    }

    /// Moves to the first visible entry (in key order) of the prefix before
    /// the current key's: with keys made of a row and a descending version,
    /// the newest version of the previous row. The rules of
    /// [`DBIter::next_prefix`] apply. Panics if not [`DBIter::valid`].
    pub fn prev_prefix(&mut self) {
        assert!(self.valid, "DBIter::prev_prefix while invalid");
        self.merged = false;
        let Some(transform) = self.take_extractor("prev_prefix") else {
            return;
        };
        if self.confined.is_some() {
            // Confined to the current key's prefix: nothing before it counts.
            self.stop();
        } else if !(self.at_first && self.prev_prefix_from_first(&transform)) {
            self.at_first = false;
            self.prev_prefix_by_keys(&transform);
        }
        self.prefix_extractor = Some(transform);
    }

    /// [`DBIter::prev_prefix`] from `at_first`: the inner iterator moves
    /// straight to the first entry of the run before the current one
    /// ([`InternalIterator::prev_run_first`]); when that entry is this
    /// reader's answer, it is taken. True when done (or failed); false,
    /// with the inner iterator back at the current entry, for the general
    /// path.
    fn prev_prefix_from_first(&mut self, transform: &SliceTransform) -> bool {
        debug_assert_eq!(self.direction, Direction::Forward);
        let order = self.order;
        let in_domain = self.set_run(transform, false);
        let run = PrefixRun::new(transform, self.run_bytes.as_slice(), in_domain, order);
        if !self.inner.prev_run_first(&run) {
            if let Err(e) = self.inner.status() {
                self.fail(e);
                return true;
            }
            return false;
        }
        if self.take_first_of_run() {
            return true;
        }
        // A deletion, a newer version or a bound: forward past that run,
        // back to the current entry, for the general path.
        let in_domain = self.set_run(transform, false);
        let landed = PrefixRun::new(transform, self.run_bytes.as_slice(), in_domain, order);
        self.inner.return_from_prev_run(&landed);
        if let Err(e) = self.inner.status() {
            self.fail(e);
            return true;
        }
        debug_assert!(
            self.inner.valid() && !landed.covers(self.inner.key()),
            "returning from the run before missed the current entry"
        );
        false
    }

    /// [`DBIter::prev_prefix`]: back past the current prefix, then to the
    /// previous visible key (passing prefixes without one), then to the
    /// first visible entry of that key's prefix.
    fn prev_prefix_by_keys(&mut self, transform: &SliceTransform) {
        let order = self.order;
        let forward = self.direction == Direction::Forward;
        let in_domain = self.set_run(transform, !forward);
        // Back before every entry of the current prefix. Going forward the
        // inner iterator is at the current entry: a run of one entry (a row
        // of one version) costs a `prev`, so try that before the skip.
        self.direction = Direction::Reverse;
        let run = PrefixRun::new(transform, self.run_bytes.as_slice(), in_domain, order);
        if forward && self.inner.valid() {
            self.inner.prev();
        }
        if self.inner.valid() && run.covers(self.inner.key()) {
            self.inner.skip_run_backward(&run);
        }
        if self.inner.valid() && self.take_first_of_run_before(transform) {
            return;
        }
        // The last visible key before them names the previous prefix.
        self.saved_key.clear();
        self.clear_saved_value();
        self.find_prev_user_entry();
        if !self.valid {
            return;
        }
        // Back to the first entry of that prefix: its first visible entry
        // is the key just found, or a smaller one. The inner iterator is
        // before the found key's entries, with only entries hidden from
        // this reader in between: when it is outside the prefix, the found
        // key is the prefix's first visible entry.
        let in_domain = self.set_run(transform, true);
        let run = PrefixRun::new(transform, self.run_bytes.as_slice(), in_domain, order);
        if !self.inner.valid() || !run.covers(self.inner.key()) {
            return;
        }
        // Land on the prefix's first entry without turning the inner
        // iterator around; when that entry is visible to this reader (the
        // newest version of the smallest key, not a deletion), it is the
        // answer, and one `prev` restores the reverse position.
        self.inner.skip_run_backward_to_first(&run);
        if let Err(e) = self.inner.status() {
            return self.fail(e);
        }
        // Without an error the landing is always inside the run (the inner
        // iterator was at an entry of it).
        let covered = self.inner.valid() && run.covers(self.inner.key());
        debug_assert!(covered, "landing on a run's first entry left the run");
        if covered && self.take_first_of_run() {
            return;
        }
        // Otherwise (a deletion, a newer version, a bound): back before the
        // prefix, then forward to its first visible entry.
        let run = PrefixRun::new(transform, self.run_bytes.as_slice(), in_domain, order);
        self.inner.skip_run_backward(&run);
        if let Err(e) = self.inner.status() {
            return self.fail(e);
        }
        self.valid = false;
        self.direction = Direction::Forward;
        self.step_in_forward();
        if self.inner.valid()
            && below_lower(
                self.user_cmp.as_ref(),
                self.lower_bound.as_deref(),
                extract_user_key(self.inner.key()),
            )
        {
            self.seek_inner_to_lower();
        }
        self.saved_key.clear();
        self.clear_saved_value();
        self.find_next_user_entry(false);
    }

    /// In [`Self::prev_prefix_by_keys`], with the inner iterator at the
    /// last entry before the current prefix: lands on the first entry of
    /// that entry's run; when that entry is this reader's answer (see
    /// [`Self::take_first_of_run`]) it is taken, and the next
    /// `prev_prefix` can step straight to the run before. Otherwise the
    /// inner iterator goes back to where it was and this returns false.
    fn take_first_of_run_before(&mut self, transform: &SliceTransform) -> bool {
        let in_domain = self.set_run(transform, false);
        let run = PrefixRun::new(transform, self.run_bytes.as_slice(), in_domain, self.order);
        let key = self.inner.key();
        if !run.covers(key) {
            return false; // malformed: the general path reports it
        }
        if below_lower(
            self.user_cmp.as_ref(),
            self.lower_bound.as_deref(),
            extract_user_key(key),
        ) {
            return false; // the general path stops here at once
        }
        self.inner.skip_run_backward_to_first(&run);
        if !self.inner.valid() {
            // Failed (without an error a landing is always inside the run):
            // the error stays in the inner status.
            return false;
        }
        if self.take_first_of_run() {
            return true;
        }
        // Past the run and one step back: at its last entry again.
        let run = PrefixRun::new(transform, self.run_bytes.as_slice(), in_domain, self.order);
        self.inner.skip_run_forward(&run);
        if self.inner.valid() {
            self.inner.prev();
        } else if self.inner.status().is_ok() {
            self.inner.seek_to_last();
        }
        false
    }

    /// After [`InternalIterator::skip_run_backward_to_first`], with the inner
    /// iterator at the first entry of a run: if that entry is this reader's
    /// answer (a visible value within the bounds), makes it current (as a
    /// forward position: it is its key's newest entry) and returns true;
    /// otherwise changes nothing.
    fn take_first_of_run(&mut self) -> bool {
        let Ok(ikey) = parse(self.inner.key()) else {
            return false; // the slow path reports it
        };
        if !self.stops_at_value(&ikey)
            || below_lower(
                self.user_cmp.as_ref(),
                self.lower_bound.as_deref(),
                ikey.user_key,
            )
        {
            return false;
        }
        // The entry is its key's newest and a visible value: the forward
        // invariant holds at it, and nothing need be copied.
        self.direction = Direction::Forward;
        self.at_first = true;
        self.valid = true;
        true
    }

    /// Resets the state before a seek.
    fn start(&mut self, direction: Direction) {
        self.direction = direction;
        self.at_first = false;
        self.valid = false;
        self.merged = false;
        // A seek starts afresh: a merge that failed at another key does not
        // stick (the inner iterator's own errors still do).
        self.status = Ok(());
        self.saved_key.clear();
        self.clear_saved_value();
    }

    fn clear_saved_value(&mut self) {
        if self.saved_value.capacity() > SAVED_VALUE_SLACK_BYTES_MAX {
            self.saved_value = Vec::new();
        } else {
            self.saved_value.clear();
        }
    }

    /// Becomes invalid at the end of the entries, or after an inner error.
    fn stop(&mut self) {
        self.valid = false;
        self.at_first = false;
        self.merged = false;
        self.direction = Direction::Forward;
        self.saved_key.clear();
        self.clear_saved_value();
    }

    /// Becomes invalid because of `e`, keeping the first error.
    fn fail(&mut self, e: Error) {
        if self.status.is_ok() {
            self.status = Err(e);
        }
        self.stop();
    }

    /// Whether a forward move that hides nothing stops at `ikey`: a value
    /// visible to this reader, inside the bounds.
    #[inline(always)]
    fn stops_at_value(&self, ikey: &ParsedInternalKey<'_>) -> bool {
        ikey.sequence <= self.sequence
            && self.kind_of(ikey) == ValueKind::Value
            && !past_upper(
                self.user_cmp.as_ref(),
                self.upper_bound.as_deref(),
                ikey.user_key,
            )
            && !self.outside_confinement(ikey.user_key)
    }

    /// Forward: from the inner position, finds the first visible value. If
    /// `skipping`, entries with user keys <= `saved_key` are hidden.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        debug_assert_eq!(self.direction, Direction::Forward);
        // Bounded by the inner iterator's entries: each turn moves forward.
        while self.inner.valid() {
            let ikey = match parse(self.inner.key()) {
                Ok(ikey) => ikey,
                Err(e) => return self.fail(e),
            };
            let cmp = self.user_cmp.as_ref();
            if past_upper(cmp, self.upper_bound.as_deref(), ikey.user_key)
                || self.outside_confinement(ikey.user_key)
            {
                break;
            }
            if ikey.sequence <= self.sequence {
                match self.kind_of(&ikey) {
                    ValueKind::Deletion | ValueKind::RangeDeletion => {
                        // Hides every older entry of this user key.
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(ikey.user_key);
                        skipping = true;
                    }
                    ValueKind::Value => {
                        let hidden = skipping
                            && cmp.compare(ikey.user_key, &self.saved_key) != Ordering::Greater;
                        if !hidden {
                            self.valid = true;
                            self.saved_key.clear();
                            return;
                        }
                    }
                    ValueKind::Merge => {
                        let hidden = skipping
                            && cmp.compare(ikey.user_key, &self.saved_key) != Ordering::Greater;
                        if !hidden {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(ikey.user_key);
                            return self.merge_forward();
                        }
                    }
                }
            }
            self.inner.next();
        }
        self.stop();
    }

    /// Forward, at the newest visible entry of `saved_key`, a merge operand:
    /// gathers its operands down to a value or deletion, merges them into
    /// `saved_value`, and seeks back to that entry.
    fn merge_forward(&mut self) {
        self.operands.clear();
        self.operands.push(self.inner.value());
        let mut base: Option<Vec<u8>> = None;
        // Bounded by the key's entries: each turn moves forward.
        loop {
            self.inner.next();
            if !self.inner.valid() {
                if let Err(e) = self.inner.status() {
                    return self.fail(e);
                }
                break;
            }
            let ikey = match parse(self.inner.key()) {
                Ok(ikey) => ikey,
                Err(e) => return self.fail(e),
            };
            if self.user_cmp.compare(ikey.user_key, &self.saved_key) != Ordering::Equal {
                break;
            }
            match self.kind_of(&ikey) {
                ValueKind::Value => {
                    base = Some(self.inner.value().to_vec());
                    break;
                }
                ValueKind::Deletion | ValueKind::RangeDeletion => break,
                ValueKind::Merge => self.operands.push(self.inner.value()),
            }
        }
        self.operands.reverse(); // met newest first
        let merged = merge_operator::resolve(
            self.merge_operator.as_deref(),
            &self.saved_key,
            base.as_deref(),
            &self.operands,
        );
        match merged {
            Ok(v) => self.saved_value = v,
            Err(e) => return self.fail(e),
        }
        // Back to the key's newest visible entry, the forward position.
        build_internal_key(
            &mut self.seek_key,
            &self.saved_key,
            self.sequence,
            ValueKind::FOR_SEEK,
        );
        self.inner.seek(&self.seek_key);
        if !self.inner.valid() {
            let e = self.inner.status().err().unwrap_or_else(|| {
                Error::corruption("iterator", 0, "a merged key vanished on a seek back")
            });
            return self.fail(e);
        }
        self.merged = true;
        self.valid = true;
    }

    /// Reverse: from the inner position (the last entry of the candidate
    /// key), walks back over that key's entries, oldest to newest, keeping
    /// the newest visible one; a value yields that key, a deletion moves on
    /// to the previous key. Stops just before the yielded key's entries.
    fn find_prev_user_entry(&mut self) {
        debug_assert_eq!(self.direction, Direction::Reverse);
        let mut kind = ValueKind::Deletion;
        // With kind Merge: whether a value lies below the operands (it is
        // in `saved_value`).
        let mut has_base = false;
        self.operands.clear();
        // Bounded by the inner iterator's entries: each turn moves backward.
        while self.inner.valid() {
            let ikey = match parse(self.inner.key()) {
                Ok(ikey) => ikey,
                Err(e) => return self.fail(e),
            };
            let cmp = self.user_cmp.as_ref();
            if below_lower(cmp, self.lower_bound.as_deref(), ikey.user_key)
                || self.outside_confinement(ikey.user_key)
            {
                break;
            }
            let visible = ikey.sequence <= self.sequence
                && !past_upper(cmp, self.upper_bound.as_deref(), ikey.user_key);
            if visible {
                if kind != ValueKind::Deletion
                    && cmp.compare(ikey.user_key, &self.saved_key) == Ordering::Less
                {
                    // A value was found for a larger key: yield it.
                    break;
                }
                let entry_kind = self.kind_of(&ikey);
                match entry_kind {
                    ValueKind::Deletion | ValueKind::RangeDeletion => {
                        self.saved_key.clear();
                        self.clear_saved_value();
                        self.operands.clear();
                    }
                    ValueKind::Merge => {
                        // Entries come oldest first: the operands gather in
                        // the order the merge takes them.
                        match kind {
                            ValueKind::Deletion | ValueKind::RangeDeletion => {
                                has_base = false;
                                self.saved_key.clear();
                                self.saved_key.extend_from_slice(ikey.user_key);
                            }
                            ValueKind::Value => has_base = true,
                            ValueKind::Merge => {}
                        }
                        self.operands.push(self.inner.value());
                    }
                    ValueKind::Value => {
                        self.operands.clear();
                        let raw_value = self.inner.value();
                        if self.saved_value.capacity()
                            > raw_value.len() + SAVED_VALUE_SLACK_BYTES_MAX
                        {
                            self.saved_value = Vec::new();
                        }
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(ikey.user_key);
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(raw_value);
                    }
                }
                kind = entry_kind;
            }
            self.inner.prev();
        }
        if !self.inner.valid() {
            if let Err(e) = self.inner.status() {
                // The entries before the failure are unknown: the pending key
                // might be hidden by one of them, so yield nothing.
                return self.fail(e);
            }
        }
        match kind {
            ValueKind::Deletion | ValueKind::RangeDeletion => self.stop(),
            ValueKind::Value => self.valid = true,
            ValueKind::Merge => {
                let base = has_base.then_some(self.saved_value.as_slice());
                let op = self.merge_operator.as_deref();
                match merge_operator::resolve(op, &self.saved_key, base, &self.operands) {
                    Ok(v) => {
                        self.saved_value = v;
                        self.valid = true;
                    }
                    Err(e) => self.fail(e),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::iter::merging::testutil::VecIter;
    use crate::iter::merging::MergingIterator;
    use crate::key::{
        BytewiseComparator, InternalKey, InternalKeyComparator, ReverseBytewiseComparator,
    };

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// One write: a value, or a deletion (`None`), at sequence `seq`.
    struct Op {
        key: Vec<u8>,
        value: Option<Vec<u8>>,
        seq: SequenceNumber,
    }

    fn ikey(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
        InternalKey::new(user_key, seq, kind).encoded().to_vec()
    }

    fn random_key(rng: &mut StdRng) -> Vec<u8> {
        let len = rng.gen_range(0..4);
        (0..len).map(|_| b'a' + rng.gen_range(0..4u8)).collect()
    }

    fn random_ops(rng: &mut StdRng) -> Vec<Op> {
        let n = rng.gen_range(0..250);
        (1..=n)
            .map(|seq| Op {
                key: random_key(rng),
                value: rng.gen_bool(0.7).then(|| format!("v{seq}").into_bytes()),
                seq,
            })
            .collect()
    }

    /// The ops as internal entries, split at random over a few sorted
    /// children under one merging iterator (or one child alone).
    fn internal_iter(
        rng: &mut StdRng,
        ops: &[Op],
        user_cmp: &Arc<dyn Comparator>,
    ) -> Box<dyn InternalIterator> {
        let icmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(user_cmp.clone()));
        let mut entries: Entries = ops
            .iter()
            .map(|op| match &op.value {
                Some(v) => (ikey(&op.key, op.seq, ValueKind::Value), v.clone()),
                None => (ikey(&op.key, op.seq, ValueKind::Deletion), Vec::new()),
            })
            .collect();
        entries.sort_by(|a, b| icmp.compare(&a.0, &b.0));
        let n_children = rng.gen_range(0..5);
        if n_children == 0 {
            return VecIter::new(icmp, entries).boxed();
        }
        let mut children: Vec<Entries> = vec![Vec::new(); n_children];
        for e in entries {
            children[rng.gen_range(0..n_children)].push(e);
        }
        let children = children
            .into_iter()
            .map(|c| VecIter::new(icmp.clone(), c).boxed())
            .collect();
        Box::new(MergingIterator::new(icmp, children))
    }

    /// What a reader at `sequence` sees within the bounds, in user order.
    fn model(
        ops: &[Op],
        user_cmp: &dyn Comparator,
        sequence: SequenceNumber,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Entries {
        let mut latest: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
        for op in ops.iter().filter(|op| op.seq <= sequence) {
            latest.insert(&op.key, op.value.as_deref());
        }
        let mut visible: Entries = latest
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_vec(), v?.to_vec())))
            .filter(|(k, _)| !below_lower(user_cmp, lower, k) && !past_upper(user_cmp, upper, k))
            .collect();
        visible.sort_by(|a, b| user_cmp.compare(&a.0, &b.0));
        visible
    }

    fn at(it: &DBIter) -> Option<(Vec<u8>, Vec<u8>)> {
        it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
    }

    fn check_seed(seed: u64, user_cmp: Arc<dyn Comparator>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let ops = random_ops(&mut rng);
        let cmp = user_cmp.as_ref();
        for _ in 0..4 {
            let sequence = rng.gen_range(0..=ops.len() as u64 + 1);
            let lower = rng.gen_bool(0.3).then(|| random_key(&mut rng));
            let upper = rng.gen_bool(0.3).then(|| random_key(&mut rng));
            let want = model(&ops, cmp, sequence, lower.as_deref(), upper.as_deref());
            let ctx = format!("seed {seed} seq {sequence} lower {lower:?} upper {upper:?}");
            let inner = internal_iter(&mut rng, &ops, &user_cmp);
            let mut it = DBIter::new(inner, user_cmp.clone(), sequence, lower, upper);

            let mut got = Vec::new();
            it.seek_to_first();
            while let Some(e) = at(&it) {
                got.push(e);
                it.next();
            }
            assert_eq!(got, want, "{ctx}: forward");

            got.clear();
            it.seek_to_last();
            while let Some(e) = at(&it) {
                got.push(e);
                it.prev();
            }
            got.reverse();
            assert_eq!(got, want, "{ctx}: backward");

            for _ in 0..12 {
                let target = random_key(&mut rng);
                let mut pos = if rng.gen_bool(0.5) {
                    it.seek(&target);
                    let p = want.partition_point(|e| cmp.compare(&e.0, &target) == Ordering::Less);
                    (p < want.len()).then_some(p)
                } else {
                    it.seek_for_prev(&target);
                    want.partition_point(|e| cmp.compare(&e.0, &target) != Ordering::Greater)
                        .checked_sub(1)
                };
                assert_eq!(
                    at(&it),
                    pos.map(|p| want[p].clone()),
                    "{ctx}: seek {target:?}"
                );
                for step in 0..20 {
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
                        "{ctx}: step {step} after seek {target:?}"
                    );
                }
            }
            it.status().unwrap();
        }
    }

    /// The run of `key` as the prefix steps see it: its prefix, or the key
    /// itself outside the extractor's domain.
    fn run_of(t: &SliceTransform, key: &[u8]) -> (bool, Vec<u8>) {
        match t.prefix(key) {
            Some(p) => (true, p.to_vec()),
            None => (false, key.to_vec()),
        }
    }

    /// Where `next_prefix` lands from visible entry `p`: the first later
    /// entry of another run.
    fn model_next_prefix(want: &Entries, t: &SliceTransform, p: usize) -> Option<usize> {
        let run = run_of(t, &want[p].0);
        (p + 1..want.len()).find(|&q| run_of(t, &want[q].0) != run)
    }

    /// Where `prev_prefix` lands from visible entry `p`: the first entry of
    /// the run before the one holding `p`.
    fn model_prev_prefix(want: &Entries, t: &SliceTransform, p: usize) -> Option<usize> {
        let start = |mut i: usize| {
            let run = run_of(t, &want[i].0);
            while i > 0 && run_of(t, &want[i - 1].0) == run {
                i -= 1;
            }
            i
        };
        let before = start(p).checked_sub(1)?;
        Some(start(before))
    }

    fn extractors() -> Vec<SliceTransform> {
        // Contiguous prefixes over the test's keys (letters, 0-3 long): the
        // first byte of keys of two bytes or more, through the user path.
        fn first(k: &[u8]) -> &[u8] {
            &k[..1]
        }
        fn long(k: &[u8]) -> bool {
            k.len() >= 2
        }
        vec![
            SliceTransform::create_fixed_prefix(1),
            SliceTransform::create_fixed_prefix(2),
            SliceTransform::create("first-of-long", first, Some(long)),
            SliceTransform::create_noop(),
        ]
    }

    /// `next_prefix` and `prev_prefix` mixed with `next`, `prev` and seeks
    /// land where the model says, over random histories, bounds, snapshots
    /// and children.
    fn check_prefix_steps(seed: u64, user_cmp: Arc<dyn Comparator>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let ops = random_ops(&mut rng);
        let cmp = user_cmp.as_ref();
        let all = extractors();
        let t = Arc::new(all[rng.gen_range(0..all.len())].clone());
        for _ in 0..4 {
            let sequence = rng.gen_range(0..=ops.len() as u64 + 1);
            let lower = rng.gen_bool(0.3).then(|| random_key(&mut rng));
            let upper = rng.gen_bool(0.3).then(|| random_key(&mut rng));
            let want = model(&ops, cmp, sequence, lower.as_deref(), upper.as_deref());
            let ctx = format!(
                "seed {seed} {} seq {sequence} lower {lower:?} upper {upper:?}",
                t.name()
            );
            let inner = internal_iter(&mut rng, &ops, &user_cmp);
            let mut it = DBIter::new(inner, user_cmp.clone(), sequence, lower, upper)
                .with_prefix_extractor(Some(t.clone()));
            for _ in 0..8 {
                let mut pos = if rng.gen_bool(0.5) {
                    it.seek_to_first();
                    (!want.is_empty()).then_some(0)
                } else {
                    it.seek_to_last();
                    want.len().checked_sub(1)
                };
                assert_eq!(at(&it), pos.map(|p| want[p].clone()), "{ctx}: start");
                for step in 0..30 {
                    let Some(p) = pos else { break };
                    let (name, next) = match rng.gen_range(0..4) {
                        0 => {
                            it.next_prefix();
                            ("next_prefix", model_next_prefix(&want, &t, p))
                        }
                        1 => {
                            it.prev_prefix();
                            ("prev_prefix", model_prev_prefix(&want, &t, p))
                        }
                        2 => {
                            it.next();
                            ("next", (p + 1 < want.len()).then_some(p + 1))
                        }
                        _ => {
                            it.prev();
                            ("prev", p.checked_sub(1))
                        }
                    };
                    pos = next;
                    assert_eq!(
                        at(&it),
                        pos.map(|p| want[p].clone()),
                        "{ctx}: step {step} {name} from {:?}",
                        want[p].0
                    );
                }
            }
            it.status().unwrap();
        }
    }

    #[test]
    fn prefix_steps_match_model_bytewise() {
        for seed in 0..300 {
            check_prefix_steps(seed, Arc::new(BytewiseComparator));
        }
    }

    #[test]
    fn prefix_steps_match_model_reverse_comparator() {
        for seed in 7000..7300 {
            check_prefix_steps(seed, Arc::new(ReverseBytewiseComparator));
        }
    }

    #[test]
    fn prefix_steps_without_extractor_are_invalid_argument() {
        let entries: Entries = ["a", "b"]
            .iter()
            .map(|k| (ikey(k.as_bytes(), 1, ValueKind::Value), b"x".to_vec()))
            .collect();
        for prev in [false, true] {
            let (inner, user) = bytewise_inner(entries.clone());
            let mut it = DBIter::new(inner, user, 10, None, None);
            it.seek_to_first();
            if prev {
                it.prev_prefix();
            } else {
                it.next_prefix();
            }
            assert!(!it.valid());
            assert!(matches!(it.status(), Err(Error::InvalidArgument(_))));
        }
    }

    #[test]
    fn matches_model_bytewise() {
        for seed in 0..150 {
            check_seed(seed, Arc::new(BytewiseComparator));
        }
    }

    #[test]
    fn matches_model_reverse_comparator() {
        for seed in 5000..5150 {
            check_seed(seed, Arc::new(ReverseBytewiseComparator));
        }
    }

    fn bytewise_inner(entries: Entries) -> (Box<dyn InternalIterator>, Arc<dyn Comparator>) {
        let user: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let icmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(user.clone()));
        (VecIter::new(icmp, entries).boxed(), user)
    }

    #[test]
    fn newest_visible_version_wins_and_deletions_hide() {
        let v = |k: &str, seq, val: &str| {
            (
                ikey(k.as_bytes(), seq, ValueKind::Value),
                val.as_bytes().to_vec(),
            )
        };
        let d = |k: &str, seq| (ikey(k.as_bytes(), seq, ValueKind::Deletion), Vec::new());
        let entries = vec![
            v("a", 5, "a5"),
            v("a", 2, "a2"),
            d("b", 4),
            v("b", 3, "b3"),
            v("c", 1, "c1"),
        ];
        let scan = |seq| {
            let (inner, user) = bytewise_inner(entries.clone());
            let mut it = DBIter::new(inner, user, seq, None, None);
            let mut got = Vec::new();
            it.seek_to_first();
            while it.valid() {
                got.push(String::from_utf8(it.value().to_vec()).unwrap());
                it.next();
            }
            got
        };
        assert_eq!(scan(5), ["a5", "c1"]);
        assert_eq!(scan(3), ["a2", "b3", "c1"]);
        assert_eq!(scan(1), ["c1"]);
        assert!(scan(0).is_empty());
    }

    #[test]
    fn malformed_internal_key_is_corruption_both_ways() {
        // No such kind; and a range deletion's kind, which no point entry
        // has (it must not read as a deletion).
        for kind in [9, ValueKind::RangeDeletion as u8] {
            malformed_kind_is_corruption_both_ways(kind);
        }
    }

    fn malformed_kind_is_corruption_both_ways(kind: u8) {
        let v = |k: &str, seq| (ikey(k.as_bytes(), seq, ValueKind::Value), b"x".to_vec());
        let mut bad = ikey(b"b", 3, ValueKind::Value);
        let kind_at = bad.len() - 8;
        bad[kind_at] = kind;
        let entries = vec![v("a", 1), (bad, Vec::new()), v("c", 2), v("d", 2)];

        let (inner, user) = bytewise_inner(entries.clone());
        let mut it = DBIter::new(inner, user, 10, None, None);
        it.seek_to_first();
        assert_eq!(it.key(), b"a");
        it.next();
        assert!(!it.valid());
        assert!(it.status().unwrap_err().is_corruption());

        let (inner, user) = bytewise_inner(entries);
        let mut it = DBIter::new(inner, user, 10, None, None);
        it.seek_to_last();
        assert_eq!(it.key(), b"d");
        // Yielding "c" backward needs the entry before it: the bad one.
        it.prev();
        assert!(!it.valid());
        assert!(it.status().unwrap_err().is_corruption());
    }

    #[test]
    fn inner_error_stops_and_is_reported() {
        let user: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let icmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(user.clone()));
        let entries: Entries = ["a", "b", "c"]
            .iter()
            .map(|k| (ikey(k.as_bytes(), 1, ValueKind::Value), b"x".to_vec()))
            .collect();
        let inner = VecIter::failing_at(icmp.clone(), entries.clone(), 0);
        let mut it = DBIter::new(inner.boxed(), user.clone(), 10, None, None);
        it.seek_to_last();
        assert_eq!(it.key(), b"c");
        // "b" is pending while stepping back onto the failing "a": an older
        // entry could have hidden it, so nothing is yielded.
        it.prev();
        assert!(!it.valid());
        assert!(it.status().is_err());

        let inner = VecIter::failing_at(icmp, entries, 2);
        let mut it = DBIter::new(inner.boxed(), user, 10, None, None);
        it.seek(b"b");
        assert_eq!(it.key(), b"b");
        it.next();
        assert!(!it.valid());
        assert!(it.status().is_err());
    }

    /// Every move after a `prev_prefix` that took a run's first entry (the
    /// inner iterator left at it) reports an inner error instead of
    /// panicking, wherever the error sits, and otherwise lands right.
    #[test]
    fn moves_after_prev_prefix_report_inner_errors() {
        let user: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
        let icmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(user.clone()));
        let keys = ["a1", "a2", "b1", "b2", "c1"];
        let entries: Entries = keys
            .iter()
            .map(|k| (ikey(k.as_bytes(), 1, ValueKind::Value), b"x".to_vec()))
            .collect();
        let t = Arc::new(SliceTransform::create_fixed_prefix(1));
        type Step = (&'static str, fn(&mut DBIter), Option<&'static str>);
        let steps: [Step; 4] = [
            ("next", DBIter::next, Some("b2")),
            ("prev", DBIter::prev, Some("a2")),
            ("next_prefix", DBIter::next_prefix, Some("c1")),
            ("prev_prefix", DBIter::prev_prefix, Some("a1")),
        ];
        for fail_at in (0..keys.len()).map(Some).chain([None]) {
            for (name, step, want) in steps {
                let inner = match fail_at {
                    Some(f) => VecIter::failing_at(icmp.clone(), entries.clone(), f),
                    None => VecIter::new(icmp.clone(), entries.clone()),
                };
                let mut it = DBIter::new(inner.boxed(), user.clone(), 10, None, None)
                    .with_prefix_extractor(Some(t.clone()));
                it.seek_to_last();
                if !it.valid() {
                    assert!(it.status().is_err(), "fail at {fail_at:?}");
                    continue;
                }
                it.prev_prefix();
                if !it.valid() {
                    assert!(it.status().is_err(), "fail at {fail_at:?}");
                    continue;
                }
                assert_eq!(it.key(), b"b1");
                step(&mut it);
                let ctx = format!("{name} after prev_prefix, fail at {fail_at:?}");
                if it.valid() {
                    assert_eq!(Some(it.key()), want.map(str::as_bytes), "{ctx}");
                } else {
                    assert!(it.status().is_err(), "{ctx}: invalid without an error");
                }
            }
        }
    }

    #[test]
    fn bounds_clamp_seeks() {
        let entries: Entries = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|k| {
                (
                    ikey(k.as_bytes(), 1, ValueKind::Value),
                    k.as_bytes().to_vec(),
                )
            })
            .collect();
        let (inner, user) = bytewise_inner(entries);
        let mut it = DBIter::new(inner, user, 1, Some(b"b".to_vec()), Some(b"d".to_vec()));
        it.seek(b"a");
        assert_eq!(it.key(), b"b");
        it.prev();
        assert!(!it.valid());
        it.seek_for_prev(b"z");
        assert_eq!(it.key(), b"c");
        it.next();
        assert!(!it.valid());
        it.seek_to_last();
        assert_eq!(it.key(), b"c");
        it.seek(b"d");
        assert!(!it.valid());
        it.seek_for_prev(b"a");
        assert!(!it.valid());
        it.status().unwrap();
    }
}
