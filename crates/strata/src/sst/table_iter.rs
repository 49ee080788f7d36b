//! A two-level iterator over a table: the index block chooses the data
//! block, a block iterator walks it. A block that fails its checksum stops
//! the iteration with a Corruption status; it is never skipped, since
//! skipping would silently hide entries.

use std::sync::Arc;

use crate::error::Result;
use crate::iter::{InternalIterator, PrefixRun};

use smallvec::SmallVec;

use super::block::{BlockIter, PrevRun};
use super::block_property::{BlockPropertyFilter, ResolvedFilters};
use super::format::BlockHandle;
use super::index::IndexValue;
use super::readahead::Readahead;
use super::{SeekReads, TableReader};

/// Iterates over every entry of a table in internal-key order.
pub struct TableIterator {
    table: Arc<TableReader>,
    index: BlockIter,
    data: Option<BlockIter>,
    data_handle: Option<BlockHandle>,
    status: Result<()>,
    fill_cache: bool,
    /// The read's block property filters, resolved for this table.
    filters: ResolvedFilters,
    /// Reads ahead once blocks come from the file back to back.
    readahead: Readahead,
}

impl std::fmt::Debug for TableIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableIterator")
            .field("table", &self.table.name())
            .field("block", &self.data_handle)
            .finish()
    }
}

impl TableIterator {
    /// An iterator over `table`. If its index cannot be read (kept in the
    /// block cache, evicted, and now unreadable) the iterator is empty with
    /// that error as its status.
    /// The table this iterates.
    pub(crate) fn table(&self) -> &Arc<TableReader> {
        &self.table
    }

    pub(super) fn new(table: Arc<TableReader>, fill_cache: bool) -> TableIterator {
        let (index, status) = match table.index_iter() {
            Ok(index) => (index, Ok(())),
            Err(e) => (BlockIter::empty(table.name().clone()), Err(e)),
        };
        TableIterator {
            table,
            index,
            data: None,
            data_handle: None,
            status,
            fill_cache,
            filters: ResolvedFilters::default(),
            readahead: Readahead::default(),
        }
    }

    /// Reads the table's data blocks `bytes` at a time from the first
    /// (compaction inputs, `compaction_readahead_size`); 0 keeps the
    /// adaptive readahead.
    pub(crate) fn with_readahead(mut self, bytes: u64) -> TableIterator {
        self.readahead = Readahead::fixed(bytes);
        self
    }

    /// Bytes its readahead buffer holds.
    #[cfg(test)]
    pub(crate) fn readahead_held(&self) -> usize {
        self.readahead.held()
    }

    /// Reads each next window in the background whatever the file (only
    /// direct-I/O files do so otherwise).
    #[cfg(test)]
    pub(crate) fn with_background_readahead(mut self) -> TableIterator {
        self.readahead = super::readahead::Readahead::background_always();
        self
    }

    /// Windows this iterator took from background reads, and blocks it
    /// joined from two windows.
    #[cfg(test)]
    pub(crate) fn background_windows(&self) -> (usize, usize) {
        (self.readahead.taken, self.readahead.joined)
    }

    /// Applies a read's block property filters: blocks and the table they
    /// rule out are passed without being read.
    pub(crate) fn with_filters(
        mut self,
        filters: &[Arc<dyn BlockPropertyFilter>],
    ) -> TableIterator {
        self.filters = self.table.resolve_filters(filters);
        self
    }

    /// True when the filters rule the whole table out; the iterator is then
    /// left invalid.
    fn table_excluded(&mut self) -> bool {
        if self.filters.table_excluded {
            self.data = None;
            self.data_handle = None;
        }
        self.filters.table_excluded
    }

