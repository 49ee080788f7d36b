//! Opens a table file and answers point lookups. Open reads the footer, the
//! metaindex, the index, the filter and the properties; data blocks are read
//! (and their checksums verified) on each access.
//!
//! A `TableReader` is immutable after open and safe to share across threads.

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::cache::{
    block_charge, data_block_charge, BlockCache, BlockCacheKey, CachedBlock, CachedRepr,
};
use crate::env::{read_direct_batch, DirectRead, RandomAccessFile};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{
    extract_user_key, parse_entry_key, BuiltinOrder, BytewiseComparator, Comparator,
    InternalKeyComparator, ParsedInternalKey, SequenceNumber, SliceTransform, ValueKind,
};
use crate::util::coding::Decoder;

use super::block::Block;
use super::block_property::{
    BlockPropertyFilter, ResolvedFilters, PREFIX_RESTARTS_TAG, SINGLE_PREFIX_TAG,
};
use super::filter::{filter_hash, BloomFilter};
use super::format::{
    check_block_handle, check_stored, decode_data_block, decode_stored, read_block,
    read_data_block, BlockHandle, Checked, FetchedBlock, Footer, BLOCK_TRAILER_BYTES, FOOTER_BYTES,
};
use super::index::IndexValue;
use super::index_array::IndexArray;
use super::readahead::Readahead;
use super::{
    TableIterator, TableProperties, FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME, RANGE_DEL_BLOCK_NAME,
};
use crate::range_del::{self, RangeTombstone};

mod meta;
mod multi_get;

use meta::Meta;
pub(crate) use meta::{MetaPlacement, TableIndex};
pub(crate) use multi_get::{MultiGetScratch, TableProbe};

/// A visitor of a key's versions, newest first (internal key parts, value):
/// true to go on to the next version.
pub(crate) type VersionVisitor<'a> = dyn FnMut(ParsedInternalKey<'_>, &[u8]) -> bool + 'a;

/// The newest entry for a user key at or below a lookup's sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    /// Sequence number of the entry.
    pub sequence: SequenceNumber,
    /// Value or deletion.
    pub kind: ValueKind,
    /// The value, a slice of the block it was read from (no copy).
    pub value: Bytes,
}

/// An open table file.
pub struct TableReader {
    file: Arc<dyn RandomAccessFile>,
    name: Arc<str>,
    icmp: Arc<dyn Comparator>,
    user_cmp: Arc<dyn Comparator>,
    /// `user_cmp.builtin_order()`, asked once at open rather than through
    /// the trait object at every block a lookup reads.
    order: Option<BuiltinOrder>,
    footer: Footer,
    /// The index block and its decoded arrays, here or in the cache.
    index: Meta<Arc<TableIndex>>,
    /// `None`: the table has no filter.
    filter: Option<Meta<BloomFilter>>,
    /// The reader's prefix extractor when the table was written with one
    /// of the same name: its filter (if any) holds that extractor's
    /// prefixes and its index entries its single-prefix properties.
    prefix_filter: Option<Arc<SliceTransform>>,
    props: TableProperties,
    /// The range-deletion block's contents.
    range_dels: Vec<RangeTombstone>,
    /// The block cache and this reader's key space in it.
    cache: Option<(Arc<BlockCache>, u64)>,
    /// The index and filter were placed in the block cache (pinned or
    /// not): the cache is charged for them, not the reader.
    meta_in_cache: bool,
    /// Data blocks go into the block cache as stored (compressed, when
    /// the table compresses them) and are decompressed on every hit: set
    /// for a file read with direct I/O, whose blocks no page cache holds
    /// ([`TableReader::with_stored_blocks_cached`]).
    cache_stored: bool,
}

/// Gives each opened reader its own key space in a (possibly shared) cache.
fn next_cache_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl std::fmt::Debug for TableReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableReader")
            .field("file", &self.name)
            .field("size", &self.file.size())
            .field("num_entries", &self.props.num_entries)
            .finish()
    }
}

