//! Block compression: none, snappy, lz4 and zstd, with RocksDB's type codes.
//!
//! Layouts of the compressed payloads (see docs/format/table.md):
//! - snappy: raw snappy block format (it carries its own length);
//! - lz4, zstd: varint32 uncompressed length, then the raw lz4 block or zstd frame.
//!
//! A block that does not shrink by at least 12.5% is stored uncompressed.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::limits::BLOCK_SIZE_BYTES_MAX;
use crate::util::coding::{decode_varint32, put_varint32};

/// How a block's bytes are compressed. Values are RocksDB's on-disk codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[repr(u8)]
pub enum CompressionType {
    /// Stored as is.
    #[default]
    None = 0,
    /// Snappy raw format.
    Snappy = 1,
    /// LZ4 block format, length-prefixed.
    Lz4 = 4,
    /// Zstandard frame, length-prefixed.
    Zstd = 7,
}

impl CompressionType {
    /// Decodes an on-disk type byte.
    pub fn from_byte(b: u8) -> Option<CompressionType> {
        match b {
            0 => Some(CompressionType::None),
            1 => Some(CompressionType::Snappy),
            4 => Some(CompressionType::Lz4),
            7 => Some(CompressionType::Zstd),
            _ => None,
        }
    }

    /// The name db_bench's `--compression_type` uses.
    pub fn name(self) -> &'static str {
        match self {
            CompressionType::None => "none",
            CompressionType::Snappy => "snappy",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }

    /// Every supported type.
    pub const ALL: [CompressionType; 4] = [
        CompressionType::None,
        CompressionType::Snappy,
        CompressionType::Lz4,
        CompressionType::Zstd,
    ];
}

impl fmt::Display for CompressionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CompressionType {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "no" => Ok(CompressionType::None),
            "snappy" => Ok(CompressionType::Snappy),
            "lz4" => Ok(CompressionType::Lz4),
            "zstd" => Ok(CompressionType::Zstd),
            "zlib" | "bzip2" | "lz4hc" | "xpress" => Err(Error::NotSupported(format!(
                "compression type {s}: Strata supports none, snappy, lz4, zstd"
            ))),
            _ => Err(Error::invalid_argument(format!(
                "unknown compression type {s:?}: expected none, snappy, lz4 or zstd"
            ))),
        }
    }
}

/// zstd level used for blocks (RocksDB's default for zstd is 3 too).
const ZSTD_LEVEL: i32 = 3;

thread_local! {
    /// This thread's snappy encoder: a new one allocates its hash table
    /// for every block it compresses; a kept one reuses it.
    static SNAPPY_ENCODER: std::cell::RefCell<snap::raw::Encoder> =
        std::cell::RefCell::new(snap::raw::Encoder::new());
}

/// Compresses `raw` with `kind` into `out` (cleared first). Returns the type
/// actually used: `None` when compression does not save at least 12.5%,
/// in which case `out` is left empty and the caller stores `raw`.
pub fn compress_block(kind: CompressionType, raw: &[u8], out: &mut Vec<u8>) -> CompressionType {
    out.clear();
    let ok = match kind {
        CompressionType::None => false,
        CompressionType::Snappy => {
            out.resize(snap::raw::max_compress_len(raw.len()), 0);
            match SNAPPY_ENCODER.with(|e| e.borrow_mut().compress(raw, out)) {
                Ok(n) => {
                    out.truncate(n);
                    true
                }
                Err(_) => false,
            }
        }
        CompressionType::Lz4 => {
            put_varint32(out, raw.len() as u32);
            let start = out.len();
            out.resize(
                start + lz4_flex::block::get_maximum_output_size(raw.len()),
                0,
            );
            match lz4_flex::block::compress_into(raw, &mut out[start..]) {
                Ok(n) => {
                    out.truncate(start + n);
                    true
                }
                Err(_) => false,
            }
        }
        CompressionType::Zstd => {
            put_varint32(out, raw.len() as u32);
            match zstd::bulk::compress(raw, ZSTD_LEVEL) {
                Ok(frame) => {
                    out.extend_from_slice(&frame);
                    true
                }
                Err(_) => false,
            }
        }
    };
    if ok && out.len() < raw.len() - raw.len() / 8 {
        kind
    } else {
        out.clear();
        CompressionType::None
    }
}

/// Decompresses a block payload. `file` and `offset` locate it for errors.
#[cfg(test)]
pub fn decompress_block(
    kind: CompressionType,
    data: &[u8],
    file: &str,
    offset: u64,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    decompress_block_into(kind, data, file, offset, &mut out)?;
    Ok(out)
}

/// The size a block of `kind` holding `data` says it decompresses to (a
/// hint for its buffer: `data.len()` when unreadable, as the decompression
/// reports that itself).
pub(crate) fn uncompressed_len_hint(kind: CompressionType, data: &[u8]) -> usize {
    match kind {
        CompressionType::None => data.len(),
        CompressionType::Snappy => snap::raw::decompress_len(data).unwrap_or(data.len()),
        CompressionType::Lz4 | CompressionType::Zstd => decode_varint32(data)
            .map(|(n, _)| n as usize)
            .unwrap_or(data.len()),
    }
    .min(BLOCK_SIZE_BYTES_MAX)
}

