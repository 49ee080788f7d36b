//! Internal keys: `user_key ++ fixed64_le(sequence << 8 | kind)`.
//!
//! Internal keys order by user key ascending (under the user comparator), then
//! by sequence number descending, then by kind descending, so the newest
//! version of a user key comes first. See docs/format/internal_key.md.

use std::cmp::Ordering;
use std::sync::Arc;

use super::Comparator;
use crate::util::coding::{decode_fixed64, put_fixed64};

/// A write's position in the total order of writes.
pub type SequenceNumber = u64;

/// Largest sequence number: 56 bits, the trailer's top bits.
pub const MAX_SEQUENCE_NUMBER: SequenceNumber = (1 << 56) - 1;

/// Bytes of the trailer after the user key.
pub const TRAILER_BYTES: usize = 8;

/// What an internal key records. The numeric values are on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A deletion marker (tombstone).
    Deletion = 0,
    /// A value.
    Value = 1,
    /// A merge operand: combined with the older entries of its key by the
    /// database's merge operator.
    Merge = 2,
    /// A range deletion: the user key is the range's start, and the value
    /// its exclusive end. Found only in a table's range-deletion block, in
    /// a write batch, and (at the largest sequence number) as the upper
    /// bound of a file whose last covered key is the range's end: that
    /// bound sorts before every entry of its user key, so the file holds
    /// none of them. See docs/format/range_del.md.
    RangeDeletion = 15,
}

impl ValueKind {
    /// The kind used to build a seek key: the largest kind of a point
    /// entry, so a seek for (key, seq) lands on the first entry with
    /// sequence <= seq. (A file bound of kind `RangeDeletion` at the
    /// largest sequence number sorts before it: a seek passes that file.)
    pub const FOR_SEEK: ValueKind = ValueKind::Merge;

    /// Decodes a kind byte.
    pub(crate) fn from_byte(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::Merge),
            15 => Some(ValueKind::RangeDeletion),
            _ => None,
        }
    }
}

/// Packs a sequence number and kind into the 8-byte trailer value.
pub fn pack_trailer(seq: SequenceNumber, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE_NUMBER);
    (seq << 8) | kind as u64
}

/// An internal key split into its parts, borrowing the user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedInternalKey<'a> {
    /// The key the user wrote.
    pub user_key: &'a [u8],
    /// The write's sequence number.
    pub sequence: SequenceNumber,
    /// Value or deletion.
    pub kind: ValueKind,
}

/// Splits an internal key; `None` if it is too short or its kind is unknown.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedInternalKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_BYTES)?;
    let trailer = decode_fixed64(&ikey[split..])?;
    Some(ParsedInternalKey {
        user_key: &ikey[..split],
        sequence: trailer >> 8,
        kind: ValueKind::from_byte(trailer as u8)?,
    })
}

/// [`parse_internal_key`] for a point entry (a data block's, a
/// memtable's): `None` also for kind `RangeDeletion`, which keys only
/// range-deletion blocks and file bounds, so that such an entry among
/// data is reported as malformed instead of read as a deletion.
pub(crate) fn parse_entry_key(ikey: &[u8]) -> Option<ParsedInternalKey<'_>> {
    parse_internal_key(ikey).filter(|p| p.kind != ValueKind::RangeDeletion)
}

/// Writes into `dst` (cleared first) the internal key (`user_key`, `seq`,
/// `kind`), reusing its allocation.
pub(crate) fn build_internal_key(
    dst: &mut Vec<u8>,
    user_key: &[u8],
    seq: SequenceNumber,
    kind: ValueKind,
) {
    dst.clear();
    dst.extend_from_slice(user_key);
    put_fixed64(dst, pack_trailer(seq, kind));
}

/// The user-key part of an internal key (the whole key if shorter than a trailer).
pub fn extract_user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_BYTES)]
}

/// An owned, encoded internal key.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InternalKey(Vec<u8>);

