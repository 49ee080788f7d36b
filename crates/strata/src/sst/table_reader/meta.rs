//! Where an open table keeps its index and filter: in the reader from open
//! to drop (the default), or in the block cache, charged by the memory they
//! take and evictable like data blocks (RocksDB's
//! `cache_index_and_filter_blocks`), read and decoded again after an
//! eviction. Pinned (RocksDB's `pin_l0_filter_and_index_blocks_in_cache`):
//! in the cache for the charge and held by the reader too, so lookups never
//! wait for them to be read again.
//!
//! Unlike RocksDB's pinned entries, ours can still be evicted: the reader's
//! copy then stays alive without being charged. Their number is bounded by
//! the L0 files the database allows (its write stop trigger).

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use super::TableReader;
use crate::cache::{heap_charge, BlockCache, CachedBlock, CachedRepr};
use crate::env::RandomAccessFile;
use crate::error::Result;
use crate::key::{BuiltinOrder, Comparator};
use crate::sst::block::Block;
use crate::sst::filter::BloomFilter;
use crate::sst::format::{read_block, BlockHandle};
use crate::sst::index_array::IndexArray;

/// Where a table opened with a block cache keeps its index and filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum MetaPlacement {
    /// In the reader.
    #[default]
    Reader,
    /// In the block cache.
    Cache,
    /// In the block cache, and held by the reader.
    CachePinned,
}

/// A table's index as lookups use it: the index block (iterators walk it)
/// and its decoded arrays (point lookups search them).
///
/// The arrays of an index kept by the reader are built by the first point
/// lookup, not at open: a table that is only written, compacted and
/// scanned (a bulk load's, or any while a fill runs) never holds them. At
/// W8's 50M keys they were 20 MB of the fill's peak. An index placed in
/// the block cache has them built at once, so the cache is charged for
/// what it holds.
pub(crate) struct TableIndex {
    pub(crate) block: Block,
    array: OnceLock<Result<IndexArray>>,
    /// The separators' comparator: the user comparator if they are user
    /// keys, else the internal-key comparator.
    cmp: Arc<dyn Comparator>,
    order: Option<BuiltinOrder>,
    /// The separators are user keys (the table's `index_key_is_user_key`).
    user_keys: bool,
}

impl TableIndex {
    /// Reads and checks the index block at `handle` of `file`, whose
    /// separators `cmp` orders (user keys if `user_keys`); its arrays are
    /// decoded now if `eager`, else by the first [`array`](Self::array).
    pub(crate) fn read(
        file: &dyn RandomAccessFile,
        name: &Arc<str>,
        handle: BlockHandle,
        cmp: Arc<dyn Comparator>,
        order: Option<BuiltinOrder>,
        user_keys: bool,
        eager: bool,
    ) -> Result<TableIndex> {
        let block = Block::new(read_block(file, name, handle)?, name.clone(), handle.offset)?;
        let index = TableIndex {
            block,
            array: OnceLock::new(),
            cmp,
            order,
            user_keys,
        };
        if eager {
            index.array()?;
        }
        Ok(index)
    }

    /// The arrays point lookups search, decoded from the block the first
    /// time they are asked for; threads that ask meanwhile wait for that
    /// one decoding rather than each making its own. A block whose entries
    /// do not decode (its checksum was checked when it was read, so this
    /// is for good) is a `Corruption` for every lookup that asks.
    pub(crate) fn array(&self) -> Result<&IndexArray> {
        let built = self.array.get_or_init(|| {
            IndexArray::build(
                &self.block,
                self.cmp.clone(),
                self.order,
                self.user_keys,
                self.block.file(),
                self.block.offset(),
            )
        });
        built.as_ref().map_err(Clone::clone)
    }

    /// Bytes in memory: the block, and the arrays once built.
    pub(crate) fn memory_bytes(&self) -> usize {
        let array = self.array.get().and_then(|a| a.as_ref().ok());
        self.block.size() + array.map_or(0, IndexArray::memory_bytes)
    }
}

/// An index or filter kept by the reader or in the cache.
pub(super) enum Meta<T> {
    Held(T),
    /// In the block cache under (the reader's cache id, the block's offset).
    Cached(BlockHandle),
}

/// An index or filter borrowed from the reader or fetched from the cache.
pub(crate) enum MetaRef<'a, T> {
    Borrowed(&'a T),
    Owned(T),
}

impl<T> Deref for MetaRef<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            MetaRef::Borrowed(t) => t,
            MetaRef::Owned(t) => t,
        }
    }
}

