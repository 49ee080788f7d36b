//! The memtable entry encoding, stored in each skiplist node:
//!
//! ```text
//! entry := internal_key_len:varint32 internal_key:u8[internal_key_len]
//!          value_len:varint32 value:u8[value_len]
//! ```
//!
//! Entries are written by [`MemTable::add`](super::MemTable::add) and never
//! come from disk, so a malformed one is a bug here and decoding asserts.

use std::cmp::Ordering;

use crate::key::prefix_search::key_prefix;
use crate::key::{
    compare_internal, extract_user_key, BuiltinOrder, BytewiseComparator, Comparator,
    InternalKeyComparator, ReverseBytewiseComparator,
};
use crate::util::coding::{decode_varint32, VARINT32_BYTES_MAX};

use super::skiplist::EntryOrder;

/// A varint32 encoded on the stack.
#[derive(Debug, Clone, Copy)]
pub(super) struct Varint32 {
    buf: [u8; VARINT32_BYTES_MAX],
    len: usize,
}

impl Varint32 {
    /// Encodes `v`.
    pub(super) fn new(mut v: u32) -> Varint32 {
        let mut buf = [0; VARINT32_BYTES_MAX];
        let mut len = 0;
        while v >= 0x80 {
            buf[len] = (v as u8) | 0x80;
            v >>= 7;
            len += 1;
        }
        buf[len] = v as u8;
        Varint32 { buf, len: len + 1 }
    }

    /// The encoded bytes.
    pub(super) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Reads one varint32-length-prefixed slice: (slice, rest).
#[inline]
fn split_prefixed(src: &[u8]) -> (&[u8], &[u8]) {
    // Keys and small values have a one-byte length.
    if let Some((&len, rest)) = src.split_first().filter(|(&b, _)| b < 0x80) {
        let (bytes, rest) = rest.split_at(len as usize);
        return (bytes, rest);
    }
    let (len, used) = decode_varint32(src).expect("memtable entry: bad length");
    let end = used + len as usize;
    let bytes = src.get(used..end).expect("memtable entry: truncated");
    (bytes, &src[end..])
}

/// The internal key of an entry.
pub(super) fn entry_key(entry: &[u8]) -> &[u8] {
    split_prefixed(entry).0
}

/// The (internal key, value) of an entry.
pub(super) fn decode_entry(entry: &[u8]) -> (&[u8], &[u8]) {
    let (key, rest) = split_prefixed(entry);
    let (value, rest) = split_prefixed(rest);
    debug_assert!(rest.is_empty(), "memtable entry: trailing bytes");
    (key, value)
}

/// Orders entries by their internal keys. Under a built-in user order the
/// comparison is inlined (no call through the comparator's trait object).
#[derive(Debug)]
pub(super) struct InternalKeyOrder {
    pub(super) cmp: InternalKeyComparator,
    builtin: Option<BuiltinOrder>,
}

impl InternalKeyOrder {
    pub(super) fn new(cmp: InternalKeyComparator) -> InternalKeyOrder {
        let builtin = cmp.user_comparator().builtin_order();
        InternalKeyOrder { cmp, builtin }
    }
}

impl EntryOrder for InternalKeyOrder {
    #[inline]
    fn key<'a>(&self, entry: &'a [u8]) -> &'a [u8] {
        entry_key(entry)
    }

    #[inline]
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        match self.builtin {
            Some(order) => {
                // The 8-byte prefixes decide most comparisons without a
                // `memcmp` call (they are monotone in bytewise order).
                let pa = key_prefix(extract_user_key(a));
                let pb = key_prefix(extract_user_key(b));
                match order {
                    BuiltinOrder::Bytewise if pa != pb => pa.cmp(&pb),
                    BuiltinOrder::ReverseBytewise if pa != pb => pb.cmp(&pa),
                    BuiltinOrder::Bytewise => compare_internal(&BytewiseComparator, a, b),
                    BuiltinOrder::ReverseBytewise => {
                        compare_internal(&ReverseBytewiseComparator, a, b)
                    }
                }
            }
            None => self.cmp.compare(a, b),
        }
    }

    #[inline]
    fn prefix(&self, key: &[u8]) -> Option<u64> {
        // The user keys' prefixes decide `compare` where they differ.
        let order = self.builtin?;
        let prefix = key_prefix(extract_user_key(key));
        match order {
            BuiltinOrder::Bytewise => Some(prefix),
            BuiltinOrder::ReverseBytewise => Some(!prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::coding::put_varint32;

    #[test]
    fn varint_matches_coding_and_entries_round_trip() {
        for v in [0, 1, 127, 128, 300, 1 << 21, u32::MAX] {
            let mut want = Vec::new();
            put_varint32(&mut want, v);
            assert_eq!(Varint32::new(v).as_bytes(), &want[..]);
        }
        let key = vec![7u8; 200];
        let value = b"v";
        let mut entry = Varint32::new(200).as_bytes().to_vec();
        entry.extend_from_slice(&key);
        entry.extend_from_slice(Varint32::new(1).as_bytes());
        entry.extend_from_slice(value);
        assert_eq!(decode_entry(&entry), (&key[..], &value[..]));
        assert_eq!(entry_key(&entry), &key[..]);
    }
}
