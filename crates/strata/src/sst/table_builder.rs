//! Writes a table file from internal keys added in increasing order.
//!
//! Blocks are written in file order: data blocks as they fill, then the
//! filter, index, properties and metaindex blocks and the footer on
//! `finish`. Not thread-safe; one builder per output file.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::compression::{compress_block, CompressionType};
use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::key::{
    extract_user_key, parse_internal_key, Comparator, InternalKeyComparator, ValueKind,
};
use crate::limits::{KEY_SIZE_BYTES_MAX, VALUE_SIZE_BYTES_MAX};

use super::block::BlockBuilder;
use super::block_property::{BlockPropertiesBuilder, RunStart};
use super::filter::{filter_hash, BloomFilterBuilder};
use super::format::{
    put_block_trailer, BlockHandle, Footer, BLOCK_TRAILER_BYTES, FORMAT_VERSION,
    FORMAT_VERSION_INTERNAL_KEY_INDEX,
};
use super::index::encode_index_value;
use super::{
    DataBlockIndexType, TableOptions, TableProperties, FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME,
    RANGE_DEL_BLOCK_NAME,
};
use crate::range_del::{self, RangeTombstone};

/// Builds one table file.
pub struct TableBuilder {
    opts: TableOptions,
    icmp: InternalKeyComparator,
    file: Box<dyn WritableFile>,
    file_name: Arc<str>,
    /// Bytes written so far.
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    /// The same entries under the separators' user keys, while no user key
    /// has entries in two blocks (`None` from the first that has).
    user_index_block: Option<BlockBuilder>,
    filter: Option<BloomFilterBuilder>,
    /// Per-block properties: user collectors and the single prefix.
    block_props: BlockPropertiesBuilder,
    /// The properties of the block awaiting its index entry.
    pending_props: Vec<(u32, Vec<u8>)>,
    last_key: Vec<u8>,
    /// Handle of the last data block, whose index entry waits for the next
    /// key so that the separator can be short.
    pending_handle: Option<BlockHandle>,
    props: TableProperties,
    compressed: Vec<u8>,
    scratch: Vec<u8>,
    /// Range deletions for the range-deletion block, in its order.
    range_dels: Vec<RangeTombstone>,
    finished: bool,
}

impl std::fmt::Debug for TableBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableBuilder")
            .field("file", &self.file_name)
            .field("offset", &self.offset)
            .field("num_entries", &self.props.num_entries)
            .finish()
    }
}

impl TableBuilder {
    /// A builder writing to `file`, named `file_name` in errors.
    pub fn new(
        opts: TableOptions,
        file: Box<dyn WritableFile>,
        file_name: impl Into<Arc<str>>,
    ) -> Result<TableBuilder> {
        opts.validate()?;
        let filter = (opts.bloom_bits_per_key > 0.0)
            .then(|| BloomFilterBuilder::new(opts.bloom_bits_per_key));
        // A hash of the bytes stands in for key equality only if the
        // comparator never equates byte-different keys.
        let data_block_index_type = match opts.data_block_index_type {
            DataBlockIndexType::BinaryAndHash
                if !opts.comparator.can_keys_with_different_bytes_be_equal() =>
            {
                DataBlockIndexType::BinaryAndHash
            }
            _ => DataBlockIndexType::BinarySearch,
        };
        let data_block = match data_block_index_type {
            DataBlockIndexType::BinaryAndHash => BlockBuilder::with_hash_index(
                opts.block_restart_interval,
                opts.data_block_hash_table_util_ratio,
            ),
            DataBlockIndexType::BinarySearch => BlockBuilder::new(opts.block_restart_interval),
        };
        let props = TableProperties {
            format_version: FORMAT_VERSION,
            compression: opts.compression.name().to_string(),
            index_type: "binary_search".to_string(),
            data_block_index_type: data_block_index_type.name().to_string(),
            filter_policy: if filter.is_some() {
                FILTER_BLOCK_NAME.to_string()
            } else {
                String::new()
            },
            filter_millibits_per_key: if filter.is_some() {
                (opts.bloom_bits_per_key * 1000.0) as u64
            } else {
                0
            },
            comparator: opts.comparator.name().to_string(),
            prefix_extractor_name: match &opts.prefix_extractor {
                Some(t) => t.name().to_string(),
                None => String::new(),
            },
            // Without a prefix in the filter, it holds whole keys.
            whole_key_filtering: opts.whole_key_filtering || opts.prefix_extractor.is_none(),
            ..TableProperties::default()
        };
        let block_props = BlockPropertiesBuilder::new(
            &opts.block_property_collectors,
            opts.prefix_extractor.is_some(),
        );
        Ok(TableBuilder {
            icmp: InternalKeyComparator::new(opts.comparator.clone()),
            data_block,
            index_block: BlockBuilder::new(opts.index_block_restart_interval),
            user_index_block: Some(BlockBuilder::new(opts.index_block_restart_interval)),
            opts,
            file,
            file_name: file_name.into(),
            offset: 0,
            filter,
            block_props,
            pending_props: Vec::new(),
            last_key: Vec::new(),
            pending_handle: None,
            props,
            compressed: Vec::new(),
            scratch: Vec::new(),
            range_dels: Vec::new(),
            finished: false,
        })
    }

