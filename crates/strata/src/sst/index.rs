//! Index block entries. Each data block has one entry:
//!
//! ```text
//! key   := separator (>= every key in the block and < every key in the
//!          next block: a user key when no user key spans two blocks of
//!          the table, else an internal key; docs/format/table.md)
//! value := handle (varint64 offset | varint64 size) | property*
//! property := varint32 tag | varint32 len | len bytes
//! ```
//!
//! Per-block properties are recorded at write time and let readers skip
//! work without loading the block (for example "every key in this block has
//! the same prefix"). Readers skip tags they do not know, so new properties
//! do not need a format version bump.

use crate::util::coding::{put_varint32, Decoder};

use super::format::BlockHandle;

/// A decoded index entry value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexValue<'a> {
    /// Where the data block lives.
    pub handle: BlockHandle,
    /// The encoded per-block properties (possibly empty).
    pub properties: &'a [u8],
}

impl<'a> IndexValue<'a> {
    /// Decodes an index value; None when malformed.
    pub fn decode(value: &'a [u8]) -> Option<IndexValue<'a>> {
        let mut dec = Decoder::new(value);
        let handle = BlockHandle::decode_from(&mut dec)?;
        let properties = dec.remaining();
        // Validate the property list framing up front.
        let mut props = Decoder::new(properties);
        while !props.is_empty() {
            props.varint32()?;
            props.length_prefixed()?;
        }
        Some(IndexValue { handle, properties })
    }

    /// The value of property `tag`, if recorded.
    pub fn property(&self, tag: u32) -> Option<&'a [u8]> {
        let mut dec = Decoder::new(self.properties);
        while !dec.is_empty() {
            let t = dec.varint32()?;
            let v = dec.length_prefixed()?;
            if t == tag {
                return Some(v);
            }
        }
        None
    }
}

/// Encodes an index value with the given `(tag, bytes)` properties.
pub fn encode_index_value(dst: &mut Vec<u8>, handle: BlockHandle, properties: &[(u32, &[u8])]) {
    handle.encode_to(dst);
    for (tag, bytes) in properties {
        put_varint32(dst, *tag);
        put_varint32(dst, bytes.len() as u32);
        dst.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_with_properties() {
        let h = BlockHandle {
            offset: 4096,
            size: 4000,
        };
        let mut buf = Vec::new();
        encode_index_value(&mut buf, h, &[(1, b"\x01"), (7, b"")]);
        let v = IndexValue::decode(&buf).unwrap();
        assert_eq!(v.handle, h);
        assert_eq!(v.property(1), Some(&b"\x01"[..]));
        assert_eq!(v.property(7), Some(&b""[..]));
        assert_eq!(v.property(2), None);
        buf.push(3); // a tag with no length
        assert!(IndexValue::decode(&buf).is_none());
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), tag in any::<u32>()) {
            if let Some(v) = IndexValue::decode(&bytes) {
                let _ = v.property(tag);
            }
        }
    }
}
