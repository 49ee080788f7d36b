//! Block properties (Pebble's design): small summaries of each data block,
//! recorded at write time in the block's index entry and aggregated per
//! table in the properties block, so that reads can pass blocks and tables
//! without loading them.
//!
//! - User collectors ([`BlockPropertyCollector`]) see every entry added to
//!   a table and emit one property per data block and one per table; a
//!   [`BlockPropertyFilter`] of the same name, set on the read options of
//!   an iterator, rules blocks and tables out by their property.
//! - The built-in single-prefix property (written when the database has a
//!   prefix extractor) holds the prefix every key of a block shares, if
//!   they share one; `next_prefix` passes such blocks of the current prefix
//!   without reading them.
//!
//! Layout (see `docs/format/table.md`): an index entry's property list
//! holds tag [`SINGLE_PREFIX_TAG`] for the single prefix and tag
//! [`USER_TAG_BASE`]` + i` for the table's `i`-th collector, whose names
//! the properties block lists in order.

use std::fmt;
use std::sync::Arc;

/// The index-entry tag of the single-prefix property.
pub const SINGLE_PREFIX_TAG: u32 = 1;

/// The index-entry tag that marks a block in which every prefix change is
/// a restart point (empty bytes): a prefix step then finds the next prefix
/// by testing restart keys only.
pub const PREFIX_RESTARTS_TAG: u32 = 2;

/// Average entries per prefix in a block from which the next block of the
/// table restarts at every prefix change: shorter rows would lose too much
/// prefix compression (a restart stores a whole key and 4 more bytes).
pub const PREFIX_RESTARTS_MIN_RUN: usize = 4;

/// The index-entry tag of the table's first user collector.
pub const USER_TAG_BASE: u32 = 16;

/// Most user collectors one table records.
pub const COLLECTORS_MAX: usize = 64;

/// Summarizes the entries of each data block and of the whole table, as
/// Pebble's `BlockPropertyCollector`. One instance serves one table file.
///
/// ```
/// use strata_kv::BlockPropertyCollector;
///
/// /// The smallest and largest 8-byte version suffix of the keys seen.
/// #[derive(Default)]
/// struct Versions { block: Option<(u64, u64)>, table: Option<(u64, u64)> }
///
/// fn widen(range: &mut Option<(u64, u64)>, v: u64) {
///     let (lo, hi) = range.get_or_insert((v, v));
///     *lo = (*lo).min(v);
///     *hi = (*hi).max(v);
/// }
///
/// fn encode(range: Option<(u64, u64)>) -> Vec<u8> {
///     range.map_or(Vec::new(), |(lo, hi)| [lo.to_be_bytes(), hi.to_be_bytes()].concat())
/// }
///
/// impl BlockPropertyCollector for Versions {
///     fn name(&self) -> &str { "versions" }
///     fn add(&mut self, key: &[u8], _value: &[u8]) {
///         if let Some(v) = key.len().checked_sub(8).map(|i| u64::from_be_bytes(key[i..].try_into().unwrap())) {
///             widen(&mut self.block, v);
///             widen(&mut self.table, v);
///         }
///     }
///     fn finish_data_block(&mut self) -> Vec<u8> { encode(self.block.take()) }
///     fn finish_table(&mut self) -> Vec<u8> { encode(self.table) }
/// }
/// ```
pub trait BlockPropertyCollector: Send {
    /// The name filters refer to it by; recorded in every table it wrote.
    fn name(&self) -> &str;
    /// An entry of the data block being built: its user key and value
    /// (empty for a deletion). Entries arrive in key order.
    fn add(&mut self, key: &[u8], value: &[u8]);
    /// The property of the data block just completed; what follows belongs
    /// to the next block.
    fn finish_data_block(&mut self) -> Vec<u8>;
    /// The property of the whole table, after its last block.
    fn finish_table(&mut self) -> Vec<u8>;
}

/// Rules blocks and tables out by the property a collector of the same
/// name recorded, as Pebble's `BlockPropertyFilter`. Set on
/// `ReadOptions::add_block_property_filter`; iterators then skip every
/// block and table whose property does not intersect (point lookups
/// ignore filters). A table written without that collector is read whole.
pub trait BlockPropertyFilter: Send + Sync {
    /// The collector whose properties it reads.
    fn name(&self) -> &str;
    /// False when no entry a read wants can be in a block or table with
    /// this property (its entries are then hidden from the iterator).
    fn intersects(&self, property: &[u8]) -> bool;
}

/// Makes one collector per table written.
pub type BlockPropertyCollectorFactory =
    Arc<dyn Fn() -> Box<dyn BlockPropertyCollector> + Send + Sync>;

/// What [`BlockPropertiesBuilder::add`] says of an entry.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RunStart {
    /// The entry is the first of its prefix run in the block.
    pub(crate) first: bool,
    /// The entry must start a restart interval.
    pub(crate) restart: bool,
}

/// The builder side: the collectors of one table and the single-prefix
/// tracker of its current block.
pub(crate) struct BlockPropertiesBuilder {
    collectors: Vec<Box<dyn BlockPropertyCollector>>,
    /// Whether to track single prefixes (the table has an extractor).
    track_prefix: bool,
    /// The current block restarts at every prefix change.
    prefix_restarts: bool,
    /// Entries and prefix runs of the current block; the last entry's run
    /// (its prefix, or its whole key outside the domain) when `block_runs`
    /// is not 0. A block of one run in the domain holds a single prefix.
    block_entries: usize,
    block_runs: usize,
    last_run: Vec<u8>,
    last_in_domain: bool,
}

