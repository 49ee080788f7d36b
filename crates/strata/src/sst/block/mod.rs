//! Data, index and meta blocks: prefix-compressed sorted entries with a
//! restart array. Byte layout in `docs/format/block.md`:
//!
//! ```text
//! entry*  restart[num_restarts] (u32 LE)  footer (u32 LE)
//! entry  := varint32 shared | varint32 non_shared | varint32 value_len
//!           | key[shared..] (non_shared bytes) | value (value_len bytes)
//! footer := num_restarts | index_type << 31
//! ```
//!
//! A [`Block`] is immutable and cheap to clone (the bytes are reference
//! counted); any number of [`BlockIter`]s may read it from any thread.

mod builder;
mod iter;

use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::key::Comparator;
use crate::util::coding::decode_fixed32;

pub use builder::BlockBuilder;
pub use iter::BlockIter;

/// Bytes of the packed footer at the end of every block.
pub const BLOCK_FOOTER_BYTES: usize = 4;
const INDEX_TYPE_SHIFT: u32 = 31;
const NUM_RESTARTS_MASK: u32 = (1 << INDEX_TYPE_SHIFT) - 1;

/// How a point lookup finds its entry inside a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockIndexType {
    /// Binary search over the restart points, then a linear scan.
    BinarySearch = 0,
    /// A hash index between the restart array and the footer (reserved for
    /// the data-block hash index; not written by this version).
    BinaryAndHash = 1,
}

pub(crate) fn pack_footer(index_type: BlockIndexType, num_restarts: u32) -> u32 {
    debug_assert!(num_restarts <= NUM_RESTARTS_MASK);
    num_restarts | ((index_type as u32) << INDEX_TYPE_SHIFT)
}

/// An immutable, validated block.
#[derive(Clone)]
pub struct Block {
    data: Bytes,
    restarts_offset: usize,
    num_restarts: u32,
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
            .finish()
    }
}

impl Block {
    /// Checks the footer and restart array bounds of `data`, the contents of
    /// the block that starts at `offset` in `file` (after decompression).
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
        if footer >> INDEX_TYPE_SHIFT != BlockIndexType::BinarySearch as u32 {
            return Err(corrupt(
                "block footer names a hash index, which this version does not write".into(),
            ));
        }
        let num_restarts = footer & NUM_RESTARTS_MASK;
        let max_restarts = (len - BLOCK_FOOTER_BYTES) / 4;
        if num_restarts == 0 || num_restarts as usize > max_restarts {
            return Err(corrupt(format!(
                "block footer gives {num_restarts} restart points; a {len}-byte block holds 1 to {max_restarts}"
            )));
        }
        let restarts_offset = len - BLOCK_FOOTER_BYTES - num_restarts as usize * 4;
        Ok(Block {
            data,
            restarts_offset,
            num_restarts,
            file,
            offset,
        })
    }

    /// An iterator ordered by `cmp`, unpositioned.
    pub fn iter(&self, cmp: Arc<dyn Comparator>) -> BlockIter {
        BlockIter::new(self, cmp)
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
mod tests;