    /// The index entry the index iterator is at; `None` when it is not
    /// valid or the entry is malformed (loading its block reports that).
    fn index_value(&self) -> Option<IndexValue<'_>> {
        if !self.index.valid() {
            return None;
        }
        let offset = self.table.footer().index.offset;
        self.table
            .decode_index_value(self.index.value(), offset)
            .ok()
    }

    /// True if the table's filter says no key of `run`'s prefix is here.
    fn lacks_run(&self, run: &PrefixRun<'_>) -> bool {
        run.in_domain() && !self.table.may_contain_prefix(run.bytes())
    }

    /// The single prefix of the block the index is at, if recorded.
    fn index_single_prefix(&self) -> Option<&[u8]> {
        self.table.block_single_prefix(&self.index_value()?)
    }

    /// Loads the data block the index iterator points at.
    fn init_data_block(&mut self) {
        if !self.index.valid() {
            self.data = None;
            self.data_handle = None;
            return;
        }
        let value = match self
            .table
            .decode_index_value(self.index.value(), self.table.footer().index.offset)
        {
            Ok(v) => v,
            Err(e) => return self.fail(e),
        };
        let handle = value.handle;
        if self.data.is_some() && self.data_handle == Some(handle) {
            return;
        }
        if !self.filters.is_empty() && self.filters.excludes_block(&value) {
            // Ruled out by its properties: an empty block stands in, and the
            // callers' loops move on to the next one.
            self.data = Some(BlockIter::empty(self.table.name().clone()));
            self.data_handle = Some(handle);
            return;
        }
        let prefix_restarts = self.table.block_prefix_restarts(&value);
        match (self.table).read_data_block_ahead(handle, self.fill_cache, &mut self.readahead) {
            Ok(block) => {
                self.data = Some(
                    self.table
                        .data_block_iter(block)
                        .with_prefix_restarts(prefix_restarts),
                );
                self.data_handle = Some(handle);
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: crate::Error) {
        if self.status.is_ok() {
            self.status = Err(e);
        }
        self.data = None;
        self.data_handle = None;
    }

    /// True when the data iterator stopped because of an error; records it.
    fn data_failed(&mut self) -> bool {
        if let Some(d) = &self.data {
            if let Err(e) = d.status() {
                self.fail(e);
                return true;
            }
        }
        self.status.is_err()
    }

    /// The current key, copied (to come back to it).
    fn saved_position(&self) -> SmallVec<[u8; 64]> {
        SmallVec::from_slice(self.current().key())
    }

    /// Back at `saved` after a prefix step that could not land: false.
    fn restore(&mut self, saved: &[u8]) -> bool {
        if self.status.is_ok() {
            self.seek(saved);
        }
        false
    }

    /// [`InternalIterator::prev_run_first`] once the run before the
    /// current one (`prev`) is known to hold the first entry of the data
    /// block at the index position: the run begins in the block after the
    /// last block whose index separator it does not cover (found by a
    /// search over the index's restart keys, as a backward skip does),
    /// then at its first entry there. Otherwise back at `saved` and false.
    fn land_on_run_first_before(&mut self, prev: &PrefixRun<'_>, saved: &[u8]) -> bool {
        if prev.is_interval() {
            // A separator is at or after its block's last key; one that the
            // run (an interval holding the next block's first key) does
            // not cover is before the run, and so is that block.
            self.index.prev();
            if self.index.valid() && !prev.covers_user_key(self.index.user_key()) {
                // The run begins at this block's first entry.
                self.index.next();
                return self.land_on_first_of_block(saved);
            }
            // The block before ends inside the run too: back to the last
            // block that ends before it; the run begins in the next one.
            // Invalid with no error: the run may begin in an earlier table.
            if self.index.valid() {
                self.index.skip_run_backward(prev);
            }
            if self.index.valid() {
                self.index.next();
                self.init_data_block();
                if let Some(d) = &mut self.data {
                    match d.last_run_first_in_block(prev, None, Some(prev)) {
                        PrevRun::Landed => return true,
                        // The run holds the block's first entry: it begins there.
                        PrevRun::FromBlockStart(_) => return self.land_on_first_of_block(saved),
                        // The block ends before the run: it begins at the next.
                        PrevRun::Outside => {
                            self.index.next();
                            return self.land_on_first_of_block(saved);
                        }
                        PrevRun::BeforeBlock | PrevRun::Unknown => {}
                    }
                }
            }
        }
        self.data_failed();
        self.restore(saved)
    }

    /// At the first entry of the block at the index position, or back at
    /// `saved` and false.
    fn land_on_first_of_block(&mut self, saved: &[u8]) -> bool {
        self.init_data_block();
        if let Some(d) = &mut self.data {
            d.seek_to_first();
            if d.valid() {
                return true;
            }
        }
        self.data_failed();
        self.restore(saved)
    }

    fn skip_empty_forward(&mut self) {
        while !self.data.as_ref().is_some_and(|d| d.valid()) {
            if self.data_failed() || !self.index.valid() {
                self.data = None;
                self.readahead.release();
                return;
            }
            self.index.next();
            self.init_data_block();
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
    }

    fn skip_empty_backward(&mut self) {
        while !self.data.as_ref().is_some_and(|d| d.valid()) {
            if self.data_failed() || !self.index.valid() {
                self.data = None;
                return;
            }
            self.index.prev();
            self.init_data_block();
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
    }

    /// The data block the index iterator is at, if it is valid.
    fn index_handle(&self) -> Option<BlockHandle> {
        self.index_value().map(|v| v.handle)
    }

    fn current(&self) -> &BlockIter {
        self.data
            .as_ref()
            .expect("key/value called on an invalid TableIterator")
    }
}

impl InternalIterator for TableIterator {
    /// The data block a seek for `target` lands on, if it would come from
    /// a file read with direct I/O. Not for reads that do not fill the
    /// cache or skip blocks by property.
    fn plan_seek(&mut self, target: &[u8], reads: &mut SeekReads) {
        if !self.fill_cache || !self.filters.is_empty() || self.status.is_err() {
            return;
        }
        self.index.seek(target);
        let Some(handle) = self.index_value().map(|v| v.handle) else {
            return;
        };
        if self.data.is_some() && self.data_handle == Some(handle) {
            return;
        }
        if self.table.reads_directly(handle) {
            reads.push(self.table.clone(), handle);
        }
    }

    fn valid(&self) -> bool {
        self.status.is_ok() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        if self.table_excluded() {
            return;
        }
        self.index.seek_to_first();
        self.init_data_block();
        if let Some(d) = &mut self.data {
            d.seek_to_first();
        }
        self.skip_empty_forward();
    }

    fn seek_to_last(&mut self) {
        if self.table_excluded() {
            return;
        }
        self.index.seek_to_last();
        self.init_data_block();
        if let Some(d) = &mut self.data {
            d.seek_to_last();
        }
        self.skip_empty_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        if self.table_excluded() {
            return;
        }
        self.index.seek(target);
        self.init_data_block();
        if let Some(d) = &mut self.data {
            d.seek(target);
        }
        self.skip_empty_forward();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        if self.table_excluded() {
            return;
        }
        self.seek(target);
        if self.status.is_err() || self.index.status().is_err() {
            return;
        }
        if !self.valid() {
            self.seek_to_last();
        }
        let cmp = self.table.internal_comparator().clone();
        while self.valid() && cmp.compare(self.key(), target) == std::cmp::Ordering::Greater {
            self.prev();
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_empty_forward();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_empty_backward();
    }

    fn key(&self) -> &[u8] {
        self.current().key()
    }

    fn value(&self) -> &[u8] {
        self.current().value()
    }

    fn plan_seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>, reads: &mut SeekReads) {
        // As `seek_within`: a table without the prefix is not read.
        if !self.lacks_run(run) {
            self.plan_seek(target, reads);
        }
    }

    fn seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>) {
        if self.lacks_run(run) {
            // No key of the run is here: the table contributes nothing.
            self.data = None;
            self.data_handle = None;
            return;
        }
        self.seek(target);
    }

    fn skip_run_forward(&mut self, run: &PrefixRun<'_>) {
        // Bounded by the index: each turn moves to a later block.
        loop {
            let Some(d) = &mut self.data else { return };
            d.skip_run_forward(run);
            if d.valid() || self.data_failed() {
                return;
            }
            // The run covers the rest of this block. When it is an interval,
            // a block whose separator it covers is covered whole.
            self.index.next();
            if run.is_interval() && self.index.valid() {
                self.index.skip_run_forward(run);
            }
            // Blocks that hold only the run's prefix are passed unread.
            while run.in_domain() && self.index_single_prefix() == Some(run.bytes()) {
                self.index.next();
            }
            self.init_data_block();
            match &mut self.data {
                Some(d) => d.seek_to_first(),
                None => return,
            }
        }
    }

    fn prev_run_first(&mut self, run: &PrefixRun<'_>) -> bool {
        if !self.filters.is_empty() || !self.valid() {
            return false;
        }
        let Some(d) = &mut self.data else {
            return false;
        };
        match d.prev_run_first_in_block(run) {
            PrevRun::Landed => true,
            PrevRun::FromBlockStart(key) => {
                let saved = self.saved_position();
                let prev = run.of_internal_key(&key);
                self.land_on_run_first_before(&prev, &saved)
            }
            PrevRun::BeforeBlock => {
                // The run before ends in the block before this one.
                let saved = self.saved_position();
                self.index.prev();
                if !self.index.valid() {
                    return self.restore(&saved);
                }
                self.init_data_block();
                let Some(d) = &mut self.data else {
                    return self.restore(&saved);
                };
                match d.last_run_first_in_block(run, Some(run), None) {
                    PrevRun::Landed => true,
                    PrevRun::FromBlockStart(key) => {
                        let prev = run.of_internal_key(&key);
                        self.land_on_run_first_before(&prev, &saved)
                    }
                    _ => {
                        self.data_failed();
                        self.restore(&saved)
                    }
                }
            }
            PrevRun::Outside | PrevRun::Unknown => {
                self.data_failed();
                false
            }
        }
    }

    fn skip_run_backward(&mut self, run: &PrefixRun<'_>) {
        // Bounded by the index: each turn moves to an earlier block.
        loop {
            let Some(d) = &mut self.data else { return };
            d.skip_run_backward(run);
            if d.valid() || self.data_failed() {
                return;
            }
            // The run starts at or before this block's first entry.
            let from = self.data_handle;
            self.index.prev();
            while !run.is_interval()
                && run.in_domain()
                && self.index_single_prefix() == Some(run.bytes())
            {
                self.index.prev();
            }
            if run.is_interval() && self.index.valid() {
                // The last block whose separator precedes the run ends
                // before it; the block after that one (if it is not the
                // block just left) may still hold keys before the run.
                self.index.skip_run_backward(run);
                if self.index.valid() {
                    self.index.next();
                    if self.index_handle() == from {
                        self.index.prev();
                    }
                } else if self.index.status().is_ok() {
                    self.index.seek_to_first();
                    if self.index_handle() == from {
                        self.data = None;
                        self.data_handle = None;
                        return;
                    }
                }
            }
            self.init_data_block();
            match &mut self.data {
                Some(d) => d.seek_to_last(),
                None => return,
            }
        }
    }

    fn status(&self) -> Result<()> {
        self.status.clone()?;
        self.index.status()?;
        match &self.data {
            Some(d) => d.status(),
            None => Ok(()),
        }
    }
}
