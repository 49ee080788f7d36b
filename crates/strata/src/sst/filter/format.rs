//! The filter's on-disk constants and the two functions both sides must
//! agree on: which line a hash selects and which bits of that line it sets.
//! Specified in `docs/format/filter.md`.

use crate::error::{Error, Result};
use crate::limits::BLOCK_SIZE_BYTES_MAX;

/// Bytes in one cache line; every probe of a key lands in one line.
pub const CACHE_LINE_BYTES: usize = 64;
/// Bits in one cache line.
const CACHE_LINE_BITS_LOG2: u32 = 9;
/// Bytes of the metadata trailer after the lines.
pub const METADATA_BYTES: usize = 5;
/// Metadata byte 0: a new-style filter (byte -1 as i8, as in RocksDB).
pub const FILTER_MARKER_NEW: u8 = 0xFF;
/// Metadata byte 1: the cache-local bloom sub-implementation.
pub const SUB_IMPL_CACHE_LOCAL_BLOOM: u8 = 0;
/// Largest number of probes a reader accepts (the builder writes at most 23).
pub const NUM_PROBES_MAX: u8 = 30;
/// Golden-ratio multiplier (2^32 / phi) that derives each probe from the last.
const PROBE_MULTIPLIER: u32 = 0x9e37_79b9;

/// Most lines a filter may have: the whole filter must fit in one block.
/// This also keeps `num_lines` within `u32`, which line selection relies on.
pub(crate) const NUM_LINES_MAX: usize = (BLOCK_SIZE_BYTES_MAX - METADATA_BYTES) / CACHE_LINE_BYTES;
const _: () = assert!(NUM_LINES_MAX <= u32::MAX as usize);

/// The smallest millibits per key at which `k + 1` probes are chosen
/// (index `k - 1`). Below the first entry one probe is used.
///
/// Derived from the model of a cache-local bloom filter: keys per line are
/// Poisson with mean `512 / bits_per_key`, and a line holding `n` keys has a
/// false-positive rate of `(1 - (1 - 1/512)^(n k))^k`. For each bits per key
/// (in steps of 10 millibits) we take the fewest probes whose modelled rate
/// is within 1% of the best, because every probe costs time.
const MILLIBITS_FOR_NEXT_PROBE: [u32; 22] = [
    2_140, 3_670, 5_210, 6_810, 8_480, 10_250, 12_150, 14_190, 16_410, 18_850, 21_540, 24_530,
    27_880, 31_630, 35_870, 40_670, 46_130, 52_370, 59_520, 67_750, 77_240, 88_230,
];

/// Number of probes for a filter sized at `millibits_per_key` (1..=23).
pub(crate) fn choose_num_probes(millibits_per_key: u32) -> u8 {
    let raised = MILLIBITS_FOR_NEXT_PROBE
        .iter()
        .take_while(|&&threshold| millibits_per_key >= threshold)
        .count();
    // At most 22 thresholds are passed, so this is at most 23.
    1 + raised as u8
}

/// The line a hash selects: its upper 32 bits scaled onto `0..num_lines`
/// (multiply-shift "fastrange", unbiased enough and free of division).
/// Returns a value below `num_lines` whenever `num_lines > 0`.
#[inline]
pub(crate) fn line_index(hash: u64, num_lines: u32) -> usize {
    (((hash >> 32) * u64::from(num_lines)) >> 32) as usize
}

/// Sets the `num_probes` bits of `line` that `hash` selects.
#[inline]
pub(crate) fn set_probe_bits(line: &mut [u8; CACHE_LINE_BYTES], hash: u64, num_probes: u8) {
    let mut h = hash as u32;
    for _ in 0..num_probes {
        let bit = h >> (32 - CACHE_LINE_BITS_LOG2);
        // bit < 512, so bit / 8 < 64: always within the line.
        line[(bit >> 3) as usize] |= 1 << (bit & 7);
        h = h.wrapping_mul(PROBE_MULTIPLIER);
    }
}

