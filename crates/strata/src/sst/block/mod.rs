//! Data, index and meta blocks: prefix-compressed sorted entries with a
//! restart array. Byte layout in `docs/format/block.md`:
//!
//! ```text
//! entry*  restart[num_restarts] (u32 LE)  [hash_index]  footer (u32 LE)
//! entry  := varint32 shared | varint32 non_shared | varint32 value_len
//!           | key[shared..] (non_shared bytes) | value (value_len bytes)
//! footer := num_restarts | index_type << 31
//! ```
//!
//! `hash_index` is present iff `index_type` is 1 (data blocks only; see
//! [`hash_index`] and `docs/format/block_hash_index.md`).
//!
//! A [`Block`] is immutable and cheap to clone (the bytes are reference
//! counted); any number of [`BlockIter`]s may read it from any thread.

mod builder;
pub mod hash_index;
mod iter;

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::key::Comparator;
use crate::util::coding::decode_fixed32;

pub use builder::BlockBuilder;
#[cfg(test)]
pub(crate) use hash_index::user_key_hash;
pub use iter::BlockIter;
pub(crate) use iter::{decode_entry_header, restart_point, PrevRun};

use crate::util::prefetch::{prefetch_at, prefetch_range};
use hash_index::{HashIndex, RESTARTS_MAX};

/// Bytes of the packed footer at the end of every block.
pub const BLOCK_FOOTER_BYTES: usize = 4;
const INDEX_TYPE_SHIFT: u32 = 31;
const NUM_RESTARTS_MASK: u32 = (1 << INDEX_TYPE_SHIFT) - 1;

/// How a point lookup finds its entry inside a data block, as
/// `rocksdb::DataBlockIndexType`. The value is the block footer's top bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DataBlockIndexType {
    /// Binary search over the restart points, then a linear scan. The
    /// default.
    #[default]
    BinarySearch = 0,
    /// Also a hash index from user key to restart interval, between the
    /// restart array and the footer; point lookups use it, iterators
    /// ignore it. Costs about one byte per key at a util ratio of 1.
    BinaryAndHash = 1,
}

impl DataBlockIndexType {
    /// The name recorded in the table properties.
    pub fn name(self) -> &'static str {
        match self {
            DataBlockIndexType::BinarySearch => "binary_search",
            DataBlockIndexType::BinaryAndHash => "binary_search_and_hash",
        }
    }
}

pub(crate) fn pack_footer(index_type: DataBlockIndexType, num_restarts: u32) -> u32 {
    debug_assert!(num_restarts <= NUM_RESTARTS_MASK);
    num_restarts | ((index_type as u32) << INDEX_TYPE_SHIFT)
}

/// An immutable, validated block.
#[derive(Clone)]
pub struct Block {
    data: Bytes,
    restarts_offset: usize,
    num_restarts: u32,
    hash_index: Option<HashIndex>,
    file: Arc<str>,
    offset: u64,
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("file", &self.file)
            .field("offset", &self.offset)
            .field("size", &self.data.len())
            .field("num_restarts", &self.num_restarts)
            .field("hash_index", &self.hash_index)
            .finish()
    }
}