impl TableReader {
    /// Opens the table in `file` (named `name` in errors), whose keys are
    /// ordered by `comparator`.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        name: impl Into<Arc<str>>,
        comparator: Arc<dyn Comparator>,
    ) -> Result<TableReader> {
        Self::open_with_cache(file, name, comparator, None)
    }

    /// Opens a table whose data blocks go through `cache`.
    pub fn open_with_cache(
        file: Arc<dyn RandomAccessFile>,
        name: impl Into<Arc<str>>,
        comparator: Arc<dyn Comparator>,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<TableReader> {
        Self::open_placed(file, name, comparator, cache, MetaPlacement::Reader, None)
    }

    /// Opens a table whose data blocks go through `cache`, and its index
    /// and filter too unless `placement` is [`MetaPlacement::Reader`] (or
    /// there is no cache). Both are read and checked here either way.
    pub(crate) fn open_placed(
        file: Arc<dyn RandomAccessFile>,
        name: impl Into<Arc<str>>,
        comparator: Arc<dyn Comparator>,
        cache: Option<Arc<BlockCache>>,
        placement: MetaPlacement,
        prefix_extractor: Option<Arc<SliceTransform>>,
    ) -> Result<TableReader> {
        // What an open reads stays with the reader: always checked.
        let _verify = super::format::ChecksumMode::set(true);
        let name: Arc<str> = name.into();
        let size = file.size();
        if size < FOOTER_BYTES as u64 {
            return Err(Error::corruption(
                &*name,
                0,
                format!("file of {size} bytes is too short to be a table (footer is {FOOTER_BYTES} bytes)"),
            ));
        }
        let footer_offset = size - FOOTER_BYTES as u64;
        let mut buf = [0u8; FOOTER_BYTES];
        file.read_exact_at(footer_offset, &mut buf)?;
        let footer = Footer::decode(&buf, &name, footer_offset)?;

        let metaindex = Block::new(
            read_block(&*file, &name, footer.metaindex)?,
            name.clone(),
            footer.metaindex.offset,
        )?;
        let mut props_handle = None;
        let mut filter_handle = None;
        let mut range_del_handle = None;
        let mut it = metaindex.iter(Arc::new(BytewiseComparator));
        it.seek_to_first();
        while it.valid() {
            let mut dec = Decoder::new(it.value());
            let handle = BlockHandle::decode_from(&mut dec)
                .filter(|_| dec.is_empty())
                .ok_or_else(|| {
                    Error::corruption(
                        &*name,
                        footer.metaindex.offset,
                        "metaindex entry holds a malformed block handle",
                    )
                })?;
            match it.key() {
                k if k == PROPERTIES_BLOCK_NAME.as_bytes() => props_handle = Some(handle),
                k if k == FILTER_BLOCK_NAME.as_bytes() => filter_handle = Some(handle),
                k if k == RANGE_DEL_BLOCK_NAME.as_bytes() => range_del_handle = Some(handle),
                _ => {}
            }
            it.next();
        }
        it.status()?;
        let Some(props_handle) = props_handle else {
            return Err(Error::corruption(
                &*name,
                footer.metaindex.offset,
                "metaindex has no properties block",
            ));
        };
        let props_block = Block::new(
            read_block(&*file, &name, props_handle)?,
            name.clone(),
            props_handle.offset,
        )?;
        let props = TableProperties::decode(&props_block)?;
        props.check_comparator(&name, &*comparator)?;
        let range_dels = match range_del_handle {
            Some(h) => {
                let block = Block::new(read_block(&*file, &name, h)?, name.clone(), h.offset)?;
                range_del::decode_block(&block, &comparator, &name, h.offset)?
            }
            None => Vec::new(),
        };
        let cache = cache.map(|c| (c, next_cache_id()));
        let filter = match filter_handle {
            Some(h) => {
                let f = BloomFilter::new(read_block(&*file, &name, h)?, &name, h.offset)?;
                let bytes = f.size_bytes();
                Some(meta::place(
                    f,
                    bytes,
                    h,
                    placement,
                    cache.as_ref(),
                    CachedRepr::Filter,
                ))
            }
            None => None,
        };
        // A filter of another extractor's prefixes answers nothing: every
        // prefix probe then says "may contain".
        let prefix_filter = prefix_extractor.filter(|t| {
            !props.prefix_extractor_name.is_empty() && t.name() == props.prefix_extractor_name
        });
        let icmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(comparator.clone()));
        let order = comparator.builtin_order();
        let index_user_keys = props.index_key_is_user_key;
        if index_user_keys && footer.format_version < 2 {
            return Err(Error::corruption(
                &*name,
                footer.index.offset,
                format!(
                    "index of user keys in a table of format version {}",
                    footer.format_version
                ),
            ));
        }
        let index_cmp = if index_user_keys {
            comparator.clone()
        } else {
            icmp.clone()
        };
        let index = Arc::new(TableIndex::read(
            &*file,
            &name,
            footer.index,
            index_cmp,
            order,
            index_user_keys,
            placement != MetaPlacement::Reader,
        )?);
        let meta_in_cache = cache.is_some() && placement != MetaPlacement::Reader;
        let bytes = index.memory_bytes();
        let index = meta::place(
            index,
            bytes,
            footer.index,
            placement,
            cache.as_ref(),
            CachedRepr::Index,
        );
        Ok(TableReader {
            file,
            name,
            icmp,
            order,
            user_cmp: comparator,
            footer,
            index,
            filter,
            prefix_filter,
            props,
            range_dels,
            cache,
            meta_in_cache,
            cache_stored: false,
        })
    }

    /// Caches data blocks as stored (compressed) if `on` and this table's
    /// blocks come from a file read with direct I/O into a block cache
    /// ([`TableReader::reads_blocks_directly`]): with no page cache below
    /// it, the block cache then holds about as many more blocks as the
    /// compression saves, for a decompression on every hit.
    pub(crate) fn with_stored_blocks_cached(mut self, on: bool) -> TableReader {
        self.cache_stored = on && self.reads_blocks_directly();
        self
    }

    /// The table's range deletions.
    pub(crate) fn range_deletions(&self) -> &[RangeTombstone] {
        &self.range_dels
    }

    /// The table's properties.
    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// Heap bytes this reader holds outside the block cache, as RocksDB's
    /// `ApproximateMemoryUsage` of a table reader: the index (block, and
    /// its arrays once built) and the filter when the reader keeps them,
    /// and the range deletions. An index or filter placed in the cache is
    /// the cache's, pinned (also held here) or not, as in RocksDB; a pinned
    /// copy the cache has evicted is then counted by neither (at most the
    /// L0 tables' ones, see `meta.rs`).
    pub(crate) fn approximate_memory_usage(&self) -> usize {
        let index = match &self.index {
            Meta::Held(index) if !self.meta_in_cache => index.memory_bytes(),
            Meta::Held(_) | Meta::Cached(_) => 0,
        };
        let filter = match &self.filter {
            Some(Meta::Held(filter)) if !self.meta_in_cache => filter.size_bytes(),
            Some(Meta::Held(_) | Meta::Cached(_)) | None => 0,
        };
        let range_dels: usize = self
            .range_dels
            .iter()
            .map(|t| std::mem::size_of::<RangeTombstone>() + t.start.capacity() + t.end.capacity())
            .sum();
        index + filter + range_dels
    }

    /// The file name used in errors.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The table's footer.
    pub(crate) fn footer(&self) -> &Footer {
        &self.footer
    }

    /// The internal-key comparator ordering the table.
    pub(crate) fn internal_comparator(&self) -> &Arc<dyn Comparator> {
        &self.icmp
    }

    /// False when the filter proves that no key with this hash
    /// ([`super::filter::filter_hash`] of the user key) is in the table;
    /// true otherwise, also when a filter kept in the block cache could not
    /// be read again (a lookup then reads the data and reports the error).
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        if !self.props.whole_key_filtering {
            return true;
        }
        match self.filter() {
            Ok(f) => f.is_none_or(|f| f.may_contain_hash(hash)),
            Err(_) => true,
        }
    }

    /// The hash a point lookup of `user_key` (whose whole-key hash is
    /// `whole_hash`) probes the filter with, or `None` when the filter
    /// cannot answer for it (prefixes of another extractor, or a key
    /// outside the extractor's domain).
    #[inline]
    pub(crate) fn probe_hash(&self, user_key: &[u8], whole_hash: u64) -> Option<u64> {
        if self.props.whole_key_filtering {
            return Some(whole_hash);
        }
        // Prefixes only: of the reader's extractor, or of no use.
        self.prefix_filter
            .as_ref()?
            .prefix(user_key)
            .map(filter_hash)
    }

    /// False when the filter proves that no key with prefix `prefix` (of
    /// the reader's extractor) is in the table; true otherwise, also when
    /// the filter holds no such prefixes or could not be read again.
    pub fn may_contain_prefix(&self, prefix: &[u8]) -> bool {
        if self.prefix_filter.is_none() {
            return true;
        }
        match self.filter() {
            Ok(f) => f.is_none_or(|f| f.may_contain_hash(filter_hash(prefix))),
            Err(_) => true,
        }
    }

    /// The filters of a read, resolved against this table's collectors.
    pub(crate) fn resolve_filters(
        &self,
        filters: &[Arc<dyn BlockPropertyFilter>],
    ) -> ResolvedFilters {
        if filters.is_empty() {
            return ResolvedFilters::default();
        }
        ResolvedFilters::resolve(
            filters,
            &self.props.block_property_collectors,
            &self.props.block_properties,
        )
    }

    /// The prefix every key of the data block of `index_value` shares, when
    /// the table recorded it for the reader's extractor.
    pub(crate) fn block_single_prefix<'v>(&self, index_value: &IndexValue<'v>) -> Option<&'v [u8]> {
        self.prefix_filter.as_ref()?;
        index_value.property(SINGLE_PREFIX_TAG)
    }

    /// True when every prefix change in the data block of `index_value` is
    /// a restart point, recorded for the reader's extractor.
    pub(crate) fn block_prefix_restarts(&self, index_value: &IndexValue<'_>) -> bool {
        self.prefix_filter.is_some() && index_value.property(PREFIX_RESTARTS_TAG).is_some()
    }

    /// Hints the CPU to load the filter line for `hash`.
    pub fn prefetch_filter(&self, hash: u64) {
        if let Ok(Some(f)) = self.filter() {
            f.prefetch(hash);
        }
    }

    /// [`TableReader::read_data_block`] for a scan: a block not in the
    /// cache comes through `readahead` (read ahead once the scan's reads
    /// are sequential), and one found there still counts in its pattern.
    pub(crate) fn read_data_block_ahead(
        &self,
        handle: BlockHandle,
        fill_cache: bool,
        readahead: &mut Readahead,
    ) -> Result<Block> {
        let mut read = false;
        let block = self.cached_or_read(
            handle,
            fill_cache,
            |_| {},
            |t| {
                read = true;
                let keep = t.keeps_stored(fill_cache);
                readahead.read(&t.file, &t.name, handle, keep, t.props.data_size)
            },
        );
        if !read {
            readahead.visit(handle);
        }
        block
    }

    /// The data block at `handle`, from the cache or read and checked
    /// from the file (and then cached if `fill_cache`).
    #[cfg(test)]
    pub(crate) fn read_data_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Block> {
        self.read_data_block_with(handle, fill_cache, |_| {})
    }

    /// [`TableReader::read_data_block`], calling `on_hit` with the block on
    /// a cache hit before it is cloned (see [`LruCache::get_with`]): a point
    /// lookup uses it to start loading the lines it reads first
    /// ([`Block::prefetch_for_get`]).
    ///
    /// [`LruCache::get_with`]: crate::cache::LruCache::get_with
    fn read_data_block_with(
        &self,
        handle: BlockHandle,
        fill_cache: bool,
        on_hit: impl FnOnce(&Block),
    ) -> Result<Block> {
        self.cached_or_read(handle, fill_cache, on_hit, |t| {
            read_data_block(&*t.file, &t.name, handle, t.keeps_stored(fill_cache))
        })
    }

    /// The data blocks at `handles` (at most
    /// [`GET_MANY_MAX`](crate::cache::GET_MANY_MAX)),
    /// into `out`: [`TableReader::read_data_block_with`] of each, with the
    /// cache's lookups made together ([`LruCache::get_many_with`], whose
    /// cache misses overlap) and `on_hit(i, block)` for each hit before any
    /// block is cloned. Blocks the cache lacks are then read one by one.
    ///
    /// [`LruCache::get_many_with`]: crate::cache::LruCache::get_many_with
    pub(crate) fn read_data_blocks_with(
        &self,
        handles: &[BlockHandle],
        fill_cache: bool,
        mut on_hit: impl FnMut(usize, &Block),
        out: &mut Vec<Result<Block>>,
    ) {
        const N: usize = crate::cache::GET_MANY_MAX;
        debug_assert!(handles.len() <= N);
        let mut hits: [Option<CachedBlock>; N] = Default::default();
        let hits = &mut hits[..handles.len()];
        if let Some((cache, id)) = &self.cache {
            let keys: SmallVec<[BlockCacheKey; N]> =
                handles.iter().map(|h| (*id, h.offset)).collect();
            cache.get_many_with(
                &keys,
                |i, c| {
                    if let Some(b) = c.data_block() {
                        on_hit(i, b)
                    }
                },
                hits,
            );
        }
        out.extend(
            handles
                .iter()
                .zip(hits)
                .map(|(&handle, hit)| match hit.take() {
                    Some(CachedBlock(CachedRepr::Data(block))) => Ok(block),
                    Some(CachedBlock(CachedRepr::Stored(stored))) => {
                        self.block_from_stored(handle, &stored)
                    }
                    // Not cached (or, never written so, not a data block there).
                    _ => {
                        let keep = self.keeps_stored(fill_cache);
                        let fetched = read_data_block(&*self.file, &self.name, handle, keep)?;
                        self.block_from(handle, fetched, fill_cache)
                    }
                }),
        );
    }

    /// The data block at `handle` from the cache (calling `on_hit` with it
    /// before it is cloned, when the cache holds it decompressed), or from
    /// `read` (checked bytes), then cached if `fill_cache`.
    fn cached_or_read(
        &self,
        handle: BlockHandle,
        fill_cache: bool,
        on_hit: impl FnOnce(&Block),
        read: impl FnOnce(&Self) -> Result<FetchedBlock>,
    ) -> Result<Block> {
        if let Some((cache, id)) = &self.cache {
            let hit = cache.get_with(&(*id, handle.offset), |c| {
                if let Some(b) = c.data_block() {
                    on_hit(b)
                }
            });
            match hit {
                Some(CachedBlock(CachedRepr::Data(block))) => return Ok(block),
                Some(CachedBlock(CachedRepr::Stored(stored))) => {
                    return self.block_from_stored(handle, &stored)
                }
                _ => {}
            }
        }
        self.block_from(handle, read(self)?, fill_cache)
    }

    /// Whether a block read now should be kept as stored, for the cache.
    fn keeps_stored(&self, fill_cache: bool) -> bool {
        self.cache_stored && fill_cache
    }

    /// The data block at `handle` made of `fetched` (read and checked),
    /// then cached if `fill_cache`: as stored if it was kept so, else
    /// decompressed. The half of a block read after a cache miss.
    fn block_from(
        &self,
        handle: BlockHandle,
        fetched: FetchedBlock,
        fill_cache: bool,
    ) -> Result<Block> {
        let block = Block::new(fetched.data, self.name.clone(), handle.offset)?;
        if fill_cache {
            match fetched.stored {
                Some(stored) => self.cache_stored_block(handle, stored),
                None => self.cache_block(&block),
            }
        }
        Ok(block)
    }

    /// The data block at `handle` from `stored`, the cache's copy of it
    /// as stored: decompressed again, not cached. A copy that does not
    /// decompress into a block (one read ahead is cached checked but not
    /// decompressed) is `Corruption`, and leaves the cache, so that the
    /// next read of the block goes to the file again.
    fn block_from_stored(&self, handle: BlockHandle, stored: &[u8]) -> Result<Block> {
        decode_stored(stored, &self.name, handle.offset)
            .and_then(|data| Block::new(data, self.name.clone(), handle.offset))
            .inspect_err(|_| {
                if let Some((cache, id)) = &self.cache {
                    cache.erase(&(*id, handle.offset));
                }
            })
    }

    /// Puts data block `handle` as stored (`stored`: its compressed
    /// contents and type byte) in the block cache, charged by its heap.
    fn cache_stored_block(&self, handle: BlockHandle, stored: Bytes) {
        if let Some((cache, id)) = &self.cache {
            let charge = data_block_charge(stored.len());
            cache.insert(
                (*id, handle.offset),
                CachedBlock(CachedRepr::Stored(stored)),
                charge,
            );
        }
    }

    /// Puts data block `block` (read from this table) in the block cache,
    /// if the table has one.
    fn cache_block(&self, block: &Block) {
        if let Some((cache, id)) = &self.cache {
            let key = (*id, block.offset());
            cache.insert(key, block.clone().into(), block_charge(block));
        }
    }

    /// True if a seek that lands on data block `handle` would read it from
    /// a file read with direct I/O ([`RandomAccessFile::direct_io`]): the
    /// block cache lacks it (counted as a miss: [`SeekReads`] reads it
    /// next, and the seek's own lookup then hits) and its handle is one
    /// the read would accept.
    pub(crate) fn reads_directly(&self, handle: BlockHandle) -> bool {
        self.reads_blocks_directly() && self.cache_lacks(handle)
    }

    /// True if this table's blocks come from a file read with direct I/O
    /// into a block cache.
    pub(crate) fn reads_blocks_directly(&self) -> bool {
        self.cache.is_some() && self.file.direct_io().is_some()
    }

    /// The rest of [`reads_directly`](Self::reads_directly): `handle` is
    /// one a read would accept and the cache lacks its block (counted as
    /// a miss).
    fn cache_lacks(&self, handle: BlockHandle) -> bool {
        let Some((cache, id)) = &self.cache else {
            return false;
        };
        check_block_handle(&self.name, handle, self.file.size()).is_ok()
            && !cache.cached_or_count_miss(&(*id, handle.offset))
    }

    /// [`SeekReads`] for a point lookup: adds the data block that
    /// [`get_opt`](Self::get_opt) of `lookup` would read first, if the
    /// filter lets the key through and [`reads_directly`](Self::reads_directly)
    /// approves it. Errors are left to the lookup. True if that block is
    /// in the cache already: nothing to read ahead.
    pub(crate) fn plan_get(
        self: &Arc<Self>,
        lookup: &[u8],
        hash: u64,
        reads: &mut SeekReads,
    ) -> bool {
        if !self.reads_blocks_directly() {
            return false;
        }
        if !matches!(
            self.filter_excludes(extract_user_key(lookup), hash),
            Ok(false)
        ) {
            return false;
        }
        let Ok(index) = self.index() else {
            return false;
        };
        let Ok(array) = index.array() else {
            return false;
        };
        let first = array.lower_bound(lookup);
        if first >= array.len() {
            return false;
        }
        let handle = array.handle(first);
        // A block the previous key of a batch planned is neither looked
        // up (nor counted as a miss) nor read again.
        if reads.is_last(self, handle) {
            return false;
        }
        if !self.cache_lacks(handle) {
            return true;
        }
        reads.push(self.clone(), handle);
        false
    }

    /// Caches data block `handle` from `raw`, its bytes and trailer read
    /// ahead for a seek. A block that does not check out is left alone: the
    /// seek reads it again and reports the error.
    /// A table that caches blocks as stored only checks the block here
    /// and caches the copy: the seek decompresses it when it reads it.
    fn cache_read_ahead(&self, handle: BlockHandle, raw: &[u8]) {
        if !self.cache_stored {
            let _ = decode_data_block(raw, &self.name, handle, false)
                .and_then(|f| self.block_from(handle, f, true));
            return;
        }
        match check_stored(raw, &self.name, handle) {
            Ok(Checked::Stored(stored)) => self.cache_stored_block(handle, stored),
            Ok(Checked::Plain(f)) => {
                let _ = self.block_from(handle, f, true);
            }
            Err(_) => {}
        }
    }

    /// An iterator over data block `block` of this table, comparing
    /// statically when the user comparator is a built-in order.
    pub(crate) fn data_block_iter(&self, block: Block) -> super::block::BlockIter {
        block
            .into_block_iter(self.icmp.clone())
            .with_internal_order(self.order)
    }

    /// An iterator over the index block (read again if it was evicted from
    /// the block cache, which can fail).
    pub(crate) fn index_iter(&self) -> Result<super::block::BlockIter> {
        let index = self.index()?;
        let block = &index.block;
        Ok(if self.props.index_key_is_user_key {
            block.iter(self.user_cmp.clone()).with_user_keys(self.order)
        } else {
            block
                .iter(self.icmp.clone())
                .with_internal_order(self.order)
        })
    }

    /// The comparator of the index's separators: the user comparator if
    /// they are user keys, else the internal-key comparator.
    pub(super) fn index_cmp(&self) -> Arc<dyn Comparator> {
        if self.props.index_key_is_user_key {
            self.user_cmp.clone()
        } else {
            self.icmp.clone()
        }
    }

    pub(crate) fn decode_index_value<'a>(
        &self,
        value: &'a [u8],
        index_offset: u64,
    ) -> Result<IndexValue<'a>> {
        IndexValue::decode(value).ok_or_else(|| {
            Error::corruption(
                &*self.name,
                index_offset,
                "index entry holds a malformed block handle",
            )
        })
    }

    /// Looks up the first entry at or after the internal key `lookup`
    /// (user key + the reader's sequence number, kind `FOR_SEEK`) and returns
    /// it if it has the same user key. `hash` is the user key's
    /// [`filter_hash`](super::filter::filter_hash); the bloom filter and the
    /// data blocks' hash indexes both use it, so it must be right.
    pub fn get(&self, lookup: &[u8], hash: u64) -> Result<Option<TableEntry>> {
        self.get_opt(lookup, hash, true)
    }

    /// [`TableReader::get`], choosing whether blocks read are cached.
    pub fn get_opt(
        &self,
        lookup: &[u8],
        hash: u64,
        fill_cache: bool,
    ) -> Result<Option<TableEntry>> {
        self.get_opt_walk(lookup, hash, fill_cache, None)
    }

    /// [`TableReader::get_opt`]; when the entry found is a merge operand
    /// and `on_merge` is given, it also visits that entry and the key's
    /// older versions after it, as [`for_each_version`](Self::for_each_version)
    /// does, from the same position: a merge read does not search the
    /// table again.
    pub(crate) fn get_opt_walk(
        &self,
        lookup: &[u8],
        hash: u64,
        fill_cache: bool,
        on_merge: Option<&mut VersionVisitor<'_>>,
    ) -> Result<Option<TableEntry>> {
        self.get_searching(lookup, hash, fill_cache, on_merge, &mut false)
    }

    /// [`TableReader::get_opt_walk`], setting `searched` if the filter let
    /// the key through, so that the lookup read the table's index and a
    /// data block.
    pub(crate) fn get_searching(
        &self,
        lookup: &[u8],
        hash: u64,
        fill_cache: bool,
        on_merge: Option<&mut VersionVisitor<'_>>,
        searched: &mut bool,
    ) -> Result<Option<TableEntry>> {
        if self.filter_excludes(extract_user_key(lookup), hash)? {
            return Ok(None);
        }
        *searched = true;
        let index = self.index()?;
        let array = index.array()?;
        let first = array.lower_bound(lookup);
        self.get_from_block(array, first, lookup, hash, fill_cache, on_merge)
    }

    /// Visits the entries of `lookup`'s user key from `lookup` on (its
    /// versions at or below the lookup's sequence number, newest first)
    /// until `visit` returns false or the key's entries end, in this block
    /// or the next ones. One filter probe, one index search and one block
    /// seek: a merge read's walk over a key's operands, which through
    /// [`get_opt`](Self::get_opt) and then an iterator took two of each.
    pub(crate) fn for_each_version(
        &self,
        lookup: &[u8],
        hash: u64,
        fill_cache: bool,
        visit: &mut VersionVisitor<'_>,
    ) -> Result<()> {
        let user_key = extract_user_key(lookup);
        if self.filter_excludes(user_key, hash)? {
            return Ok(());
        }
        let index = self.index()?;
        let array = index.array()?;
        let first = array.lower_bound(lookup);
        if first == array.len() {
            return Ok(());
        }
        let handle = array.handle(first);
        let block = self.read_data_block_with(handle, fill_cache, |b| b.prefetch_for_get(hash))?;
        let mut it = self.data_block_iter(block);
        it.seek_for_get(lookup, hash);
        self.walk_versions(array, first, it, user_key, fill_cache, visit)
    }

    /// The walk of [`for_each_version`](Self::for_each_version) from `it`,
    /// an iterator over data block `i` positioned at the first entry to
    /// visit (or past the block's end: the walk goes on in the next
    /// block).
    fn walk_versions(
        &self,
        index: &IndexArray,
        mut i: usize,
        mut it: super::block::BlockIter,
        user_key: &[u8],
        fill_cache: bool,
        visit: &mut VersionVisitor<'_>,
    ) -> Result<()> {
        loop {
            while it.valid() {
                let Some(parsed) = parse_entry_key(it.key()) else {
                    return Err(Error::corruption(
                        &*self.name,
                        index.handle(i).offset,
                        "data block holds a malformed internal key",
                    ));
                };
                if self.user_cmp.compare(parsed.user_key, user_key) != Ordering::Equal {
                    return Ok(());
                }
                if !visit(parsed, it.value()) {
                    return Ok(());
                }
                it.next();
            }
            it.status()?;
            i += 1;
            if i == index.len() {
                return Ok(());
            }
            // Every key of a later block is after the ones visited.
            let block = self.read_data_block_with(index.handle(i), fill_cache, |_| {})?;
            it = self.data_block_iter(block);
            it.seek_to_first();
        }
    }

    /// The rest of a point lookup once `index` has named data block `first`
    /// (`index.len()` if every separator is below `lookup`).
    fn get_from_block(
        &self,
        index: &IndexArray,
        first: usize,
        lookup: &[u8],
        hash: u64,
        fill_cache: bool,
        on_merge: Option<&mut VersionVisitor<'_>>,
    ) -> Result<Option<TableEntry>> {
        debug_assert_eq!(hash, super::filter::filter_hash(extract_user_key(lookup)));
        // The separator of a block is < the first key of the next block, so
        // the answer is almost always in the first block; the loop covers
        // comparators whose separators are not that tight.
        for i in first..index.len() {
            let handle = index.handle(i);
            let block =
                self.read_data_block_with(handle, fill_cache, |b| b.prefetch_for_get(hash))?;
            let mut it = self.data_block_iter(block);
            it.seek_for_get(lookup, hash);
            if let Some(found) = self.entry_at(&it, lookup, handle.offset)? {
                if let (Some(TableEntry { kind, .. }), Some(visit)) = (&found, on_merge) {
                    if *kind == ValueKind::Merge {
                        let user_key = extract_user_key(lookup);
                        self.walk_versions(index, i, it, user_key, fill_cache, visit)?;
                    }
                }
                return Ok(found);
            }
        }
        Ok(None)
    }

    /// What a data block iterator positioned by `seek_for_get(lookup)` says:
    /// `Some(answer)` when this block decides the lookup (a valid position
    /// with another user key proves absence from this and later blocks),
    /// `None` when every key of the block is below `lookup` (the answer, if
    /// any, is in a later block). `block_offset` names the block in errors.
    fn entry_at(
        &self,
        it: &super::block::BlockIter,
        lookup: &[u8],
        block_offset: u64,
    ) -> Result<Option<Option<TableEntry>>> {
        if !it.valid() {
            it.status()?;
            return Ok(None);
        }
        let Some(parsed) = parse_entry_key(it.key()) else {
            return Err(Error::corruption(
                &*self.name,
                block_offset,
                "data block holds a malformed internal key",
            ));
        };
        if self
            .user_cmp
            .compare(parsed.user_key, extract_user_key(lookup))
            != Ordering::Equal
        {
            return Ok(Some(None));
        }
        Ok(Some(Some(TableEntry {
            sequence: parsed.sequence,
            kind: parsed.kind,
            value: it.value_bytes(),
        })))
    }

    /// An iterator over the whole table.
    pub fn iter(self: &Arc<Self>) -> TableIterator {
        TableIterator::new(self.clone(), true)
    }

    /// An iterator that caches the blocks it reads only if `fill_cache`.
    pub fn iter_opt(self: &Arc<Self>, fill_cache: bool) -> TableIterator {
        TableIterator::new(self.clone(), fill_cache)
    }

    /// Approximate file offset where the data for `ikey` begins (the size of
    /// the data section if `ikey` is past the last key).
    pub fn approximate_offset_of(&self, ikey: &[u8]) -> u64 {
        let Ok(mut index) = self.index_iter() else {
            return self.props.data_size;
        };
        index.seek(ikey);
        if index.valid() {
            if let Some(v) = IndexValue::decode(index.value()) {
                return v.handle.offset;
            }
        }
        self.props.data_size
    }
}