impl InternalKey {
    /// Encodes (user key, sequence, kind).
    pub fn new(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Self {
        let mut v = Vec::with_capacity(user_key.len() + TRAILER_BYTES);
        v.extend_from_slice(user_key);
        put_fixed64(&mut v, pack_trailer(seq, kind));
        InternalKey(v)
    }
    /// Wraps already-encoded bytes.
    pub fn from_encoded(bytes: Vec<u8>) -> Self {
        InternalKey(bytes)
    }
    /// The encoded bytes.
    pub fn encoded(&self) -> &[u8] {
        &self.0
    }
    /// The user key.
    pub fn user_key(&self) -> &[u8] {
        extract_user_key(&self.0)
    }
}

/// Orders internal keys by user key (user comparator), then newest first.
#[derive(Debug, Clone)]
pub struct InternalKeyComparator {
    user: Arc<dyn Comparator>,
}

impl InternalKeyComparator {
    /// Wraps a user comparator.
    pub fn new(user: Arc<dyn Comparator>) -> Self {
        InternalKeyComparator { user }
    }
    /// The user comparator.
    pub fn user_comparator(&self) -> &Arc<dyn Comparator> {
        &self.user
    }
}

fn trailer_of(ikey: &[u8]) -> u64 {
    let n = ikey.len();
    if n < TRAILER_BYTES {
        return 0;
    }
    decode_fixed64(&ikey[n - TRAILER_BYTES..]).unwrap_or(0)
}

/// The internal-key order over user comparator `user`: user key, then
/// trailer (sequence and kind) descending. [`InternalKeyComparator`] calls
/// it through the trait object; code that knows the user comparator's type
/// calls it with that type, so the comparison inlines.
#[inline]
pub(crate) fn compare_internal<C: Comparator + ?Sized>(user: &C, a: &[u8], b: &[u8]) -> Ordering {
    user.compare(extract_user_key(a), extract_user_key(b))
        .then_with(|| trailer_of(b).cmp(&trailer_of(a)))
}

impl Comparator for InternalKeyComparator {
    fn name(&self) -> &str {
        "strata.InternalKeyComparator"
    }

    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_internal(&*self.user, a, b)
    }

    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let user_start = extract_user_key(start);
        let user_limit = extract_user_key(limit);
        let mut tmp = user_start.to_vec();
        self.user.find_shortest_separator(&mut tmp, user_limit);
        if tmp.len() < user_start.len() && self.user.compare(user_start, &tmp) == Ordering::Less {
            // The user key grew logically; give it the earliest possible trailer.
            put_fixed64(
                &mut tmp,
                pack_trailer(MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK),
            );
            debug_assert!(self.compare(start, &tmp) == Ordering::Less);
            debug_assert!(self.compare(&tmp, limit) == Ordering::Less);
            *start = tmp;
        }
    }

    fn find_short_successor(&self, key: &mut Vec<u8>) {
        let user_key = extract_user_key(key);
        let mut tmp = user_key.to_vec();
        self.user.find_short_successor(&mut tmp);
        if tmp.len() < user_key.len() && self.user.compare(user_key, &tmp) == Ordering::Less {
            put_fixed64(
                &mut tmp,
                pack_trailer(MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK),
            );
            *key = tmp;
        }
    }

    fn can_keys_with_different_bytes_be_equal(&self) -> bool {
        self.user.can_keys_with_different_bytes_be_equal()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::BytewiseComparator;

    fn ik(k: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
        InternalKey::new(k, seq, kind).encoded().to_vec()
    }

    #[test]
    fn round_trip_and_order() {
        let k = ik(b"foo", 42, ValueKind::Value);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.sequence, p.kind),
            (&b"foo"[..], 42, ValueKind::Value)
        );
        let c = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        assert_eq!(
            c.compare(
                &ik(b"a", 1, ValueKind::Value),
                &ik(b"b", 9, ValueKind::Value)
            ),
            Ordering::Less
        );
        assert_eq!(
            c.compare(
                &ik(b"a", 9, ValueKind::Value),
                &ik(b"a", 1, ValueKind::Value)
            ),
            Ordering::Less
        );
        assert_eq!(
            c.compare(
                &ik(b"a", 5, ValueKind::Value),
                &ik(b"a", 5, ValueKind::Deletion)
            ),
            Ordering::Less
        );
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        let kind_at = bad.len() - TRAILER_BYTES; // little-endian: kind is the trailer's first byte
        bad[kind_at] = 9;
        assert!(parse_internal_key(&bad).is_none());
    }

    #[test]
    fn separator_shortens_user_key() {
        let c = InternalKeyComparator::new(Arc::new(BytewiseComparator));
        let mut s = ik(b"foobar", 100, ValueKind::Value);
        let limit = ik(b"fozz", 200, ValueKind::Value);
        c.find_shortest_separator(&mut s, &limit);
        assert_eq!(extract_user_key(&s), b"fop");
        assert_eq!(
            c.compare(&ik(b"foobar", 100, ValueKind::Value), &s),
            Ordering::Less
        );
        assert_eq!(c.compare(&s, &limit), Ordering::Less);
        // Same user key: unchanged.
        let mut s = ik(b"foo", 100, ValueKind::Value);
        c.find_shortest_separator(&mut s, &ik(b"foo", 99, ValueKind::Value));
        assert_eq!(s, ik(b"foo", 100, ValueKind::Value));
    }
}