    /// Records a user property in the properties block.
    /// Records the merge operator of the writing database.
    pub(crate) fn set_merge_operator(&mut self, name: &str) {
        self.props.merge_operator = name.to_string();
    }

    /// Adds a user property.
    pub fn add_user_property(&mut self, name: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.props.user.insert(name.into(), value.into());
    }

    /// Adds an entry. `ikey` must be a valid internal key greater than every
    /// key added before.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if self.finished {
            return Err(Error::invalid_argument("TableBuilder::add after finish"));
        }
        let Some(parsed) = parse_internal_key(ikey) else {
            return Err(Error::invalid_argument(
                "TableBuilder::add: not an internal key",
            ));
        };
        if parsed.user_key.len() > KEY_SIZE_BYTES_MAX || value.len() > VALUE_SIZE_BYTES_MAX {
            return Err(Error::invalid_argument(format!(
                "entry of {}-byte key and {}-byte value exceeds the limits ({KEY_SIZE_BYTES_MAX}, {VALUE_SIZE_BYTES_MAX})",
                parsed.user_key.len(),
                value.len()
            )));
        }
        if self.props.num_entries > 0 && self.icmp.compare(&self.last_key, ikey) != Ordering::Less {
            return Err(Error::invalid_argument(
                "TableBuilder::add: keys out of order",
            ));
        }
        if self.block_almost_full(ikey, value) {
            self.flush_data_block()?;
        }
        if let Some(handle) = self.pending_handle.take() {
            // A user key with entries on both sides of a block boundary
            // needs a sequence number in its separator: from here on the
            // table's index is of internal keys.
            if self.user_index_block.is_some()
                && (self.icmp.user_comparator())
                    .compare(extract_user_key(&self.last_key), parsed.user_key)
                    == Ordering::Equal
            {
                self.user_index_block = None;
            }
            self.scratch.clear();
            self.scratch.extend_from_slice(&self.last_key);
            self.icmp.find_shortest_separator(&mut self.scratch, ikey);
            self.add_index_entry(handle);
        }
        // One hash serves the filter and the data block's hash index.
        let hash = filter_hash(parsed.user_key);
        let prefix = (self.opts.prefix_extractor.as_ref()).and_then(|t| t.prefix(parsed.user_key));
        let mut new_run = RunStart::default();
        if !self.block_props.is_empty() {
            let v = if parsed.kind == ValueKind::Deletion {
                &[][..]
            } else {
                value
            };
            new_run = self.block_props.add(parsed.user_key, v, prefix);
            if new_run.restart {
                self.data_block.start_restart_interval();
            }
        }
        if let Some(filter) = &mut self.filter {
            if self.props.whole_key_filtering {
                filter.add_hash(hash);
            }
            // Keys of one prefix are adjacent: its hash goes in once per
            // run (and block), when the run starts.
            if let (Some(prefix), true) = (prefix, new_run.first) {
                filter.add_hash(filter_hash(prefix));
            }
        }
        if self.props.num_entries == 0 {
            self.props.smallest_key = ikey.to_vec();
        }
        self.props.num_entries += 1;
        match parsed.kind {
            ValueKind::Deletion => self.props.num_deletions += 1,
            ValueKind::Merge => self.props.num_merge_operands += 1,
            ValueKind::Value => {}
            ValueKind::RangeDeletion => {
                return Err(Error::invalid_argument(
                    "TableBuilder::add: range deletions go through add_range_deletion",
                ))
            }
        }
        self.props.raw_key_size += ikey.len() as u64;
        self.props.raw_value_size += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
        self.data_block.add_with_hash(ikey, value, hash);
        if self.data_block.current_size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Adds a range deletion `[start, end)` at `seq` to the table's
    /// range-deletion block. Deletions come in the block's order (start
    /// ascending, then sequence descending), may be added at any time
    /// before `finish`, and widen the table's bounds to their range.
    pub(crate) fn add_range_deletion(&mut self, t: RangeTombstone) -> Result<()> {
        if self.finished {
            return Err(Error::invalid_argument(
                "TableBuilder::add_range_deletion after finish",
            ));
        }
        if t.start.len() > KEY_SIZE_BYTES_MAX || t.end.len() > KEY_SIZE_BYTES_MAX {
            return Err(Error::invalid_argument(
                "range deletion bound exceeds the key size limit",
            ));
        }
        let ucmp = self.icmp.user_comparator();
        if ucmp.compare(&t.start, &t.end) != Ordering::Less {
            return Err(Error::invalid_argument(
                "TableBuilder::add_range_deletion: empty or reversed range",
            ));
        }
        if let Some(last) = self.range_dels.last() {
            let order = ucmp
                .compare(&last.start, &t.start)
                .then_with(|| t.seq.cmp(&last.seq));
            if order != Ordering::Less {
                return Err(Error::invalid_argument(
                    "TableBuilder::add_range_deletion: deletions out of order",
                ));
            }
        }
        self.range_dels.push(t);
        Ok(())
    }

    /// Adds the index entry for `handle` under the separator in `scratch`.
    fn add_index_entry(&mut self, handle: BlockHandle) {
        let mut value = Vec::with_capacity(16);
        let props: Vec<(u32, &[u8])> = self
            .pending_props
            .iter()
            .map(|(t, b)| (*t, &b[..]))
            .collect();
        encode_index_value(&mut value, handle, &props);
        self.pending_props.clear();
        self.index_block.add(&self.scratch, &value);
        // The separator's user key separates the blocks' user keys: it is
        // at or after the block's last one (the internal separator's user
        // key is that one or a shortened key between the two), and before
        // the next block's first, which is another user key.
        if let Some(user_index) = &mut self.user_index_block {
            user_index.add(extract_user_key(&self.scratch), &value);
        }
    }

    /// True when the data block should be closed before `ikey` and
    /// `value` (RocksDB's flush-by-size policy): it is more than `100 -
    /// block_size_deviation` percent full and the entry would take it past
    /// the block size. Blocks then end at most an entry's size short of the
    /// block size, as RocksDB's do, instead of up to an entry past it.
    fn block_almost_full(&self, ikey: &[u8], value: &[u8]) -> bool {
        // 0..=100: `validate` checked it when the builder was made.
        let deviation = self.opts.block_size_deviation as usize;
        if deviation == 0 || self.data_block.is_empty() {
            return false;
        }
        let block_size = self.opts.block_size;
        let limit = (block_size * (100 - deviation)).div_ceil(100);
        self.data_block.current_size_estimate() > limit
            && self.data_block.size_estimate_after(ikey, value) > block_size
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        debug_assert!(self.pending_handle.is_none());
        let compression = self.opts.compression;
        // Take the builder out so its bytes can be written while `self` is
        // borrowed mutably; it goes back reset, keeping its allocations.
        let mut block = std::mem::replace(&mut self.data_block, BlockBuilder::new(1));
        let handle = self.write_block(block.finish(), compression);
        if block.finished_index_type() == Some(DataBlockIndexType::BinaryAndHash) {
            self.props.num_data_blocks_with_hash_index += 1;
        }
        block.reset();
        self.data_block = block;
        let handle = handle?;
        self.props.num_data_blocks += 1;
        self.props.data_size += handle.size + BLOCK_TRAILER_BYTES as u64;
        self.pending_handle = Some(handle);
        self.pending_props = self.block_props.finish_block();
        Ok(())
    }

    /// Compresses (if asked and worth it) and appends a block with its trailer.
    fn write_block(&mut self, raw: &[u8], compression: CompressionType) -> Result<BlockHandle> {
        let used = compress_block(compression, raw, &mut self.compressed);
        let contents: &[u8] = if used == CompressionType::None {
            raw
        } else {
            &self.compressed
        };
        let handle = BlockHandle {
            offset: self.offset,
            size: contents.len() as u64,
        };
        let mut trailer = Vec::with_capacity(BLOCK_TRAILER_BYTES);
        put_block_trailer(&mut trailer, contents, used);
        self.file.append(contents)?;
        self.file.append(&trailer)?;
        self.offset += (contents.len() + BLOCK_TRAILER_BYTES) as u64;
        Ok(handle)
    }

    /// Writes the remaining blocks and the footer and flushes the file (the
    /// caller syncs it). Returns the table's properties.
    pub fn finish(&mut self) -> Result<TableProperties> {
        if self.finished {
            return Err(Error::invalid_argument("TableBuilder::finish called twice"));
        }
        self.finished = true;
        self.flush_data_block()?;
        if let Some(handle) = self.pending_handle.take() {
            self.scratch.clear();
            self.scratch.extend_from_slice(&self.last_key);
            self.icmp.find_short_successor(&mut self.scratch);
            self.add_index_entry(handle);
        }
        self.props.block_property_collectors = self.block_props.names();
        self.props.block_properties = self.block_props.finish_table().into_iter().collect();
        let mut meta: Vec<(&str, BlockHandle)> = Vec::new();
        if let Some(mut filter) = self.filter.take() {
            let bytes = filter.finish();
            let handle = self.write_block(&bytes, CompressionType::None)?;
            self.props.filter_size = handle.size + BLOCK_TRAILER_BYTES as u64;
            meta.push((FILTER_BLOCK_NAME, handle));
        }
        self.props.largest_key = self.last_key.clone();
        if !self.range_dels.is_empty() {
            let bytes = range_del::encode_block(&self.range_dels);
            let handle = self.write_block(&bytes, CompressionType::None)?;
            meta.push((RANGE_DEL_BLOCK_NAME, handle));
            self.props.num_range_deletions = self.range_dels.len() as u64;
            // The table's bounds cover its ranges too.
            let (lo, hi) = range_del::bounds(&self.range_dels, &**self.icmp.user_comparator())
                .expect("range deletions present");
            if self.props.num_entries == 0
                || self.icmp.compare(lo.encoded(), &self.props.smallest_key) == Ordering::Less
            {
                self.props.smallest_key = lo.encoded().to_vec();
            }
            if self.props.num_entries == 0
                || self.icmp.compare(hi.encoded(), &self.props.largest_key) == Ordering::Greater
            {
                self.props.largest_key = hi.encoded().to_vec();
            }
        }
        // User-key separators when no user key spans two blocks (RocksDB's
        // format version 3 and up does the same): 8 bytes less per entry.
        let internal_index = std::mem::replace(&mut self.index_block, BlockBuilder::new(1));
        let (mut index, user_keys) = match self.user_index_block.take() {
            Some(user_index) => (user_index, true),
            None => (internal_index, false),
        };
        self.props.index_key_is_user_key = user_keys;
        self.props.format_version = if user_keys {
            FORMAT_VERSION
        } else {
            FORMAT_VERSION_INTERNAL_KEY_INDEX
        };
        let index_handle = self.write_block(index.finish(), CompressionType::None)?;
        self.props.index_size = index_handle.size + BLOCK_TRAILER_BYTES as u64;
        self.props.creation_time = TableProperties::now_secs();
        let props = self.props.encode();
        let props_handle = self.write_block(&props, CompressionType::None)?;
        meta.push((PROPERTIES_BLOCK_NAME, props_handle));
        meta.sort_by(|a, b| a.0.cmp(b.0));
        let mut metaindex = BlockBuilder::new(1);
        for (name, handle) in meta {
            let mut value = Vec::new();
            handle.encode_to(&mut value);
            metaindex.add(name.as_bytes(), &value);
        }
        let metaindex_handle = self.write_block(metaindex.finish(), CompressionType::None)?;
        let footer = Footer {
            metaindex: metaindex_handle,
            index: index_handle,
            format_version: self.props.format_version,
        }
        .encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        self.file.flush()?;
        debug_assert_eq!(self.offset, self.file.size());
        Ok(self.props.clone())
    }

    /// Syncs the file to stable storage (call after `finish`).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Bytes written so far plus the data block being filled: what the file
    /// would hold if finished now, minus the metadata blocks.
    pub fn estimated_file_size(&self) -> u64 {
        let pending = if self.data_block.is_empty() {
            0
        } else {
            self.data_block.current_size_estimate()
        };
        self.offset + pending as u64
    }

    /// Bytes written to the file so far.
    pub fn file_size(&self) -> u64 {
        self.offset
    }
}
