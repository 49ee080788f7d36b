//! The block cache: uncompressed table blocks keyed by file and offset.
//! Data blocks always go through it; a table's index and filter too when
//! the table options say `cache_index_and_filter_blocks` (decoded, charged
//! by the memory they take).
//!
//! A deleted table's blocks are dropped with
//! `cache.erase_if(|&(file, _)| file == file_number)`; until then they are
//! evicted like any other entry.

use std::sync::Arc;

use crate::sst::block::Block;
use crate::sst::filter::BloomFilter;
use crate::sst::TableIndex;

use super::LruCache;

/// Identifies a block: (file number or per-reader cache id, block offset in
/// the file).
pub type BlockCacheKey = (u64, u64);

/// A cache of blocks read from tables, charged by what each block (data,
/// or a decoded index or filter) takes in memory, bookkeeping included.
pub type BlockCache = LruCache<BlockCacheKey, CachedBlock>;

/// What the block cache holds for one key: a data block, or a table's
/// decoded index or filter. Cheap to clone (reference counted).
#[derive(Clone)]
pub struct CachedBlock(pub(crate) CachedRepr);

#[derive(Clone)]
pub(crate) enum CachedRepr {
    Data(Block),
    /// A data block as its table stores it (compressed contents and the
    /// compression type byte), decompressed on every hit: what a table
    /// read with direct I/O caches (`TableReader::with_stored_blocks_cached`).
    Stored(bytes::Bytes),
    Index(Arc<TableIndex>),
    Filter(BloomFilter),
}

impl CachedBlock {
    /// The data block, if this entry is one.
    pub(crate) fn data_block(&self) -> Option<&Block> {
        match &self.0 {
            CachedRepr::Data(b) => Some(b),
            _ => None,
        }
    }
}

impl From<Block> for CachedBlock {
    fn from(block: Block) -> CachedBlock {
        CachedBlock(CachedRepr::Data(block))
    }
}

impl std::fmt::Debug for CachedBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            CachedRepr::Data(b) => b.fmt(f),
            CachedRepr::Stored(b) => write!(f, "Stored({} bytes)", b.len()),
            CachedRepr::Index(i) => write!(f, "TableIndex({} bytes)", i.memory_bytes()),
            CachedRepr::Filter(b) => b.fmt(f),
        }
    }
}

/// Estimated per-entry bookkeeping of a [`BlockCache`], added to each
/// block's size by [`block_charge`].
pub const BLOCK_CACHE_ENTRY_OVERHEAD_BYTES: usize = BlockCache::ENTRY_OVERHEAD_BYTES;

/// Heap a data block takes besides its bytes: the allocator's header of
/// its buffer (8 bytes on 64-bit glibc) and the box `Bytes::from_owner`
/// keeps the buffer in (reference count, drop function and the `Vec`: 40
/// bytes, a 48-byte chunk with its header). RocksDB charges the same
/// things: its block's `malloc_usable_size` and its `Block` object.
pub const BLOCK_HEAP_OVERHEAD_BYTES: usize = 8 + 48;

/// The charge of caching something read from a table whose bytes take
/// `bytes` (a data block; an index block with its arrays; a filter): the
/// heap they take (rounded up to the allocator's 16-byte granule, with the
/// buffer's header and owner), plus the cache's fixed per-entry overhead,
/// so that the capacity bounds memory even for small entries. Missing the
/// 70 or so bytes a 4 KiB block takes besides its contents let a 1 GiB
/// cache hold about 20 MB more than it said.
pub fn heap_charge(bytes: usize) -> usize {
    bytes.next_multiple_of(16) + BLOCK_HEAP_OVERHEAD_BYTES + BLOCK_CACHE_ENTRY_OVERHEAD_BYTES
}

/// The charge of caching data block `block`: [`data_block_charge`] of its
/// size.
pub fn block_charge(block: &Block) -> usize {
    data_block_charge(block.size())
}

