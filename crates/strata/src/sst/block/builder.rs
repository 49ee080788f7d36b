//! Builds one block: prefix-compressed entries, then the restart array,
//! the optional hash index and the packed trailer. The layout is in
//! `docs/format/block.md` and `docs/format/block_hash_index.md`.
//!
//! Not thread-safe; one builder per table builder.

use crate::key::extract_user_key;
use crate::util::coding::{put_fixed32, put_varint32, varint_length};

use super::hash_index::{user_key_hash, HashIndexBuilder};
use super::{pack_footer, DataBlockIndexType};

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
    /// Set for data blocks that get a hash index when they fit its limits.
    hash_index: Option<HashIndexBuilder>,
    /// The index type `finish` wrote.
    finished_index_type: Option<DataBlockIndexType>,
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
            hash_index: None,
            finished_index_type: None,
        }
    }

    /// A builder for data blocks (keys are internal keys) that also writes
    /// a hash index of `util_ratio` user keys per bucket (> 0) whenever the
    /// block has at most 253 restart points. The caller checks that the
    /// user comparator never equates byte-different keys.
    pub fn with_hash_index(restart_interval: usize, util_ratio: f64) -> BlockBuilder {
        BlockBuilder {
            hash_index: Some(HashIndexBuilder::new(util_ratio)),
            ..BlockBuilder::new(restart_interval)
        }
    }

    /// Makes the next entry a restart point (it stores its whole key). The
    /// table builder uses it to start a row of a new prefix at one.
    pub fn start_restart_interval(&mut self) {
        if self.num_entries > 0 {
            self.counter = self.restart_interval;
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
        if let Some(h) = &mut self.hash_index {
            h.reset();
        }
        self.finished_index_type = None;
    }

    /// Appends an entry. Keys must be added in increasing order of the
    /// table's comparator; the caller checks that. With a hash index, keys
    /// are internal keys and their user keys are hashed here.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let hash = match self.hash_index {
            Some(_) => user_key_hash(extract_user_key(key)),
            None => 0,
        };
        self.add_with_hash(key, value, hash);
    }

    /// [`BlockBuilder::add`] with `hash`, the user key's [`user_key_hash`],
    /// already computed (ignored without a hash index).
    pub fn add_with_hash(&mut self, key: &[u8], value: &[u8], hash: u64) {
        debug_assert!(self.finished_index_type.is_none(), "add after finish");
        debug_assert!(u32::try_from(key.len()).is_ok() && u32::try_from(value.len()).is_ok());
        if let Some(h) = &mut self.hash_index {
            debug_assert_eq!(hash, user_key_hash(extract_user_key(key)));
            // Versions of one user key are adjacent: index only the first.
            // Byte equality is key equality under the comparators allowed.
            if self.num_entries == 0 || extract_user_key(&self.last_key) != extract_user_key(key) {
                let restart_index = if self.counter < self.restart_interval {
                    self.restarts.len() - 1
                } else {
                    self.restarts.len() // this entry starts a new interval
                };
                h.add(hash, restart_index);
            }
        }
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

    /// Bytes of the hash index if the block were finished now.
    fn hash_index_size(&self) -> usize {
        self.hash_index
            .as_ref()
            .map_or(0, |h| h.encoded_size(self.restarts.len()))
    }

    /// Size of the block if it were finished now.
    pub fn current_size_estimate(&self) -> usize {
        self.buf.len() + self.restarts.len() * 4 + self.hash_index_size() + 4
    }

    /// About the size of the block if `key` and `value` were added now: the
    /// key counted whole (its shared prefix is not known yet), as RocksDB's
    /// `EstimateSizeAfterKV`.
    pub fn size_estimate_after(&self, key: &[u8], value: &[u8]) -> usize {
        let restart = if self.counter >= self.restart_interval {
            4
        } else {
            0
        };
        // The entry's header: the shared length counted as 4 bytes, the
        // other two lengths as encoded.
        let header = 4 + varint_length(key.len() as u64) + varint_length(value.len() as u64);
        self.current_size_estimate() + key.len() + value.len() + restart + header
    }

    /// True when no entry has been added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    #[cfg(test)]
    /// Entries added since the last reset.
    pub fn num_entries(&self) -> usize {
        self.num_entries
    }

    #[cfg(test)]
    /// The last key added (empty before the first add).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array, the hash index (if asked for and the
    /// block has at most 253 restart points) and the trailer, and returns
    /// the block bytes. The slice stays valid until the next `reset`.
    pub fn finish(&mut self) -> &[u8] {
        debug_assert!(self.finished_index_type.is_none(), "finish called twice");
        for &r in &self.restarts {
            put_fixed32(&mut self.buf, r);
        }
        let index_type = match &self.hash_index {
            Some(h) if h.encoded_size(self.restarts.len()) > 0 => {
                h.finish(&mut self.buf);
                DataBlockIndexType::BinaryAndHash
            }
            _ => DataBlockIndexType::BinarySearch,
        };
        let footer = pack_footer(index_type, self.restarts.len() as u32);
        put_fixed32(&mut self.buf, footer);
        self.finished_index_type = Some(index_type);
        &self.buf
    }

    /// The index type the last `finish` wrote (None before it).
    pub fn finished_index_type(&self) -> Option<DataBlockIndexType> {
        self.finished_index_type
    }
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
