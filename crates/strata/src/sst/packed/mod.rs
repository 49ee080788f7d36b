//! Packed tables: a table format for point lookups on data that fits in
//! memory. The file is mapped (or read whole) once; a lookup is arithmetic
//! or a search over fixed-width integers, then one slice of the mapping. No
//! blocks, no block cache, no decompression.
//!
//! ```text
//! [values]            every value, back to back
//! [key index]         all-one range | bitmap | sorted keys
//! [key starts]        first entry of each user key (multi-version tables only)
//! [version tags]      each entry's sequence number and kind (when any is not 0/value)
//! [value offsets]     where each value starts (unless all have one length)
//! [header]            counts and layout choices
//! [properties]        the same block as a block-based table's
//! [footer]            section table with a CRC32C per section, version, magic
//! ```
//!
//! The byte layout is specified in `docs/format/packed_table.md`.

mod builder;
mod footer;
mod index;
mod iter;
mod reader;

pub use builder::PackedTableBuilder;
pub(crate) use footer::is_packed_table;
pub use footer::PACKED_TABLE_MAGIC;
pub use iter::PackedTableIterator;
pub use reader::PackedTableReader;

/// How a packed table's user keys are indexed, chosen by the builder from
/// the key set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackedKeyKind {
    /// Keys of one length whose bytes after a common prefix are a
    /// big-endian integer range with no gap: the index is `min` and `max`.
    AllOne,
    /// Keys of one length forming big-endian integers after a common
    /// prefix, with gaps: a bitmap over `min..=max` with a rank per word.
    Bitmap,
    /// Any other keys: the sorted keys with an array of their first eight
    /// bytes as integers, searched without decoding.
    Sorted,
}

impl PackedKeyKind {
    fn code(self) -> u8 {
        match self {
            PackedKeyKind::AllOne => 0,
            PackedKeyKind::Bitmap => 1,
            PackedKeyKind::Sorted => 2,
        }
    }

    fn from_code(c: u8) -> Option<PackedKeyKind> {
        Some(match c {
            0 => PackedKeyKind::AllOne,
            1 => PackedKeyKind::Bitmap,
            2 => PackedKeyKind::Sorted,
            _ => return None,
        })
    }

    /// The name recorded as the table's `index_type` property.
    pub fn name(self) -> &'static str {
        match self {
            PackedKeyKind::AllOne => "packed_all_one",
            PackedKeyKind::Bitmap => "packed_bitmap",
            PackedKeyKind::Sorted => "packed_sorted",
        }
    }
}

/// Header bytes (section 5).
const HEADER_BYTES: usize = 32;
/// Header flag: the version tags section is present.
const FLAG_TAGS: u8 = 1;
/// Header flag: the key starts section is present.
const FLAG_STARTS: u8 = 2;

/// How values are located.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueLayout {
    /// Every value has this length: value `i` starts at `i * len`.
    Fixed(u32),
    /// `n + 1` little-endian u32 offsets.
    Offsets32,
    /// `n + 1` little-endian u64 offsets.
    Offsets64,
}

/// The sections, in the footer's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
enum Section {
    Values = 0,
    KeyIndex = 1,
    KeyStarts = 2,
    Tags = 3,
    ValueOffsets = 4,
    Header = 5,
    Properties = 6,
}

const SECTIONS: usize = 7;

impl Section {
    const ALL: [Section; SECTIONS] = [
        Section::Values,
        Section::KeyIndex,
        Section::KeyStarts,
        Section::Tags,
        Section::ValueOffsets,
        Section::Header,
        Section::Properties,
    ];

    fn name(self) -> &'static str {
        match self {
            Section::Values => "values",
            Section::KeyIndex => "key index",
            Section::KeyStarts => "key starts",
            Section::Tags => "version tags",
            Section::ValueOffsets => "value offsets",
            Section::Header => "header",
            Section::Properties => "properties",
        }
    }
}

/// Keys whose suffix after the common prefix is at most this many bytes
/// can be read as integers.
const INT_SUFFIX_BYTES_MAX: usize = 8;
/// A bitmap index is chosen over a sorted one when `max - min + 1` is at
/// most this many times the key count (at most 6 bytes of bitmap and
/// ranks per key, against at least 12 for the sorted index).
const BITMAP_SPARSITY_MAX: u128 = 32;

/// The suffix of `key` after `prefix_len` bytes as a big-endian integer.
#[inline]
fn suffix_int(key: &[u8], prefix_len: usize) -> u64 {
    let suffix = &key[prefix_len..];
    if let Ok(eight) = <[u8; 8]>::try_from(suffix) {
        return u64::from_be_bytes(eight);
    }
    let mut v = 0u64;
    for &b in suffix {
        v = (v << 8) | u64::from(b);
    }
    v
}

#[cfg(test)]
mod tests;
