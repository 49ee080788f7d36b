//! Caches: a sharded LRU cache bounded by total charge, and the block cache
//! built on it.
//!
//! See [`LruCache`] for the design: hashing picks one of up to 64 (by
//! default) independently locked shards, each an O(1) LRU list in a
//! chunked slab, indexed by a hash table of slot numbers, where hits mark
//! entries and eviction gives marked ones a second chance. Lookups hand out
//! clones (cheap, reference counted for blocks), so entries need no
//! pinning; clones still in use are not counted against the capacity.

mod block_cache;
mod lru_cache;
mod lru_list;
mod lru_shard;

pub(crate) use block_cache::CachedRepr;
pub(crate) use block_cache::{block_charge, data_block_capacity, data_block_charge, heap_charge};
pub use block_cache::{BlockCache, BlockCacheKey, CachedBlock};
pub use lru_cache::LruCache;
pub(crate) use lru_cache::GET_MANY_MAX;
#[cfg(test)]
pub(crate) use lru_cache::{default_shard_bits, SHARD_BITS_MAX};

#[cfg(test)]
mod tests;
