//! The table's bloom filter: a cache-local bloom filter in the style of
//! RocksDB's "FastLocalBloom" (format_version 5). Byte layout in
//! `docs/format/filter.md`:
//!
//! ```text
//! filter   := line[num_lines] (64 bytes each) | metadata (5 bytes)
//! metadata := 0xFF (new-style filter marker) | 0x00 (cache-local bloom)
//!             | num_probes (u8, 1..=30) | 0x00 0x00 (reserved)
//! hash     := xxh3_64(user_key), seed 0
//! line     := ((hash >> 32) * num_lines) >> 32
//! probe i  := bit (h_i >> 23) of the line, h_0 = hash as u32,
//!             h_{i+1} = h_i * 0x9e3779b9 (mod 2^32); bit b is 1 << (b % 8)
//!             of byte b / 8
//! ```
//!
//! Every probe of a key lands in the same 64-byte line, so a lookup costs one
//! cache miss whatever the number of probes. A key is hashed once with
//! [`filter_hash`] and the hash is reused against every table that may hold
//! it; that is why the probes take a hash.
//!
//! A [`BloomFilterBuilder`] is owned by one table builder; a [`BloomFilter`]
//! is immutable, cheap to clone and may be probed from any thread.

mod builder;
mod format;
mod reader;

#[cfg(test)]
mod tests;

pub use builder::BloomFilterBuilder;
#[cfg(test)]
pub(crate) use format::METADATA_BYTES;
pub use reader::BloomFilter;

/// The hash a filter stores for `user_key`: xxh3_64 with seed 0.
///
/// Compute it once per lookup and pass it to every table consulted
/// ([`TableReader::get`](crate::sst::TableReader::get)).
pub fn filter_hash(user_key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(user_key)
}
