//! Probes one table's bloom filter.
//!
//! A [`BloomFilter`] is validated once when it is opened; after that every
//! probe is infallible, never panics and reads only inside the filter,
//! whatever bytes it was given. Immutable and cheap to clone (the bytes are
//! reference counted); safe to probe from any thread.

use std::fmt;

use bytes::Bytes;

#[cfg(test)]
use super::filter_hash;
use super::format::{decode_shape, line_index, probe_bits_set, CACHE_LINE_BYTES, METADATA_BYTES};
use crate::error::Result;
use crate::util::prefetch::prefetch_at;

/// A validated cache-local bloom filter.
///
/// A filter built from zero keys has no lines and answers `false` to every
/// probe: no key was added, so none may be present.
#[derive(Clone)]
pub struct BloomFilter {
    /// The lines, without the metadata trailer; `num_lines * 64` bytes.
    lines: Bytes,
    num_lines: u32,
    num_probes: u8,
}

impl fmt::Debug for BloomFilter {
    // Hand-written so a multi-megabyte filter prints one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BloomFilter")
            .field("num_lines", &self.num_lines)
            .field("num_probes", &self.num_probes)
            .finish()
    }
}

impl BloomFilter {
    /// Validates the filter bytes (lines then metadata) read from byte
    /// `offset` of `file`. Returns `Error::Corruption`, naming the file, the
    /// offset of the bad byte and what was expected, if the metadata is
    /// missing, has an unknown marker or sub-implementation, a number of
    /// probes outside `1..=30` or nonzero reserved bytes, or if the bytes
    /// before it are not whole 64-byte lines.
    pub fn new(data: Bytes, file: &str, offset: u64) -> Result<BloomFilter> {
        let shape = decode_shape(&data, file, offset)?;
        let lines_bytes = shape.num_lines as usize * CACHE_LINE_BYTES;
        debug_assert_eq!(lines_bytes + METADATA_BYTES, data.len());
        Ok(BloomFilter {
            lines: data.slice(..lines_bytes),
            num_lines: shape.num_lines,
            num_probes: shape.num_probes,
        })
    }

    /// False if no key with this [`filter_hash`] was added; true if one may
    /// have been.
    #[inline]
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        match self.line(hash) {
            Some(line) => probe_bits_set(line, hash, self.num_probes),
            // Only when there are no lines: a filter of zero keys.
            None => false,
        }
    }

    #[cfg(test)]
    /// False if `user_key` was not added; true if it may have been.
    /// Prefer [`may_contain_hash`](Self::may_contain_hash) when probing
    /// several filters for one key.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(filter_hash(user_key))
    }

    /// Hints the CPU to start loading the line `hash` will probe, so that
    /// several filters can be probed with their misses overlapped. A no-op
    /// off x86_64.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if let Some(line) = self.line(hash) {
            prefetch_at(line, 0);
        }
    }

    #[cfg(test)]
    /// Number of bits each key sets and each probe tests.
    pub fn num_probes(&self) -> u32 {
        u32::from(self.num_probes)
    }

    #[cfg(test)]
    /// Number of 64-byte lines; 0 for a filter of zero keys.
    pub fn num_lines(&self) -> u32 {
        self.num_lines
    }

    /// Size of the filter as stored: its lines plus the 5-byte metadata.
    pub fn size_bytes(&self) -> usize {
        self.lines.len() + METADATA_BYTES
    }

    /// The line `hash` selects, or `None` when there are no lines.
    #[inline]
    fn line(&self, hash: u64) -> Option<&[u8; CACHE_LINE_BYTES]> {
        let (lines, _) = self.lines.as_chunks::<CACHE_LINE_BYTES>();
        lines.get(line_index(hash, self.num_lines))
    }
}
