//! The iterator over internal entries that every source implements: data
//! blocks, tables, memtables, and the merging iterator above them.

use crate::error::Result;

pub mod merging;

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
}
