//! The iterator over internal entries that every source implements: data
//! blocks, tables, memtables, and the merging iterator above them.

use crate::error::Result;

pub(crate) mod merging;
mod prefix_run;

pub use crate::sst::SeekReads;
pub use prefix_run::PrefixRun;

/// A cursor over sorted (key, value) entries.
///
/// Positioning calls never return errors; a failure makes the iterator
/// invalid and is reported by [`InternalIterator::status`], as in LevelDB.
/// `key` and `value` may be called only while `valid()` is true.
pub trait InternalIterator: Send {
    /// True while positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry with key >= `target`.
    fn seek(&mut self, target: &[u8]);
    /// Positions at the last entry with key <= `target`.
    fn seek_for_prev(&mut self, target: &[u8]);
    /// Moves to the next entry.
    fn next(&mut self);
    /// Moves to the previous entry.
    fn prev(&mut self);
    /// The current key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;

    /// Adds to `reads` the data blocks that [`seek`](Self::seek)`(target)`
    /// is about to read from files read with direct I/O and that the block
    /// cache lacks, so that a merging iterator reads those of all its
    /// children at once ([`SeekReads`]) before it seeks them. Called only
    /// right before `seek(target)` or `seek_for_prev(target)` (which lands
    /// in the same block unless `target` falls between two), and may
    /// prepare it (a level iterator opens the file the seek will read).
    /// The default adds none.
    fn plan_seek(&mut self, target: &[u8], reads: &mut SeekReads) {
        let _ = (target, reads);
    }

    /// [`plan_seek`](Self::plan_seek) for
    /// [`seek_within`](Self::seek_within)`(target, run)`: an iterator that
    /// skips what cannot hold any entry of `run` (a table whose filter
    /// rules the prefix out) plans no read there. The default plans the
    /// reads of `seek(target)`, which the default `seek_within` is.
    fn plan_seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>, reads: &mut SeekReads) {
        let _ = run;
        self.plan_seek(target, reads);
    }

    /// Positions at the first entry >= `target` where only the entries
    /// `run` covers matter (a prefix seek): an iterator may skip what
    /// cannot hold any of them (a table whose filter rules the prefix out)
    /// and then be past entries outside the run, or invalid. The default
    /// is [`InternalIterator::seek`].
    fn seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>) {
        let _ = run;
        self.seek(target);
    }

    /// Moves forward past the entries `run` covers, from the current entry
    /// on: afterwards at the first entry that `run` does not cover, or
    /// invalid at the end. Requires a valid iterator. The default steps with
    /// [`InternalIterator::next`]; block, table, level and merging
    /// iterators skip restart intervals, blocks and files at once.
    fn skip_run_forward(&mut self, run: &PrefixRun<'_>) {
        while self.valid() && run.covers(self.key()) {
            self.next();
        }
    }

    /// Mirror of [`InternalIterator::skip_run_forward`]: moves backward to
    /// the last entry that `run` does not cover, at or before the current
    /// one, or invalid at the start.
    fn skip_run_backward(&mut self, run: &PrefixRun<'_>) {
        while self.valid() && run.covers(self.key()) {
            self.prev();
        }
    }

    /// From the first entry of a run (the current entry: `run` covers it
    /// and no entry before it), moves to the first entry of the run before
    /// it (the run, by the same extractor, of the entry just before the
    /// current one) and returns true; or returns false without moving where
    /// this iterator cannot find it from what it holds at hand (the
    /// default). Block iterators of blocks that restart at every prefix
    /// change find it from restart keys alone, without decoding the
    /// entries in between, and other blocks from their decoded restart
    /// intervals; table, level and single-source merging iterators pass
    /// that on. `prev_prefix` uses it; `prev` and `next`
    /// work from the new position as after any backward step.
    fn prev_run_first(&mut self, run: &PrefixRun<'_>) -> bool {
        let _ = run;
        false
    }

    /// Undoes a [`InternalIterator::prev_run_first`] that landed, from the
    /// first entry of the run it landed on (`prev`): back at the entry it
    /// started from, the first entry after that run. The default skips
    /// the run forward; the merging iterator moves only its one child (the
    /// others hold nothing before that entry), so it does not turn around.
    fn return_from_prev_run(&mut self, prev: &PrefixRun<'_>) {
        self.skip_run_forward(prev);
    }

    /// From an entry `run` covers, moves backward to the first entry of the
    /// run (the smallest covered key), where `prev` and `next` then work as
    /// after any backward step. Requires a valid iterator at a covered
    /// entry. The default skips before the run and steps forward once, a
    /// local step for block, table and level iterators; the merging
    /// iterator lands each child that holds the run on its first entry and
    /// keeps the others before the run, so it never turns its children
    /// around.
    fn skip_run_backward_to_first(&mut self, run: &PrefixRun<'_>) {
        debug_assert!(self.valid() && run.covers(self.key()));
        self.skip_run_backward(run);
        if self.valid() {
            self.next();
        } else if self.status().is_ok() {
            self.seek_to_first();
        }
    }
}
