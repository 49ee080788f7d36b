//! Builds one block: prefix-compressed entries, then the restart array and
//! the packed trailer. The layout is in `docs/format/block.md`.
//!
//! Not thread-safe; one builder per table builder.

use crate::util::coding::{put_fixed32, put_varint32, varint_length};

use super::{pack_footer, BlockIndexType};

/// Accumulates sorted entries into the bytes of one block.
///
/// Invariant: `restarts` is non-empty and its first element is 0, so a
/// finished block always has at least one restart point.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    /// Entries since the last restart point.
    counter: usize,
    num_entries: usize,
    last_key: Vec<u8>,
    finished: bool,
}

impl BlockBuilder {
    /// A builder that places a restart point every `restart_interval` entries
    /// (values below 1 are treated as 1).
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            num_entries: 0,
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Clears the builder for a new block, keeping its allocations.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.num_entries = 0;
        self.last_key.clear();
        self.finished = false;
    }

    /// Appends an entry. Keys must be added in increasing order of the
    /// table's comparator; the caller checks that.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished, "add after finish");
        debug_assert!(u32::try_from(key.len()).is_ok() && u32::try_from(value.len()).is_ok());
        let shared = if self.counter < self.restart_interval {
            common_prefix_len(&self.last_key, key)
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        let non_shared = key.len() - shared;
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        debug_assert_eq!(self.last_key, key);
        self.counter += 1;
        self.num_entries += 1;
    }

    /// Size of the block if it were finished now.
    pub fn current_size_estimate(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + 4
    }

    /// Size of the block after adding `key` and `value` (upper bound: assumes
    /// no shared prefix and a new restart point).
    pub fn estimate_size_after(&self, key: &[u8], value: &[u8]) -> usize {
        self.current_size_estimate()
            + 4
            + varint_length(0)
            + varint_length(key.len() as u64)
            + varint_length(value.len() as u64)
            + key.len()
            + value.len()
    }

    /// True when no entry has been added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// Entries added since the last reset.
    pub fn num_entries(&self) -> usize {
        self.num_entries
    }

    /// The last key added (empty before the first add).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array and trailer and returns the block bytes.
    /// The slice stays valid until the next `reset`.
    pub fn finish(&mut self) -> &[u8] {
        debug_assert!(!self.finished, "finish called twice");
        for &r in &self.restarts {
            put_fixed32(&mut self.buf, r);
        }
        let footer = pack_footer(BlockIndexType::BinarySearch, self.restarts.len() as u32);
        put_fixed32(&mut self.buf, footer);
        self.finished = true;
        &self.buf
    }
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