/// True if all `num_probes` bits of `line` that `hash` selects are set.
#[inline]
pub(crate) fn probe_bits_set(line: &[u8; CACHE_LINE_BYTES], hash: u64, num_probes: u8) -> bool {
    let mut h = hash as u32;
    for _ in 0..num_probes {
        let bit = h >> (32 - CACHE_LINE_BITS_LOG2);
        // bit < 512, so bit / 8 < 64: always within the line.
        if line[(bit >> 3) as usize] & (1 << (bit & 7)) == 0 {
            return false;
        }
        h = h.wrapping_mul(PROBE_MULTIPLIER);
    }
    true
}

/// Encodes the metadata trailer.
pub(crate) fn encode_metadata(num_probes: u8) -> [u8; METADATA_BYTES] {
    debug_assert!((1..=NUM_PROBES_MAX).contains(&num_probes));
    [
        FILTER_MARKER_NEW,
        SUB_IMPL_CACHE_LOCAL_BLOOM,
        num_probes,
        0,
        0,
    ]
}

/// The validated shape of a filter: how many lines precede the metadata and
/// how many probes each key uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FilterShape {
    pub(crate) num_lines: u32,
    pub(crate) num_probes: u8,
}

/// Validates a whole filter (`data`, lines and metadata) that starts at byte
/// `offset` of `file`. Every failure is a `Corruption` at the offending byte.
pub(crate) fn decode_shape(data: &[u8], file: &str, offset: u64) -> Result<FilterShape> {
    let corrupt = |at: usize, what: String| Error::corruption(file, offset + at as u64, what);
    if data.len() < METADATA_BYTES {
        return Err(corrupt(
            0,
            format!(
                "bloom filter of {} bytes: expected at least the {METADATA_BYTES}-byte metadata",
                data.len()
            ),
        ));
    }
    if data.len() > BLOCK_SIZE_BYTES_MAX {
        return Err(corrupt(
            0,
            format!(
                "bloom filter of {} bytes: expected at most {BLOCK_SIZE_BYTES_MAX}",
                data.len()
            ),
        ));
    }
    let lines_bytes = data.len() - METADATA_BYTES;
    let [marker, sub_impl, num_probes, reserved0, reserved1] = match data.get(lines_bytes..) {
        Some(&[a, b, c, d, e]) => [a, b, c, d, e],
        _ => {
            return Err(corrupt(
                lines_bytes,
                "bloom filter metadata unreadable".into(),
            ))
        }
    };
    if marker != FILTER_MARKER_NEW {
        return Err(corrupt(
            lines_bytes,
            format!("bloom filter marker {marker:#04x}: expected {FILTER_MARKER_NEW:#04x}"),
        ));
    }
    if sub_impl != SUB_IMPL_CACHE_LOCAL_BLOOM {
        return Err(corrupt(
            lines_bytes + 1,
            format!(
                "bloom filter sub-implementation {sub_impl}: expected {SUB_IMPL_CACHE_LOCAL_BLOOM} (cache-local bloom)"
            ),
        ));
    }
    if !(1..=NUM_PROBES_MAX).contains(&num_probes) {
        return Err(corrupt(
            lines_bytes + 2,
            format!("bloom filter num_probes {num_probes}: expected 1..={NUM_PROBES_MAX}"),
        ));
    }
    if reserved0 != 0 || reserved1 != 0 {
        let at = if reserved0 != 0 { 3 } else { 4 };
        return Err(corrupt(
            lines_bytes + at,
            format!("bloom filter reserved bytes {reserved0:#04x} {reserved1:#04x}: expected zero"),
        ));
    }
    if !lines_bytes.is_multiple_of(CACHE_LINE_BYTES) {
        return Err(corrupt(
            0,
            format!(
                "bloom filter has {lines_bytes} bytes before its metadata: expected a multiple of {CACHE_LINE_BYTES}"
            ),
        ));
    }
    // The length check above bounds this by NUM_LINES_MAX, which fits in u32.
    let num_lines = u32::try_from(lines_bytes / CACHE_LINE_BYTES).map_err(|_| {
        corrupt(
            0,
            format!("bloom filter of {} bytes: too many lines", data.len()),
        )
    })?;
    Ok(FilterShape {
        num_lines,
        num_probes,
    })
}