impl Block {
    /// Checks the footer, the hash index's size (if the footer names one)
    /// and the restart array bounds of `data`, the contents of the block
    /// that starts at `offset` in `file` (after decompression). Bucket
    /// values are checked as lookups use them.
    pub fn new(data: Bytes, file: Arc<str>, offset: u64) -> Result<Block> {
        let corrupt = |what: String| Error::corruption(&*file, offset, what);
        let len = data.len();
        let Some(footer) = len
            .checked_sub(BLOCK_FOOTER_BYTES)
            .and_then(|at| decode_fixed32(&data[at..]))
        else {
            return Err(corrupt(format!(
                "block of {len} bytes is shorter than its 4-byte footer"
            )));
        };
        let num_restarts = footer & NUM_RESTARTS_MASK;
        // The restart array ends where the hash index (if any) begins.
        let mut restarts_end = len - BLOCK_FOOTER_BYTES;
        let hash_index = if footer >> INDEX_TYPE_SHIFT == 0 {
            None
        } else {
            if num_restarts > RESTARTS_MAX {
                return Err(corrupt(format!(
                    "block with a hash index has {num_restarts} restart points, over the limit of {RESTARTS_MAX}"
                )));
            }
            let (index, start) = HashIndex::decode(&data, restarts_end).map_err(corrupt)?;
            restarts_end = start;
            Some(index)
        };
        let max_restarts = restarts_end / 4;
        if num_restarts == 0 || num_restarts as usize > max_restarts {
            return Err(corrupt(format!(
                "block footer gives {num_restarts} restart points; a {len}-byte block holds 1 to {max_restarts}"
            )));
        }
        let restarts_offset = restarts_end - num_restarts as usize * 4;
        Ok(Block {
            data,
            restarts_offset,
            num_restarts,
            hash_index,
            file,
            offset,
        })
    }

    /// An iterator ordered by `cmp`, unpositioned.
    pub fn iter(&self, cmp: Arc<dyn Comparator>) -> BlockIter {
        BlockIter::new(self, cmp)
    }

    /// [`Block::iter`] taking the block: its buffers move into the
    /// iterator instead of being shared (no reference-count traffic).
    pub fn into_block_iter(self, cmp: Arc<dyn Comparator>) -> BlockIter {
        BlockIter::from_block(self, cmp)
    }

    /// Asks the CPU for the first bytes a point lookup of a user key with
    /// [`user_key_hash`] `hash` reads in this block: its hash bucket (if the
    /// block has a hash index) and the start of the restart array. Called
    /// on a block cache hit before the block is cloned, so that these
    /// misses overlap the clone's reference-count update.
    #[inline]
    pub fn prefetch_for_get(&self, hash: u64) {
        if let Some(index) = self.hash_index {
            prefetch_at(&self.data, index.bucket_offset(hash));
            // The bucket names the restart point to read next; at most
            // 253 of them, mostly within two lines.
            let restarts_end = self.restarts_offset + self.num_restarts as usize * 4;
            prefetch_range(&self.data, self.restarts_offset, restarts_end, 2);
        } else {
            // The binary search's first step reads the middle restart point.
            // (`BlockIter::search_restarts`: left 0, right num_restarts - 1.)
            let mid = self.num_restarts.saturating_sub(1).div_ceil(2);
            prefetch_at(&self.data, self.restarts_offset + mid as usize * 4);
        }
    }

    /// The hash-index bucket a user key with [`user_key_hash`] `hash` falls
    /// in (a restart interval, or [`hash_index::BUCKET_COLLISION`] /
    /// [`hash_index::BUCKET_EMPTY`]); `None` for a block without a hash
    /// index. For tools and tests: lookups use
    /// [`BlockIter::seek_for_get`].
    pub fn hash_bucket(&self, hash: u64) -> Option<u8> {
        self.hash_index
            .map(|index| index.lookup(&self.data, hash).0)
    }

    /// All of the block's hash-index buckets; `None` for a block without a
    /// hash index. For tools and tests.
    pub fn hash_buckets(&self) -> Option<&[u8]> {
        self.hash_index.map(|index| index.buckets(&self.data))
    }

    /// The block's bytes, footer included.
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// Bytes in memory.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// Number of restart points.
    pub fn num_restarts(&self) -> u32 {
        self.num_restarts
    }

    /// Where the restart array begins (the entries end).
    pub(crate) fn restarts_offset(&self) -> usize {
        self.restarts_offset
    }

    /// The index type in the block's footer.
    pub fn index_type(&self) -> DataBlockIndexType {
        match self.hash_index {
            Some(_) => DataBlockIndexType::BinaryAndHash,
            None => DataBlockIndexType::BinarySearch,
        }
    }

    /// The file this block was read from.
    pub fn file(&self) -> &Arc<str> {
        &self.file
    }

    /// The block's offset in its file.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

#[cfg(test)]
mod hash_index_tests;
#[cfg(test)]
mod tests;
