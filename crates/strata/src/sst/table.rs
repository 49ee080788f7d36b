//! A table of either format, as the database sees it: block-based
//! ([`TableReader`]) or packed ([`PackedTableReader`]). Both formats live
//! side by side in one database and one level; the file's last eight bytes
//! (its magic number) say which it is.

use std::sync::Arc;

use crate::cache::BlockCache;
use crate::env::{RandomAccessFile, WritableFile};
use crate::error::Result;
use crate::iter::{InternalIterator, PrefixRun};
use crate::key::{Comparator, SliceTransform, ValueKind};

use bytes::Bytes;

use super::packed::{is_packed_table, PackedTableBuilder, PackedTableIterator, PackedTableReader};
use super::{
    BlockPropertyFilter, MetaPlacement, MultiGetScratch, TableBuilder, TableEntry, TableIterator,
    TableOptions, TableProbe, TableProperties, TableReader, VersionVisitor,
};

/// What a table holds for a database read: the newest visible entry's
/// kind and value (a slice of a block or of the mapping).
#[derive(Debug)]
pub(crate) struct Found {
    /// The entry's sequence number (0 for a packed table's entry read
    /// without its tag: see `need_sequence`).
    pub(crate) sequence: crate::key::SequenceNumber,
    pub(crate) kind: ValueKind,
    pub(crate) value: Bytes,
}

impl From<TableEntry> for Found {
    fn from(e: TableEntry) -> Found {
        Found {
            sequence: e.sequence,
            kind: e.kind,
            value: e.value,
        }
    }
}

/// An open table of either format. Cloning shares the reader.
#[derive(Debug, Clone)]
pub(crate) enum Table {
    Block(Arc<TableReader>),
    Packed(Arc<PackedTableReader>),
}

/// How the database opens tables.
#[derive(Clone)]
pub(crate) struct TableOpenOptions {
    pub(crate) comparator: Arc<dyn Comparator>,
    pub(crate) block_cache: Option<Arc<BlockCache>>,
    pub(crate) placement: MetaPlacement,
    pub(crate) prefix_extractor: Option<Arc<SliceTransform>>,
    /// Packed tables check each section on first use instead of at open.
    pub(crate) packed_lazy_checksums: bool,
    /// A block-based table read with direct I/O caches its data blocks as
    /// stored ([`TableReader::with_stored_blocks_cached`]).
    pub(crate) cache_stored_under_direct_reads: bool,
}

impl Table {
    /// Opens the table in `file`, block-based or packed as its magic says.
    pub(crate) fn open(
        file: Arc<dyn RandomAccessFile>,
        name: String,
        opts: &TableOpenOptions,
    ) -> Result<Table> {
        let size = file.size();
        let mut tail = [0u8; 8];
        if size >= 8 {
            file.read_exact_at(size - 8, &mut tail)?;
        }
        if is_packed_table(&tail) {
            return Ok(Table::Packed(Arc::new(PackedTableReader::open(
                &*file,
                name,
                opts.comparator.clone(),
                opts.packed_lazy_checksums,
            )?)));
        }
        Ok(Table::Block(Arc::new(
            TableReader::open_placed(
                file,
                name,
                opts.comparator.clone(),
                opts.block_cache.clone(),
                opts.placement,
                opts.prefix_extractor.clone(),
            )?
            .with_stored_blocks_cached(opts.cache_stored_under_direct_reads),
        )))
    }

    /// The table's range deletions, as its range-deletion block holds
    /// them (read and checked at open).
    pub(crate) fn range_deletions(&self) -> &[crate::range_del::RangeTombstone] {
        match self {
            Table::Block(t) => t.range_deletions(),
            Table::Packed(_) => &[],
        }
    }

    /// Heap bytes the reader holds outside the block cache. A packed
    /// table's bytes are its file's mapping (page cache), not counted.
    pub(crate) fn approximate_memory_usage(&self) -> usize {
        match self {
            Table::Block(t) => t.approximate_memory_usage(),
            Table::Packed(_) => 0,
        }
    }

    /// The table's properties.
    pub(crate) fn properties(&self) -> &TableProperties {
        match self {
            Table::Block(t) => t.properties(),
            Table::Packed(t) => t.properties(),
        }
    }

    /// [`TableReader::plan_get`]; packed tables are mapped and add none.
    pub(crate) fn plan_get(
        &self,
        lookup: &[u8],
        hash: u64,
        reads: &mut crate::iter::SeekReads,
    ) -> bool {
        match self {
            Table::Block(t) => t.plan_get(lookup, hash, reads),
            Table::Packed(_) => false,
        }
    }

