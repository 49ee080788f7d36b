//! The packed table footer: where each section is and its checksum.
//!
//! ```text
//! footer (156 B) := 7 x (offset u64 | size u64 | masked crc32c u32)
//!                   | format_version u32 | masked crc32c of bytes 0..144 u32
//!                   | magic u64 ("STRATAP1")
//! ```

use crate::error::{Error, Result};
use crate::util::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64};
use crate::util::crc::{crc32c, mask, unmask};

use super::{Section, SECTIONS};

/// The last eight bytes of every packed table ("STRATAP1" read as u64 LE).
pub const PACKED_TABLE_MAGIC: u64 = u64::from_le_bytes(*b"STRATAP1");
/// The packed format version this code writes and reads.
pub(super) const PACKED_FORMAT_VERSION: u32 = 1;
const SECTION_ENTRY_BYTES: usize = 20;
const SECTION_TABLE_BYTES: usize = SECTIONS * SECTION_ENTRY_BYTES;
/// Size of the footer at the end of every packed table.
pub(super) const PACKED_FOOTER_BYTES: usize = SECTION_TABLE_BYTES + 16;

/// Where a section lies and the masked CRC32C of its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct SectionHandle {
    pub(super) offset: u64,
    pub(super) size: u64,
    pub(super) crc: u32,
}

/// The decoded footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PackedFooter {
    pub(super) sections: [SectionHandle; SECTIONS],
    pub(super) format_version: u32,
}

impl PackedFooter {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PACKED_FOOTER_BYTES);
        for s in &self.sections {
            put_fixed64(&mut out, s.offset);
            put_fixed64(&mut out, s.size);
            put_fixed32(&mut out, s.crc);
        }
        put_fixed32(&mut out, self.format_version);
        let crc = mask(crc32c(&out));
        put_fixed32(&mut out, crc);
        put_fixed64(&mut out, PACKED_TABLE_MAGIC);
        debug_assert_eq!(out.len(), PACKED_FOOTER_BYTES);
        out
    }

    /// Decodes the footer found at `offset` of `file`, whose sections must
    /// all lie before it.
    pub(super) fn decode(bytes: &[u8], file: &str, offset: u64) -> Result<PackedFooter> {
        let corrupt = |what: String| Error::corruption(file, offset, what);
        if bytes.len() != PACKED_FOOTER_BYTES {
            return Err(corrupt(format!(
                "packed footer is {} bytes, expected {PACKED_FOOTER_BYTES}",
                bytes.len()
            )));
        }
        let magic = decode_fixed64(&bytes[PACKED_FOOTER_BYTES - 8..]).unwrap_or(0);
        if magic != PACKED_TABLE_MAGIC {
            return Err(corrupt(format!(
                "bad packed table magic number {magic:#018x}, expected {PACKED_TABLE_MAGIC:#018x}"
            )));
        }
        let stored = unmask(decode_fixed32(&bytes[SECTION_TABLE_BYTES + 4..]).unwrap_or(0));
        let actual = crc32c(&bytes[..SECTION_TABLE_BYTES + 4]);
        if stored != actual {
            return Err(corrupt(format!(
                "packed footer checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
        let format_version = decode_fixed32(&bytes[SECTION_TABLE_BYTES..]).unwrap_or(0);
        if format_version != PACKED_FORMAT_VERSION {
            return Err(corrupt(format!(
                "packed format version {format_version}, this build reads {PACKED_FORMAT_VERSION}"
            )));
        }
        let mut sections = [SectionHandle::default(); SECTIONS];
        for (i, s) in sections.iter_mut().enumerate() {
            let e = &bytes[i * SECTION_ENTRY_BYTES..(i + 1) * SECTION_ENTRY_BYTES];
            *s = SectionHandle {
                offset: decode_fixed64(e).unwrap_or(0),
                size: decode_fixed64(&e[8..]).unwrap_or(0),
                crc: decode_fixed32(&e[16..]).unwrap_or(0),
            };
            if s.offset.checked_add(s.size).is_none_or(|end| end > offset) {
                return Err(corrupt(format!(
                    "{} section at {} of {} bytes runs past the footer at {offset}",
                    Section::ALL[i].name(),
                    s.offset,
                    s.size
                )));
            }
        }
        Ok(PackedFooter {
            sections,
            format_version,
        })
    }
}

impl PackedFooter {
    /// The bytes of section `s` in `data` (the whole file; `decode`
    /// checked that every section lies before the footer).
    pub(super) fn section<'a>(&self, data: &'a [u8], s: Section) -> &'a [u8] {
        let h = self.sections[s as usize];
        &data[h.offset as usize..(h.offset + h.size) as usize]
    }

    /// Checks section `s`'s checksum; the error says what mismatched.
    pub(super) fn check(&self, data: &[u8], s: Section) -> std::result::Result<(), String> {
        let h = self.sections[s as usize];
        let actual = section_crc(self.section(data, s));
        if actual == h.crc {
            Ok(())
        } else {
            Err(format!(
                "checksum mismatch over {} bytes: stored {:#010x}, computed {actual:#010x}",
                h.size, h.crc
            ))
        }
    }
}

/// True when the file's last eight bytes (`tail`) are the packed magic.
pub(crate) fn is_packed_table(tail: &[u8; 8]) -> bool {
    u64::from_le_bytes(*tail) == PACKED_TABLE_MAGIC
}

/// The masked CRC32C a section handle records.
pub(super) fn section_crc(bytes: &[u8]) -> u32 {
    mask(crc32c(bytes))
}