/// Places an index or filter read at open: inserts it into `cache` when the
/// placement says so, and keeps it in the reader unless it is to live in
/// the cache alone.
pub(super) fn place<T: Clone>(
    value: T,
    bytes: usize,
    handle: BlockHandle,
    placement: MetaPlacement,
    cache: Option<&(Arc<BlockCache>, u64)>,
    wrap: impl FnOnce(T) -> CachedRepr,
) -> Meta<T> {
    let Some((cache, id)) = cache.filter(|_| placement != MetaPlacement::Reader) else {
        return Meta::Held(value);
    };
    cache.insert(
        (*id, handle.offset),
        CachedBlock(wrap(value.clone())),
        heap_charge(bytes),
    );
    match placement {
        MetaPlacement::Cache => Meta::Cached(handle),
        _ => Meta::Held(value),
    }
}

impl TableReader {
    /// The table's index, from the reader or the cache (read from the file
    /// again after an eviction).
    pub(crate) fn index(&self) -> Result<MetaRef<'_, Arc<TableIndex>>> {
        let handle = match &self.index {
            Meta::Held(index) => return Ok(MetaRef::Borrowed(index)),
            Meta::Cached(handle) => *handle,
        };
        let (cache, id) = self.cache.as_ref().expect("a cached index has a cache");
        if let Some(CachedBlock(CachedRepr::Index(index))) = cache.get(&(*id, handle.offset)) {
            return Ok(MetaRef::Owned(index));
        }
        let index = Arc::new(TableIndex::read(
            &*self.file,
            &self.name,
            handle,
            self.index_cmp(),
            self.order,
            self.props.index_key_is_user_key,
            true,
        )?);
        cache.insert(
            (*id, handle.offset),
            CachedBlock(CachedRepr::Index(index.clone())),
            heap_charge(index.memory_bytes()),
        );
        Ok(MetaRef::Owned(index))
    }

    /// The table's filter (`None`: the table has none), from the reader or
    /// the cache (read from the file again after an eviction).
    pub(crate) fn filter(&self) -> Result<Option<MetaRef<'_, BloomFilter>>> {
        let handle = match &self.filter {
            None => return Ok(None),
            Some(Meta::Held(filter)) => return Ok(Some(MetaRef::Borrowed(filter))),
            Some(Meta::Cached(handle)) => *handle,
        };
        let (cache, id) = self.cache.as_ref().expect("a cached filter has a cache");
        if let Some(CachedBlock(CachedRepr::Filter(f))) = cache.get(&(*id, handle.offset)) {
            return Ok(Some(MetaRef::Owned(f)));
        }
        self.load_filter(handle).map(|f| Some(MetaRef::Owned(f)))
    }

    /// True if the table's filter proves that `user_key` (whose
    /// [`filter_hash`](crate::sst::filter::filter_hash) is `hash`) is not
    /// in the table. A filter in the block cache is probed where it lies,
    /// under the cache shard's shared lock, so a point lookup's probe
    /// clones and drops no reference; after an eviction it is read again.
    pub(super) fn filter_excludes(&self, user_key: &[u8], hash: u64) -> Result<bool> {
        let Some(meta) = &self.filter else {
            return Ok(false);
        };
        let probe = self.probe_hash(user_key, hash);
        let handle = match meta {
            Meta::Held(filter) => return Ok(probe.is_some_and(|h| !filter.may_contain_hash(h))),
            Meta::Cached(handle) => *handle,
        };
        let (cache, id) = self.cache.as_ref().expect("a cached filter has a cache");
        let excluded = |f: &BloomFilter| probe.is_some_and(|h| !f.may_contain_hash(h));
        let hit = cache.read_with(&(*id, handle.offset), |c| match &c.0 {
            CachedRepr::Filter(f) => Some(excluded(f)),
            _ => None,
        });
        match hit.flatten() {
            Some(answer) => Ok(answer),
            None => Ok(excluded(&self.load_filter(handle)?)),
        }
    }

    /// Reads the filter block at `handle`, checks and decodes it, and
    /// caches it.
    fn load_filter(&self, handle: BlockHandle) -> Result<BloomFilter> {
        let (cache, id) = self.cache.as_ref().expect("a cached filter has a cache");
        let data = read_block(&*self.file, &self.name, handle)?;
        let filter = BloomFilter::new(data, &self.name, handle.offset)?;
        cache.insert(
            (*id, handle.offset),
            CachedBlock(CachedRepr::Filter(filter.clone())),
            heap_charge(filter.size_bytes()),
        );
        Ok(filter)
    }
}