/// Largest buffer a [`SeekReads`] keeps between seeks.
const SEEK_READS_KEEP_BYTES: usize = 256 << 10;

/// The data blocks a seek is about to read from files read with direct I/O
/// and missing from the block cache, gathered from every level
/// ([`InternalIterator::plan_seek`]) so that they are read at once: a seek
/// needs one block from each level and L0 file, and those reads do not
/// depend on each other, so the device can serve them together instead of
/// one after another (RocksDB reads them in turn unless
/// `ReadOptions::async_io` is set). The blocks go into the block cache, as
/// the seek's own reads would put them; the seek then finds them there.
/// Point lookups gather theirs the same way (`TableReader::plan_get`): a
/// get's in every level below the first it would read from, a batched
/// MultiGet's for its keys in one level.
///
/// [`InternalIterator::plan_seek`]: crate::iter::InternalIterator::plan_seek
#[derive(Default)]
pub struct SeekReads {
    reads: Vec<(Arc<TableReader>, BlockHandle)>,
    buf: Vec<u8>,
}

impl std::fmt::Debug for SeekReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeekReads")
            .field("blocks", &self.reads.len())
            .finish()
    }
}

impl SeekReads {
    /// Adds data block `handle` of `table`, which
    /// [`TableReader::reads_directly`] approved.
    pub(crate) fn push(&mut self, table: Arc<TableReader>, handle: BlockHandle) {
        self.reads.push((table, handle));
    }

