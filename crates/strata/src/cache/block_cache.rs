//! The block cache: uncompressed table blocks keyed by file and offset.
//!
//! A deleted table's blocks are dropped with
//! `cache.erase_if(|&(file, _)| file == file_number)`; until then they are
//! evicted like any other entry.

use crate::sst::block::Block;

use super::LruCache;

/// Identifies a block: (file number or per-reader cache id, block offset in
/// the file).
pub type BlockCacheKey = (u64, u64);

/// A cache of blocks read from tables, charged by [`block_charge`].
pub type BlockCache = LruCache<BlockCacheKey, Block>;

/// Estimated per-entry bookkeeping of a [`BlockCache`], added to each
/// block's size by [`block_charge`].
pub const BLOCK_CACHE_ENTRY_OVERHEAD_BYTES: usize = BlockCache::ENTRY_OVERHEAD_BYTES;

/// The charge of caching `block`: its bytes plus the cache's fixed per-entry
/// overhead, so that the capacity bounds memory even for small blocks.
pub fn block_charge(block: &Block) -> usize {
    block.size() + BLOCK_CACHE_ENTRY_OVERHEAD_BYTES
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
    fn charge_is_size_plus_overhead() {
        let small = block(1, 0, 1);
        let large = block(1, 4096, 100);
        assert!(BLOCK_CACHE_ENTRY_OVERHEAD_BYTES >= std::mem::size_of::<Block>());
        assert_eq!(
            block_charge(&small),
            small.size() + BLOCK_CACHE_ENTRY_OVERHEAD_BYTES
        );
        assert_eq!(
            block_charge(&large) - block_charge(&small),
            large.size() - small.size()
        );
    }

    #[test]
    fn erase_if_drops_one_files_blocks() {
        let cache = BlockCache::new(1 << 20, Some(2));
        for file in 1..=3 {
            for offset in (0..10).map(|i| i * 4096) {
                let block = block(file, offset, 10);
                let charge = block_charge(&block);
                assert!(cache.insert((file, offset), block, charge));
            }
        }
        assert_eq!(cache.len(), 30);
        cache.erase_if(|&(file, _)| file == 2);
        assert_eq!(cache.len(), 20);
        assert!(cache.get(&(2, 0)).is_none());
        let hit = cache.get(&(3, 4096)).expect("file 3 block cached");
        assert_eq!(hit.offset(), 4096);
        assert_eq!(&**hit.file(), "000003.sst");
        cache.check_invariants();
    }
}