impl fmt::Debug for BlockPropertiesBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockPropertiesBuilder")
            .field("collectors", &self.names())
            .field("track_prefix", &self.track_prefix)
            .finish()
    }
}

impl BlockPropertiesBuilder {
    pub(crate) fn new(factories: &[BlockPropertyCollectorFactory], track_prefix: bool) -> Self {
        BlockPropertiesBuilder {
            collectors: factories.iter().map(|f| f()).collect(),
            track_prefix,
            prefix_restarts: false,
            block_entries: 0,
            block_runs: 0,
            last_run: Vec::new(),
            last_in_domain: false,
        }
    }

    /// True when nothing is recorded: index entries stay bare.
    pub(crate) fn is_empty(&self) -> bool {
        self.collectors.is_empty() && !self.track_prefix
    }

    /// The collectors' names, in tag order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.collectors
            .iter()
            .map(|c| c.name().to_string())
            .collect()
    }

    /// An entry of the current block; `prefix` is its key's prefix (`None`
    /// outside the extractor's domain). Says whether the entry is the
    /// first of a prefix run in the block, and whether it must start a
    /// restart interval (the block restarts at prefix changes and this
    /// entry starts a new prefix).
    pub(crate) fn add(&mut self, user_key: &[u8], value: &[u8], prefix: Option<&[u8]>) -> RunStart {
        for c in &mut self.collectors {
            c.add(user_key, value);
        }
        if !self.track_prefix {
            return RunStart::default();
        }
        let (bytes, in_domain) = match prefix {
            Some(p) => (p, true),
            None => (user_key, false),
        };
        let same =
            self.block_runs > 0 && self.last_in_domain == in_domain && self.last_run == bytes;
        self.block_entries += 1;
        if same {
            return RunStart::default();
        }
        let restart = self.prefix_restarts && self.block_runs > 0;
        self.block_runs += 1;
        self.last_run.clear();
        self.last_run.extend_from_slice(bytes);
        self.last_in_domain = in_domain;
        RunStart {
            first: true,
            restart,
        }
    }

    /// The properties of the block just completed, as `(tag, bytes)`.
    pub(crate) fn finish_block(&mut self) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::with_capacity(self.collectors.len() + 2);
        if self.block_runs == 1 && self.last_in_domain {
            out.push((SINGLE_PREFIX_TAG, self.last_run.clone()));
        }
        if self.prefix_restarts {
            out.push((PREFIX_RESTARTS_TAG, Vec::new()));
        }
        // Long rows in this block: the next one restarts at each new row.
        self.prefix_restarts = self.track_prefix
            && self.block_runs > 0
            && self.block_entries / self.block_runs >= PREFIX_RESTARTS_MIN_RUN;
        self.block_entries = 0;
        self.block_runs = 0;
        for (i, c) in self.collectors.iter_mut().enumerate() {
            out.push((USER_TAG_BASE + i as u32, c.finish_data_block()));
        }
        out
    }

    /// The table-level properties, by collector name.
    pub(crate) fn finish_table(&mut self) -> Vec<(String, Vec<u8>)> {
        self.collectors
            .iter_mut()
            .map(|c| (c.name().to_string(), c.finish_table()))
            .collect()
    }
}

/// The filters of one read, resolved against one table: which index tags
/// they read, and whether the table as a whole is ruled out.
#[derive(Clone, Default)]
pub(crate) struct ResolvedFilters {
    by_tag: Vec<(u32, Arc<dyn BlockPropertyFilter>)>,
    pub(crate) table_excluded: bool,
}

impl fmt::Debug for ResolvedFilters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolvedFilters")
            .field(
                "tags",
                &self.by_tag.iter().map(|(t, _)| *t).collect::<Vec<_>>(),
            )
            .field("table_excluded", &self.table_excluded)
            .finish()
    }
}

impl ResolvedFilters {
    /// Resolves `filters` against a table that recorded `collectors` (in
    /// tag order) with table-level properties `table_props`.
    pub(crate) fn resolve(
        filters: &[Arc<dyn BlockPropertyFilter>],
        collectors: &[String],
        table_props: &std::collections::BTreeMap<String, Vec<u8>>,
    ) -> ResolvedFilters {
        let mut out = ResolvedFilters::default();
        for f in filters {
            let Some(i) = collectors.iter().position(|n| n == f.name()) else {
                continue;
            };
            if table_props.get(f.name()).is_some_and(|p| !f.intersects(p)) {
                out.table_excluded = true;
            }
            out.by_tag.push((USER_TAG_BASE + i as u32, f.clone()));
        }
        out
    }

    /// True when no filter applies to the table.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_tag.is_empty() && !self.table_excluded
    }

    /// True when a filter rules out the block of this index entry.
    pub(crate) fn excludes_block(&self, index_value: &super::index::IndexValue<'_>) -> bool {
        self.by_tag
            .iter()
            .any(|(tag, f)| index_value.property(*tag).is_some_and(|p| !f.intersects(p)))
    }
}