    /// True if the block last added is block `handle` of `table` (a
    /// batch's keys in one block ask for it in turn).
    fn is_last(&self, table: &TableReader, handle: BlockHandle) -> bool {
        self.reads
            .last()
            .is_some_and(|(t, h)| std::ptr::eq(&**t, table) && *h == handle)
    }

    /// Blocks added since the last [`read_all`](Self::read_all).
    pub(crate) fn len(&self) -> usize {
        self.reads.len()
    }

    /// Forgets the blocks added and not read (left by a lookup that
    /// panicked between adding and reading).
    pub(crate) fn clear(&mut self) {
        self.reads.clear();
    }

    /// True if no block was added since the last [`read_all`](Self::read_all).
    pub(crate) fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }

    /// Reads every block added ([`crate::env::read_direct_batch`]: together)
    /// into the block cache, and forgets them. Read errors and blocks
    /// that fail their checks are left to the seek, which reads them again
    /// and reports them as it always did.
    pub(crate) fn read_all(&mut self) {
        read_ahead(&self.reads, &mut self.buf);
        self.reads.clear();
    }
}

/// Largest read [`read_ahead`] makes of adjacent blocks together.
const READ_AHEAD_SPAN_MAX: u64 = 256 << 10;

/// Blocks (and spans) of one [`read_ahead`] kept without allocating: a
/// seek's, one per level and level-0 file.
pub(crate) const READ_AHEAD_INLINE: usize = 16;

