//! Constants and the fragment header of the log format (`docs/format/wal.md`).
//!
//! A fragment header is 7 bytes: the masked CRC32C of the type byte followed
//! by the payload (u32 LE), the payload length (u16 LE), and the type (u8).

use crate::util::crc::{crc32c, crc32c_extend, mask};

/// Bytes in a log block. Fragments never cross a block boundary.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Bytes in a fragment header: CRC (4), length (2), type (1).
pub const HEADER_SIZE: usize = 7;

/// Largest payload of one fragment (a fragment alone in a block).
pub(crate) const FRAGMENT_PAYLOAD_BYTES_MAX: usize = BLOCK_SIZE - HEADER_SIZE;

// The length field is a u16, so a fragment payload must fit in one.
const _: () = assert!(FRAGMENT_PAYLOAD_BYTES_MAX <= u16::MAX as usize);

/// Fragment types defined in this version.
pub(crate) const TYPES: usize = 6;

/// The type byte of a fragment: which part of a record it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FragmentType {
    /// Reserved: with length 0 it marks preallocated, never-written space.
    Zero = 0,
    /// A whole record.
    Full = 1,
    /// The first fragment of a record split across blocks.
    First = 2,
    /// An interior fragment of a split record.
    Middle = 3,
    /// The last fragment of a split record.
    Last = 4,
    /// Not a record: what the log before this one held when this one was
    /// started ([`PredecessorLog`]). Only at offset 0.
    PredecessorLog = 5,
}

impl FragmentType {
    /// Every type, indexed by its byte value.
    pub(crate) const ALL: [FragmentType; TYPES] = [
        FragmentType::Zero,
        FragmentType::Full,
        FragmentType::First,
        FragmentType::Middle,
        FragmentType::Last,
        FragmentType::PredecessorLog,
    ];

    /// The type for byte `b`, or `None` for an unknown type.
    pub(crate) fn from_byte(b: u8) -> Option<FragmentType> {
        FragmentType::ALL.get(usize::from(b)).copied()
    }
}

/// CRC32C of each type byte alone, indexed by type; a fragment's CRC extends
/// it over the payload so the type byte is never hashed again.
pub(crate) fn type_crcs() -> [u32; TYPES] {
    FragmentType::ALL.map(|t| crc32c(&[t as u8]))
}

/// The masked CRC stored in the header of a fragment of type `t`.
pub(crate) fn fragment_crc(type_crcs: &[u32; TYPES], t: FragmentType, payload: &[u8]) -> u32 {
    mask(crc32c_extend(type_crcs[t as usize], payload))
}

/// The log before this one, as it was when this one was started: its
/// number and size in bytes. A log that follows another starts with this,
/// so that recovery can tell when a power loss took part of the older log
/// (a memtable switch does not sync it) but kept writes of the newer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PredecessorLog {
    pub(crate) number: u64,
    pub(crate) size: u64,
}

impl PredecessorLog {
    /// Payload bytes: number and size, u64 LE each.
    pub(crate) const ENCODED_LEN: usize = 16;

    pub(crate) fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let mut b = [0u8; Self::ENCODED_LEN];
        b[..8].copy_from_slice(&self.number.to_le_bytes());
        b[8..].copy_from_slice(&self.size.to_le_bytes());
        b
    }

    /// The payload decoded, or `None` if it is not `ENCODED_LEN` bytes.
    pub(crate) fn decode(payload: &[u8]) -> Option<PredecessorLog> {
        let b: &[u8; Self::ENCODED_LEN] = payload.try_into().ok()?;
        let (number, size) = b.split_at(8);
        Some(PredecessorLog {
            number: u64::from_le_bytes(number.try_into().ok()?),
            size: u64::from_le_bytes(size.try_into().ok()?),
        })
    }
}

/// Encodes a fragment header.
pub(crate) fn encode_header(
    masked_crc: u32,
    t: FragmentType,
    payload_len: usize,
) -> [u8; HEADER_SIZE] {
    assert!(payload_len <= FRAGMENT_PAYLOAD_BYTES_MAX);
    let mut h = [0u8; HEADER_SIZE];
    h[..4].copy_from_slice(&masked_crc.to_le_bytes());
    h[4..6].copy_from_slice(&(payload_len as u16).to_le_bytes());
    h[6] = t as u8;
    h
}

/// A decoded fragment header; the type byte is kept raw so the reader can
/// report unknown types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) masked_crc: u32,
    pub(crate) payload_len: usize,
    pub(crate) type_byte: u8,
}

/// Decodes the header at the start of `src`, or `None` if `src` is shorter
/// than [`HEADER_SIZE`].
pub(crate) fn decode_header(src: &[u8]) -> Option<Header> {
    let h: &[u8; HEADER_SIZE] = src.get(..HEADER_SIZE)?.try_into().ok()?;
    Some(Header {
        masked_crc: u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
        payload_len: usize::from(u16::from_le_bytes([h[4], h[5]])),
        type_byte: h[6],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::crc::unmask;

    #[test]
    fn header_round_trip() {
        let crcs = type_crcs();
        let payload = b"hello";
        let crc = fragment_crc(&crcs, FragmentType::Middle, payload);
        let h = encode_header(crc, FragmentType::Middle, payload.len());
        let d = decode_header(&h).unwrap();
        assert_eq!(d.masked_crc, crc);
        assert_eq!(d.payload_len, 5);
        assert_eq!(d.type_byte, 3);
        // The CRC covers the type byte followed by the payload.
        assert_eq!(unmask(crc), crc32c(b"\x03hello"));
        assert_eq!(decode_header(&h[..6]), None);
    }

    #[test]
    fn predecessor_round_trip() {
        let p = PredecessorLog {
            number: 0x0102_0304_0506_0708,
            size: 64 << 20,
        };
        let b = p.encode();
        assert_eq!(b[0], 0x08);
        assert_eq!(PredecessorLog::decode(&b), Some(p));
        assert_eq!(PredecessorLog::decode(&b[..15]), None);
        assert_eq!(PredecessorLog::decode(&[0; 17]), None);
    }

    #[test]
    fn types_by_byte() {
        for t in FragmentType::ALL {
            assert_eq!(FragmentType::from_byte(t as u8), Some(t));
        }
        assert_eq!(FragmentType::from_byte(6), None);
        assert_eq!(FragmentType::from_byte(255), None);
    }
}
