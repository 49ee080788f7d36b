//! Block-based table files (SSTs): sorted, immutable, checksummed.
//!
//! ```text
//! [data block 1] ... [data block N]   each followed by a 5-byte trailer
//! [filter block]                      whole-table bloom filter over user keys
//! [index block]                       separator -> data block handle + block properties
//! [properties block]
//! [metaindex block]                   meta block name -> handle
//! [footer]                            56 bytes, ends with the magic number
//! ```
//!
//! The byte layout is specified in `docs/format/table.md`.

pub(crate) mod block;
pub(crate) mod block_property;
pub(crate) mod filter;
pub(crate) mod format;
pub(crate) mod index;
mod index_array;
mod inspect;
pub mod packed;
pub(crate) mod properties;
mod readahead;
mod table;
mod table_builder;
mod table_iter;
mod table_reader;

use std::sync::Arc;

use crate::compression::CompressionType;
use crate::error::{Error, Result};
use crate::key::{BytewiseComparator, Comparator, SliceTransform};

pub use block::DataBlockIndexType;
pub use block_property::{
    BlockPropertyCollector, BlockPropertyCollectorFactory, BlockPropertyFilter,
};
pub use filter::filter_hash;
pub(crate) use format::ChecksumMode;
pub use inspect::{
    describe_table, table_entries, table_range_deletions, verify_table, RangeDeletion, TableLayout,
    TablePart,
};
pub use properties::TableProperties;
pub(crate) use table::{Found, Table, TableIter, TableOpenOptions, TableWriter};
pub use table_builder::TableBuilder;
pub use table_iter::TableIterator;
#[cfg(test)]
pub(crate) use table_reader::read_ahead_seen;
pub(crate) use table_reader::{
    MetaPlacement, MultiGetScratch, TableIndex, TableProbe, VersionVisitor,
};
pub use table_reader::{SeekReads, TableEntry, TableReader};

/// Metaindex name of the bloom filter block.
pub const FILTER_BLOCK_NAME: &str = "filter.strata.bloom.v1";
/// Metaindex name of the properties block.
pub const PROPERTIES_BLOCK_NAME: &str = "strata.properties";
/// Metaindex name of the range-deletion block (docs/format/range_del.md).
pub const RANGE_DEL_BLOCK_NAME: &str = "strata.range_del";

/// How tables are written (and, for the comparator, read).
#[derive(Clone)]
pub struct TableOptions {
    /// Orders user keys; its name is recorded and checked on open.
    pub comparator: Arc<dyn Comparator>,
    /// Target uncompressed size of a data block, in bytes.
    pub block_size: usize,
    /// A data block more than `100 - block_size_deviation` percent full is
    /// closed before an entry that would take it past `block_size`
    /// (RocksDB's `block_size_deviation`, default 10); 0 closes a block
    /// only once it has reached `block_size`. 0 to 100.
    pub block_size_deviation: i32,
    /// Entries between restart points in data blocks.
    pub block_restart_interval: usize,
    /// Entries between restart points in the index block.
    pub index_block_restart_interval: usize,
    /// Compression of data blocks.
    pub compression: CompressionType,
    /// Bloom filter bits per key; 0 writes no filter.
    pub bloom_bits_per_key: f64,
    /// Whether data blocks also get a hash index for point lookups. It is
    /// written only where sound: for user comparators that never equate
    /// byte-different keys, in blocks of at most 253 restart points.
    pub data_block_index_type: DataBlockIndexType,
    /// Distinct user keys per hash bucket aimed at, > 0 (default 0.75).
    /// Lower means fewer collisions and more bytes; above 1 is allowed (as
    /// in RocksDB) and trades collisions for space.
    pub data_block_hash_table_util_ratio: f64,
    /// When set, the filter also holds the prefix of every key in the
    /// extractor's domain (for prefix seeks), and the extractor's name is
    /// recorded in the properties.
    pub prefix_extractor: Option<Arc<SliceTransform>>,
    /// Whether the filter holds whole user keys (for point lookups). With
    /// a prefix extractor, `false` keeps prefixes only, as RocksDB's
    /// `whole_key_filtering`.
    pub whole_key_filtering: bool,
    /// Collectors of per-block properties, one instance per table.
    pub block_property_collectors: Vec<BlockPropertyCollectorFactory>,
}

impl std::fmt::Debug for TableOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableOptions")
            .field("comparator", &self.comparator.name())
            .field("block_size", &self.block_size)
            .field("block_size_deviation", &self.block_size_deviation)
            .field("block_restart_interval", &self.block_restart_interval)
            .field(
                "index_block_restart_interval",
                &self.index_block_restart_interval,
            )
            .field("compression", &self.compression)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("data_block_index_type", &self.data_block_index_type)
            .field(
                "data_block_hash_table_util_ratio",
                &self.data_block_hash_table_util_ratio,
            )
            .field(
                "prefix_extractor",
                &self.prefix_extractor.as_ref().map(|t| t.name()),
            )
            .field("whole_key_filtering", &self.whole_key_filtering)
            .field(
                "block_property_collectors",
                &self.block_property_collectors.len(),
            )
            .finish()
    }
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            comparator: Arc::new(BytewiseComparator),
            block_size: 4096,
            block_size_deviation: 10,
            block_restart_interval: 16,
            index_block_restart_interval: 1,
            compression: CompressionType::Snappy,
            bloom_bits_per_key: 10.0,
            data_block_index_type: DataBlockIndexType::BinarySearch,
            data_block_hash_table_util_ratio: 0.75,
            prefix_extractor: None,
            whole_key_filtering: true,
            block_property_collectors: Vec::new(),
        }
    }
}

impl TableOptions {
    /// Rejects values no table could be written with.
    pub fn validate(&self) -> Result<()> {
        if self.block_property_collectors.len() > block_property::COLLECTORS_MAX {
            return Err(Error::invalid_argument(format!(
                "{} block property collectors: at most {} per table",
                self.block_property_collectors.len(),
                block_property::COLLECTORS_MAX
            )));
        }
        // Filters find a collector's properties by its name: two of one
        // name would mix their tags and table properties.
        let mut names: Vec<String> = (self.block_property_collectors.iter())
            .map(|make| make().name().to_string())
            .collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::invalid_argument(format!(
                "two block property collectors are named {:?}",
                w[0]
            )));
        }
        if self.block_size == 0 || self.block_size > crate::limits::BLOCK_SIZE_BYTES_MAX / 2 {
            return Err(Error::invalid_argument(format!(
                "block_size {} must be between 1 and {}",
                self.block_size,
                crate::limits::BLOCK_SIZE_BYTES_MAX / 2
            )));
        }
        if !(0..=100).contains(&self.block_size_deviation) {
            return Err(Error::invalid_argument(format!(
                "block_size_deviation {} must be between 0 and 100",
                self.block_size_deviation
            )));
        }
        if self.block_restart_interval == 0 || self.index_block_restart_interval == 0 {
            return Err(Error::invalid_argument(
                "restart intervals must be at least 1",
            ));
        }
        if !(self.bloom_bits_per_key.is_finite()
            && (0.0..=100.0).contains(&self.bloom_bits_per_key))
        {
            return Err(Error::invalid_argument(format!(
                "bloom_bits_per_key {} must be between 0 and 100",
                self.bloom_bits_per_key
            )));
        }
        let ratio = self.data_block_hash_table_util_ratio;
        if !(ratio.is_finite() && ratio > 0.0) {
            return Err(Error::invalid_argument(format!(
                "data_block_hash_table_util_ratio {ratio} must be a finite number above 0"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