/// The charge of caching a data block (decompressed, or as stored) of
/// `len` bytes: [`heap_charge`] of the buffer it is read into
/// ([`data_block_capacity`]).
pub fn data_block_charge(len: usize) -> usize {
    heap_charge(data_block_capacity(len))
}

/// The capacity of the buffer a data block of `len` bytes is read (and
/// decompressed) into: `len` rounded up to an eighth of the power of two
/// at or above it, so every block of 3,585 to 4,096 bytes takes 4,096.
///
/// Blocks cut at one block size then leave holes in the heap that any of
/// them fits when they are evicted. Read into buffers of their exact size,
/// a hole left by a 3,700-byte block could not take a 4,000-byte one: in a
/// long mixed run at 50M keys the readers' arenas held 80 MB each of such
/// holes (docs/benchmarks.md, stop 64). The cost is less than an eighth
/// of that power of two per block (none for a block of exactly 4,096
/// bytes, under a quarter of any block), charged to the cache.
pub fn data_block_capacity(len: usize) -> usize {
    let granule = (len.next_power_of_two() / 8).max(16);
    len.next_multiple_of(granule)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::sst::block::BlockBuilder;

    fn block(file: u64, offset: u64, entries: usize) -> Block {
        let mut builder = BlockBuilder::new(16);
        for i in 0..entries {
            builder.add(format!("key{i:05}").as_bytes(), b"value");
        }
        let data = Bytes::copy_from_slice(builder.finish());
        Block::new(data, Arc::from(format!("{file:06}.sst")), offset).expect("valid block")
    }

    #[test]
    fn charge_is_size_class_plus_overhead() {
        let small = block(1, 0, 1);
        let large = block(1, 4096, 100);
        assert!(BLOCK_CACHE_ENTRY_OVERHEAD_BYTES >= std::mem::size_of::<Block>());
        for b in [&small, &large] {
            let class = data_block_capacity(b.size());
            assert_eq!(
                block_charge(b),
                class.next_multiple_of(16)
                    + BLOCK_HEAP_OVERHEAD_BYTES
                    + BLOCK_CACHE_ENTRY_OVERHEAD_BYTES
            );
            assert!(class >= b.size() && class <= b.size() + (b.size() / 4).max(15));
        }
    }

    /// Size classes: never below the size, less than an eighth of the
    /// power of two at or above it (so under a quarter of the size, or one
    /// 16-byte granule) above it, never smaller for a larger block, and
    /// every block a 4 KiB block size cuts (with the default deviation,
    /// 3,687 bytes and up) in one class.
    #[test]
    fn data_block_size_classes() {
        let mut last = 0;
        for len in 0..=70_000 {
            let class = data_block_capacity(len);
            let granule = (len.next_power_of_two() / 8).max(16);
            assert!(class >= len && class < len + granule, "{len}: {class}");
            assert!(class <= len + (len / 4).max(15), "{len}: {class}");
            assert!(class >= last, "{len}: {class} after {last}");
            last = class;
        }
        for len in 3_585..=4_096 {
            assert_eq!(data_block_capacity(len), 4_096);
        }
        assert_eq!(data_block_capacity(4_097), 5_120);
        assert_eq!(data_block_capacity(16_000), 16_384);
    }

    #[test]
    fn erase_if_drops_one_files_blocks() {
        let cache = BlockCache::new(1 << 20, Some(2));
        for file in 1..=3 {
            for offset in (0..10).map(|i| i * 4096) {
                let block = block(file, offset, 10);
                let charge = block_charge(&block);
                assert!(cache.insert((file, offset), block.into(), charge));
            }
        }
        assert_eq!(cache.len(), 30);
        cache.erase_if(|&(file, _)| file == 2);
        assert_eq!(cache.len(), 20);
        assert!(cache.get(&(2, 0)).is_none());
        let hit = cache.get(&(3, 4096)).expect("file 3 block cached");
        let hit = hit.data_block().expect("a data block");
        assert_eq!(hit.offset(), 4096);
        assert_eq!(&**hit.file(), "000003.sst");
        cache.check_invariants();
    }
}