    /// See [`TableReader::get_searching`]; only what a database read
    /// needs. A packed table reads the entry's sequence number only if
    /// `need_sequence` (a range deletion may hide it), and never sets
    /// `searched`: its lookups read no blocks.
    #[inline]
    pub(crate) fn get_opt(
        &self,
        lookup: &[u8],
        hash: u64,
        fill_cache: bool,
        need_sequence: bool,
        on_merge: Option<&mut VersionVisitor<'_>>,
        searched: &mut bool,
    ) -> Result<Option<Found>> {
        match self {
            Table::Block(t) => Ok(t
                .get_searching(lookup, hash, fill_cache, on_merge, searched)?
                .map(Found::from)),
            Table::Packed(t) => {
                let Some((sequence, kind, value)) = t.get_value(lookup, need_sequence)? else {
                    return Ok(None);
                };
                if let (ValueKind::Merge, Some(visit)) = (kind, on_merge) {
                    self.for_each_version(lookup, hash, fill_cache, visit)?;
                }
                Ok(Some(Found {
                    sequence,
                    kind,
                    value,
                }))
            }
        }
    }

    /// See [`TableReader::for_each_version`]. A packed table walks with
    /// its iterator (a seek is a few integer operations there).
    pub(crate) fn for_each_version(
        &self,
        lookup: &[u8],
        hash: u64,
        fill_cache: bool,
        visit: &mut VersionVisitor<'_>,
    ) -> Result<()> {
        let t = match self {
            Table::Block(t) => return t.for_each_version(lookup, hash, fill_cache, visit),
            Table::Packed(t) => t,
        };
        let user_key = crate::key::extract_user_key(lookup);
        let mut it = t.iter();
        it.seek(lookup);
        while it.valid() {
            let parsed = crate::key::parse_entry_key(it.key()).ok_or_else(|| {
                crate::error::Error::corruption(&**t.name(), 0, "malformed internal key")
            })?;
            let same = t.user_comparator().compare(parsed.user_key, user_key);
            if same != std::cmp::Ordering::Equal || !visit(parsed, it.value()) {
                return Ok(());
            }
            it.next();
        }
        it.status()
    }

    /// See [`TableReader::multi_get`].
    pub(crate) fn multi_get(
        &self,
        probes: &[TableProbe<'_>],
        fill_cache: bool,
        need_sequence: bool,
        scratch: &mut MultiGetScratch,
        answer: &mut dyn FnMut(usize, Result<Found>),
    ) {
        match self {
            Table::Block(t) => t.multi_get(probes, fill_cache, scratch, &mut |i, r| {
                answer(i, r.map(Found::from))
            }),
            // A lookup is a few integer operations: nothing to batch, and
            // no block searched.
            Table::Packed(t) => {
                scratch.forget_searched();
                for (i, p) in probes.iter().enumerate() {
                    match t.get_value(p.lookup, need_sequence) {
                        Ok(Some((sequence, kind, value))) => answer(
                            i,
                            Ok(Found {
                                sequence,
                                kind,
                                value,
                            }),
                        ),
                        Ok(None) => {}
                        Err(e) => answer(i, Err(e)),
                    }
                }
            }
        }
    }

    /// An iterator over the whole table; the block cache is filled only if
    /// `fill_cache`.
    pub(crate) fn iter_opt(&self, fill_cache: bool) -> TableIter {
        match self {
            Table::Block(t) => TableIter::Block(t.iter_opt(fill_cache)),
            Table::Packed(t) => TableIter::Packed(t.iter()),
        }
    }

    /// Up to about `max` user keys that split the table's data into parts
    /// of about equal size, distinct and ascending (RocksDB's key anchors): sampled from
    /// the index of a block-based table; none for a packed table (its
    /// bounds stand for it).
    pub(crate) fn key_anchors(&self, max: usize) -> Result<Vec<Vec<u8>>> {
        let Table::Block(t) = self else {
            return Ok(Vec::new());
        };
        // One index entry per data block: keep every `step`-th, copying
        // only those.
        let blocks = t.properties().num_data_blocks as usize;
        let step = blocks.div_ceil(max.max(1)).max(1);
        let mut index = t.index_iter()?;
        let mut keys = Vec::new();
        index.seek_to_first();
        let mut n = 0;
        while index.valid() {
            n += 1;
            let key = index.user_key();
            // A user key whose versions span blocks is one anchor.
            if n % step == 0
                && keys
                    .last()
                    .is_none_or(|last: &Vec<u8>| last.as_slice() != key)
            {
                keys.push(key.to_vec());
            }
            index.next();
        }
        index.status()?;
        Ok(keys)
    }

    /// An iterator for a compaction input: no cache fill, and data blocks
    /// read `readahead` bytes at a time (0: the adaptive readahead).
    pub(crate) fn iter_for_compaction(&self, readahead: u64) -> TableIter {
        match self {
            Table::Block(t) => TableIter::Block(t.iter_opt(false).with_readahead(readahead)),
            Table::Packed(t) => TableIter::Packed(t.iter()),
        }
    }
}

/// An iterator over a table of either format.
// Boxing the block iterator would add a pointer chase to every step of
// the common case; a level iterator holds one of these at a time.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum TableIter {
    Block(TableIterator),
    Packed(PackedTableIterator),
}

