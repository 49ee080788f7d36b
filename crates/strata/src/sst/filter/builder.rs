//! Builds one table's bloom filter from the hashes of its keys.
//!
//! Not thread-safe; one builder per table builder. Memory is 8 bytes per
//! distinct added key until [`BloomFilterBuilder::finish`], which is bounded
//! by the table's size.

use std::fmt;

#[cfg(test)]
use super::filter_hash;
use super::format::{
    choose_num_probes, encode_metadata, line_index, set_probe_bits, CACHE_LINE_BYTES,
    METADATA_BYTES, NUM_LINES_MAX,
};

/// Bits per key are clamped to this range (unless the filter is disabled).
const BITS_PER_KEY_MIN: f64 = 1.0;
const BITS_PER_KEY_MAX: f64 = 100.0;
/// Bits in one cache line, in millibits.
const MILLIBITS_PER_LINE: u64 = (CACHE_LINE_BYTES as u64) * 8 * 1000;

/// Collects key hashes and lays them out as a cache-local bloom filter.
///
/// `bits_per_key` is clamped to `1..=100`; a value `<= 0` (or NaN) disables
/// the filter: nothing is collected and [`finish`](Self::finish) returns an
/// empty vector, which means "write no filter block". A filter of zero keys
/// is *not* empty: it is the 5-byte metadata alone, which answers "absent"
/// to every probe.
pub struct BloomFilterBuilder {
    /// Filter density in thousandths of a bit per key; 0 when disabled.
    millibits_per_key: u32,
    num_probes: u8,
    /// Distinct-from-predecessor hashes, in insertion order.
    hashes: Vec<u64>,
}

impl fmt::Debug for BloomFilterBuilder {
    // Hand-written so a builder holding millions of hashes prints one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BloomFilterBuilder")
            .field("millibits_per_key", &self.millibits_per_key)
            .field("num_probes", &self.num_probes)
            .field("num_added", &self.hashes.len())
            .finish()
    }
}

impl BloomFilterBuilder {
    /// A builder spending about `bits_per_key` bits per key (clamped to
    /// `1..=100`; `<= 0` or NaN disables the filter). The number of probes
    /// follows from it: 6 at 10 bits per key, 11 at 20.
    pub fn new(bits_per_key: f64) -> BloomFilterBuilder {
        // `> 0.0` is false for NaN, so NaN disables the filter too.
        let enabled = bits_per_key > 0.0;
        let millibits_per_key = if enabled {
            (bits_per_key.clamp(BITS_PER_KEY_MIN, BITS_PER_KEY_MAX) * 1000.0).round() as u32
        } else {
            0
        };
        BloomFilterBuilder {
            millibits_per_key,
            num_probes: choose_num_probes(millibits_per_key),
            hashes: Vec::new(),
        }
    }

    #[cfg(test)]
    /// Adds a user key. Equivalent to `add_hash(filter_hash(user_key))`.
    pub fn add_key(&mut self, user_key: &[u8]) {
        self.add_hash(filter_hash(user_key));
    }

    /// Adds a key by its [`filter_hash`]. A hash equal to the previous one is
    /// skipped, so the versions of one user key (adjacent in a table) count
    /// once.
    pub fn add_hash(&mut self, hash: u64) {
        if self.millibits_per_key == 0 || self.hashes.last() == Some(&hash) {
            return;
        }
        self.hashes.push(hash);
    }

    #[cfg(test)]
    /// Keys added since the last [`finish`](Self::finish), not counting
    /// skipped consecutive duplicates (always 0 when disabled).
    pub fn num_added(&self) -> usize {
        self.hashes.len()
    }

    /// Returns the filter bytes (lines then metadata, see
    /// `docs/format/filter.md`) and resets the builder for the next table.
    /// Returns an empty vector when the filter is disabled.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.millibits_per_key == 0 {
            return Vec::new();
        }
        let num_lines = num_lines_for(self.hashes.len(), self.millibits_per_key);
        let lines_bytes = num_lines * CACHE_LINE_BYTES;
        let mut filter = vec![0u8; lines_bytes + METADATA_BYTES];
        let (lines, _) = filter[..lines_bytes].as_chunks_mut::<CACHE_LINE_BYTES>();
        // num_lines <= NUM_LINES_MAX, which fits in u32 (checked in format.rs).
        let num_lines_u32 = num_lines as u32;
        for &hash in &self.hashes {
            // line_index < num_lines == lines.len(): in bounds.
            set_probe_bits(
                &mut lines[line_index(hash, num_lines_u32)],
                hash,
                self.num_probes,
            );
        }
        filter[lines_bytes..].copy_from_slice(&encode_metadata(self.num_probes));
        self.hashes.clear();
        filter
    }
}

/// `ceil(num_keys * bits_per_key / 512)` lines, at least one when there are
/// keys, and capped so the filter fits in one block: past the cap the filter
/// only grows denser (more false positives, never a false negative).
fn num_lines_for(num_keys: usize, millibits_per_key: u32) -> usize {
    let millibits = (num_keys as u64).saturating_mul(u64::from(millibits_per_key));
    let num_lines = millibits.div_ceil(MILLIBITS_PER_LINE);
    usize::try_from(num_lines).map_or(NUM_LINES_MAX, |n| n.min(NUM_LINES_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn num_lines_rounds_up_and_caps() {
        assert_eq!(num_lines_for(0, 10_000), 0);
        assert_eq!(num_lines_for(1, 1_000), 1);
        assert_eq!(num_lines_for(1_000, 10_000), 20); // 10_000 bits / 512 = 19.53
        assert_eq!(num_lines_for(512, 1_000), 1);
        assert_eq!(num_lines_for(513, 1_000), 2);
        assert_eq!(num_lines_for(usize::MAX, 100_000), NUM_LINES_MAX);
    }

    #[test]
    fn bits_per_key_is_clamped_and_nonpositive_disables() {
        assert_eq!(BloomFilterBuilder::new(0.25).millibits_per_key, 1_000);
        assert_eq!(BloomFilterBuilder::new(1e9).millibits_per_key, 100_000);
        assert_eq!(
            BloomFilterBuilder::new(f64::INFINITY).millibits_per_key,
            100_000
        );
        assert_eq!(BloomFilterBuilder::new(9.9996).millibits_per_key, 10_000);
        for disabled in [0.0, -0.0, -3.0, f64::NAN, f64::NEG_INFINITY] {
            let mut b = BloomFilterBuilder::new(disabled);
            b.add_key(b"k");
            assert_eq!(b.num_added(), 0);
            assert!(b.finish().is_empty());
        }
    }

    #[test]
    fn consecutive_duplicate_hashes_count_once() {
        let mut b = BloomFilterBuilder::new(10.0);
        b.add_key(b"a");
        b.add_key(b"a");
        b.add_key(b"b");
        b.add_key(b"a");
        assert_eq!(b.num_added(), 3);
    }
}