/// Reads the data blocks `blocks` (each of its table, which
/// [`TableReader::reads_directly`] approved) at once
/// ([`crate::env::read_direct_batch`]) into the block cache, through
/// `buf`. Blocks of one table that lie back to back in the file and follow
/// each other in `blocks` are read as one span (up to
/// [`READ_AHEAD_SPAN_MAX`] bytes), as RocksDB's MultiGet joins adjacent
/// block reads. Read errors and blocks that fail their checks are left to
/// the reader that asked, which reads them again and reports them.
pub(crate) fn read_ahead<T: std::ops::Deref<Target = TableReader>>(
    blocks: &[(T, BlockHandle)],
    buf: &mut Vec<u8>,
) {
    // Spans: runs of `blocks` read together, with their file range. A
    // seek's few blocks (one per level) stay on the stack.
    let mut spans: SmallVec<[(std::ops::Range<usize>, u64, u64); READ_AHEAD_INLINE]> =
        SmallVec::new();
    for (i, (table, h)) in blocks.iter().enumerate() {
        if let Some((run, start, end)) = spans.last_mut() {
            if std::ptr::eq(&*blocks[run.start].0, &**table)
                && h.offset == *end
                && h.end_with_trailer() - *start <= READ_AHEAD_SPAN_MAX
            {
                run.end = i + 1;
                *end = h.end_with_trailer();
                continue;
            }
        }
        spans.push((i..i + 1, h.offset, h.end_with_trailer()));
    }
    let total: u64 = spans.iter().map(|(_, start, end)| end - start).sum();
    if total == 0 {
        return;
    }
    #[cfg(test)]
    read_ahead_seen::record(blocks);
    buf.clear();
    buf.resize(total as usize, 0);
    let mut reads: SmallVec<[DirectRead<'_>; READ_AHEAD_INLINE]> = SmallVec::new();
    let mut rest = &mut buf[..];
    for (run, start, end) in &spans {
        let (b, tail) = rest.split_at_mut((end - start) as usize);
        rest = tail;
        reads.push(DirectRead {
            file: &*blocks[run.start].0.file,
            offset: *start,
            buf: b,
            result: Ok(()),
        });
    }
    read_direct_batch(&mut reads);
    for ((run, start, _), read) in spans.iter().zip(&reads) {
        if read.result.is_err() {
            continue;
        }
        for (table, h) in &blocks[run.clone()] {
            let at = (h.offset - start) as usize;
            table.cache_read_ahead(
                *h,
                &read.buf[at..at + h.size as usize + BLOCK_TRAILER_BYTES],
            );
        }
    }
    drop(reads);
    if buf.capacity() > SEEK_READS_KEEP_BYTES {
        *buf = Vec::new();
    }
}

/// Tests: what the calls of [`read_ahead`] on this thread read.
#[cfg(test)]
pub(crate) mod read_ahead_seen {
    use std::cell::Cell;

    use super::TableReader;

    thread_local! {
        static MOST_TABLES: Cell<usize> = const { Cell::new(0) };
        static CALLS: Cell<usize> = const { Cell::new(0) };
    }

    /// Records the tables of one call's blocks.
    pub(super) fn record<T: std::ops::Deref<Target = TableReader>>(
        blocks: &[(T, super::BlockHandle)],
    ) {
        let mut tables: Vec<*const TableReader> = blocks.iter().map(|(t, _)| &**t as _).collect();
        tables.sort();
        tables.dedup();
        MOST_TABLES.with(|m| m.set(m.get().max(tables.len())));
        CALLS.with(|c| c.set(c.get() + 1));
    }

    /// The calls that read something since the last `take`, and the most
    /// tables one of them read from; starts counting again.
    pub(crate) fn take() -> (usize, usize) {
        (
            CALLS.with(|c| c.replace(0)),
            MOST_TABLES.with(|m| m.replace(0)),
        )
    }
}