impl TableIter {
    /// Applies a read's block property filters. Packed tables have no
    /// blocks and record no block properties: they are read whole, as a
    /// block-based table written without the filter's collector.
    /// Skips the blocks `filters` rule out; not in a table holding merge
    /// operands (a filter judging an operand as a value could keep a key's
    /// base and skip the operands above it).
    pub(crate) fn with_filters(self, filters: &[Arc<dyn BlockPropertyFilter>]) -> TableIter {
        match self {
            TableIter::Block(t) if t.table().properties().num_merge_operands > 0 => {
                TableIter::Block(t)
            }
            TableIter::Block(t) => TableIter::Block(t.with_filters(filters)),
            p @ TableIter::Packed(_) => p,
        }
    }
}

macro_rules! each {
    ($self:expr, $it:ident => $e:expr) => {
        match $self {
            TableIter::Block($it) => $e,
            TableIter::Packed($it) => $e,
        }
    };
}

impl InternalIterator for TableIter {
    #[inline]
    fn valid(&self) -> bool {
        each!(self, t => t.valid())
    }
    fn seek_to_first(&mut self) {
        each!(self, t => t.seek_to_first())
    }
    fn seek_to_last(&mut self) {
        each!(self, t => t.seek_to_last())
    }
    fn seek(&mut self, target: &[u8]) {
        each!(self, t => t.seek(target))
    }
    fn plan_seek(&mut self, target: &[u8], reads: &mut crate::iter::SeekReads) {
        // Packed tables are mapped: nothing to read ahead.
        if let TableIter::Block(t) = self {
            t.plan_seek(target, reads);
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        each!(self, t => t.seek_for_prev(target))
    }
    #[inline]
    fn next(&mut self) {
        each!(self, t => t.next())
    }
    #[inline]
    fn prev(&mut self) {
        each!(self, t => t.prev())
    }
    #[inline]
    fn key(&self) -> &[u8] {
        each!(self, t => t.key())
    }
    #[inline]
    fn value(&self) -> &[u8] {
        each!(self, t => t.value())
    }
    fn status(&self) -> Result<()> {
        each!(self, t => t.status())
    }
    fn plan_seek_within(
        &mut self,
        target: &[u8],
        run: &PrefixRun<'_>,
        reads: &mut crate::iter::SeekReads,
    ) {
        if let TableIter::Block(t) = self {
            t.plan_seek_within(target, run, reads);
        }
    }
    fn seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>) {
        each!(self, t => t.seek_within(target, run))
    }
    fn skip_run_forward(&mut self, run: &PrefixRun<'_>) {
        each!(self, t => t.skip_run_forward(run))
    }
    fn skip_run_backward(&mut self, run: &PrefixRun<'_>) {
        each!(self, t => t.skip_run_backward(run))
    }
    fn skip_run_backward_to_first(&mut self, run: &PrefixRun<'_>) {
        each!(self, t => t.skip_run_backward_to_first(run))
    }
    fn prev_run_first(&mut self, run: &PrefixRun<'_>) -> bool {
        each!(self, t => t.prev_run_first(run))
    }
}

/// Writes a table of either format.
// One per job output, alive for the whole output: size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum TableWriter {
    Block(TableBuilder),
    Packed(PackedTableBuilder),
}

impl TableWriter {
    /// A block-based table with `opts`, or a packed one (ordered by
    /// `opts.comparator`) when `packed`.
    pub(crate) fn new(
        opts: TableOptions,
        packed: bool,
        file: Box<dyn WritableFile>,
        name: String,
    ) -> Result<TableWriter> {
        Ok(if packed {
            TableWriter::Packed(PackedTableBuilder::new(opts.comparator, file, name))
        } else {
            TableWriter::Block(TableBuilder::new(opts, file, name)?)
        })
    }

    #[inline]
    pub(crate) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        match self {
            TableWriter::Block(b) => b.add(ikey, value),
            TableWriter::Packed(b) => b.add(ikey, value),
        }
    }

    /// See [`TableBuilder::add_range_deletion`]; packed tables have no
    /// range-deletion block (`NotSupported`).
    pub(crate) fn add_range_deletion(&mut self, t: crate::range_del::RangeTombstone) -> Result<()> {
        match self {
            TableWriter::Block(b) => b.add_range_deletion(t),
            TableWriter::Packed(_) => Err(crate::error::Error::NotSupported(
                "packed tables hold no range deletions".into(),
            )),
        }
    }

    pub(crate) fn set_merge_operator(&mut self, name: &str) {
        match self {
            TableWriter::Block(b) => b.set_merge_operator(name),
            TableWriter::Packed(b) => b.set_merge_operator(name),
        }
    }

    pub(crate) fn finish(&mut self) -> Result<TableProperties> {
        match self {
            TableWriter::Block(b) => b.finish(),
            TableWriter::Packed(b) => b.finish(),
        }
    }

    pub(crate) fn sync(&mut self) -> Result<()> {
        match self {
            TableWriter::Block(b) => b.sync(),
            TableWriter::Packed(b) => b.sync(),
        }
    }

    pub(crate) fn estimated_file_size(&self) -> u64 {
        match self {
            TableWriter::Block(b) => b.estimated_file_size(),
            TableWriter::Packed(b) => b.estimated_file_size(),
        }
    }

    pub(crate) fn file_size(&self) -> u64 {
        match self {
            TableWriter::Block(b) => b.file_size(),
            TableWriter::Packed(b) => b.file_size(),
        }
    }
}