/// [`decompress_block`] into `out`, reusing its allocation: `out` becomes
/// the block (its old contents are overwritten, not zeroed first).
pub(crate) fn decompress_block_into(
    kind: CompressionType,
    data: &[u8],
    file: &str,
    offset: u64,
    out: &mut Vec<u8>,
) -> Result<()> {
    let corrupt = |what: String| Error::corruption(file, offset, what);
    let check_len = |n: usize| -> Result<usize> {
        if n > BLOCK_SIZE_BYTES_MAX {
            return Err(corrupt(format!(
                "{kind} block claims {n} uncompressed bytes, over the {BLOCK_SIZE_BYTES_MAX}-byte limit"
            )));
        }
        Ok(n)
    };
    let prefixed_len = || -> Result<(usize, usize)> {
        let (n, used) = decode_varint32(data)
            .ok_or_else(|| corrupt(format!("{kind} block: bad length prefix")))?;
        Ok((check_len(n as usize)?, used))
    };
    match kind {
        CompressionType::None => {
            out.clear();
            out.extend_from_slice(data);
            Ok(())
        }
        CompressionType::Snappy => {
            let n = snap::raw::decompress_len(data)
                .map_err(|e| corrupt(format!("snappy header: {e}")))?;
            // Zero-fills only what the buffer grows by.
            out.resize(check_len(n)?, 0);
            let got = snap::raw::Decoder::new()
                .decompress(data, out)
                .map_err(|e| corrupt(format!("snappy: {e}")))?;
            if got != n {
                return Err(corrupt(format!("snappy: expected {n} bytes, got {got}")));
            }
            Ok(())
        }
        CompressionType::Lz4 => {
            let (n, used) = prefixed_len()?;
            out.resize(n, 0);
            let got = lz4_flex::block::decompress_into(&data[used..], out)
                .map_err(|e| corrupt(format!("lz4: {e}")))?;
            if got != n {
                return Err(corrupt(format!("lz4: expected {n} bytes, got {got}")));
            }
            Ok(())
        }
        CompressionType::Zstd => {
            let (n, used) = prefixed_len()?;
            out.resize(n, 0);
            let got = zstd::bulk::decompress_to_buffer(&data[used..], out)
                .map_err(|e| corrupt(format!("zstd: {e}")))?;
            if got != n {
                return Err(corrupt(format!("zstd: expected {n} bytes, got {got}")));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn compressible(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"abcdefgh"[(i / 7) % 8]).collect()
    }

    #[test]
    fn round_trip_every_type() {
        for kind in CompressionType::ALL {
            for n in [0usize, 1, 100, 4096, 70_000] {
                let raw = compressible(n);
                let mut out = Vec::new();
                let used = compress_block(kind, &raw, &mut out);
                if used == CompressionType::None {
                    assert!(out.is_empty());
                    continue;
                }
                assert_eq!(used, kind);
                assert!(out.len() < raw.len());
                assert_eq!(
                    decompress_block(used, &out, "t", 0).unwrap(),
                    raw,
                    "{kind} {n}"
                );
            }
            let big = compressible(70_000);
            let mut out = Vec::new();
            assert_eq!(
                compress_block(kind, &big, &mut out) == CompressionType::None,
                kind == CompressionType::None
            );
        }
    }

    #[test]
    fn incompressible_is_stored_raw() {
        let mut x: u64 = 0x1234_5678;
        let raw: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for kind in CompressionType::ALL {
            let mut out = Vec::new();
            assert_eq!(compress_block(kind, &raw, &mut out), CompressionType::None);
        }
    }

    #[test]
    fn names_parse() {
        for kind in CompressionType::ALL {
            assert_eq!(kind.name().parse::<CompressionType>().unwrap(), kind);
            assert_eq!(CompressionType::from_byte(kind as u8), Some(kind));
        }
        assert!(matches!(
            "zlib".parse::<CompressionType>(),
            Err(Error::NotSupported(_))
        ));
        assert!(matches!(
            "bogus".parse::<CompressionType>(),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn oversized_length_claim_is_corruption() {
        let mut data = Vec::new();
        put_varint32(&mut data, u32::MAX);
        for kind in [CompressionType::Lz4, CompressionType::Zstd] {
            let e = decompress_block(kind, &data, "f.sst", 77).unwrap_err();
            assert!(e.is_corruption(), "{e}");
            assert!(e.to_string().contains("f.sst at offset 77"), "{e}");
        }
    }

    proptest! {
        #[test]
        fn decompress_never_panics(kind in 0usize..4, data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decompress_block(CompressionType::ALL[kind], &data, "f", 0);
        }
    }
}
