//! A version edit: one change to the set of table files and counters, stored
//! as one manifest record (`docs/format/manifest.md`).
//!
//! ```text
//! edit  := field*
//! field := tag:varint32 payload
//!   1   comparator        name: varint64 length, UTF-8 bytes
//!   2   log_number        varint64
//!   3   next_file_number  varint64
//!   4   last_sequence     varint64
//!   6   deleted_file      level: varint32, number: varint64
//!   20  merge_operator    name: varint64 length, UTF-8 bytes (empty: none)
//!   100 new_file          level: varint32, number: varint64, file_size: varint64,
//!                         smallest, largest: varint64 length + internal key,
//!                         smallest_seqno: varint64, largest_seqno: varint64
//!   101 new_file          as 100, for a table holding range deletions
//!   200 column_family     id: varint32 (absent: the default family, 0)
//!   201 column_family_add name: varint64 length, UTF-8 bytes
//!   202 column_family_drop (no payload)
//!   203 max_column_family id: varint32
//! ```
//!
//! Files, the log number, the comparator and the merge operator of an edit
//! belong to its column family; the next file number and the last sequence
//! are the database's.
//!
//! The decoder trusts nothing: every length is checked against the record,
//! levels against [`NUM_LEVELS`], keys must parse as internal keys, and an
//! unknown tag is corruption (skipping it could drop a file deletion).

use std::collections::BTreeSet;

use super::format::{
    TAG_COLUMN_FAMILY, TAG_COLUMN_FAMILY_ADD, TAG_COLUMN_FAMILY_DROP, TAG_COMPARATOR,
    TAG_DELETED_FILE, TAG_LAST_SEQUENCE, TAG_LOG_NUMBER, TAG_MAX_COLUMN_FAMILY, TAG_MERGE_OPERATOR,
    TAG_NEW_FILE, TAG_NEW_FILE_WITH_RANGE_DELETIONS, TAG_NEXT_FILE_NUMBER,
};
use super::NUM_LEVELS;
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, InternalKey, MAX_SEQUENCE_NUMBER, TRAILER_BYTES};
use crate::limits::KEY_SIZE_BYTES_MAX;
use crate::util::coding::{put_length_prefixed, put_varint32, put_varint64, Decoder};

/// The persisted description of a table file added by an edit (the fields
/// of [`FileMetaData`](super::FileMetaData) that reach the manifest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// File number: the table is `NNNNNN.sst`.
    pub number: u64,
    /// Size of the table file in bytes.
    pub file_size: u64,
    /// Smallest internal key in the file.
    pub smallest: InternalKey,
    /// Largest internal key in the file.
    pub largest: InternalKey,
    /// Smallest sequence number in the file.
    pub smallest_seqno: u64,
    /// Largest sequence number in the file.
    pub largest_seqno: u64,
    /// The table holds range deletions (recorded with tag 101 instead of
    /// 100, so that reads know which tables to ask without opening all).
    pub has_range_deletions: bool,
}

/// A change to a version: files deleted and added, and new values of the
/// counters the version set persists. Fields left unset keep their value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    comparator: Option<String>,
    /// The merge operator's name; `Some("")` records that there is none.
    merge_operator: Option<String>,
    log_number: Option<u64>,
    next_file_number: Option<u64>,
    last_sequence: Option<u64>,
    /// (level, file number); every level is below `NUM_LEVELS`.
    deleted_files: BTreeSet<(usize, u64)>,
    /// (level, file), in the order added; every level is below `NUM_LEVELS`.
    new_files: Vec<(usize, NewFile)>,
    /// The column family the edit changes (0: the default).
    column_family: u32,
    /// The edit creates its column family, with this name.
    column_family_add: Option<String>,
    /// The edit drops its column family.
    column_family_drop: bool,
    /// The largest column family id handed out so far.
    max_column_family: Option<u32>,
}

impl VersionEdit {
    /// An edit that changes nothing.
    pub fn new() -> VersionEdit {
        VersionEdit::default()
    }

    /// Records the user comparator's name, checked at every recovery.
    pub fn set_comparator_name(&mut self, name: impl Into<String>) {
        self.comparator = Some(name.into());
    }

    /// Sets the number of the oldest write-ahead log still needed: logs
    /// with smaller numbers are reflected in tables.
    pub fn set_log_number(&mut self, number: u64) {
        self.log_number = Some(number);
    }

    /// Sets the next file number to hand out.
    pub fn set_next_file_number(&mut self, number: u64) {
        self.next_file_number = Some(number);
    }

    /// Sets the last sequence number used by a write.
    pub fn set_last_sequence(&mut self, seq: u64) {
        assert!(seq <= MAX_SEQUENCE_NUMBER, "sequence {seq} beyond 56 bits");
        self.last_sequence = Some(seq);
    }

    /// Adds table `number` to `level`.
    // Mirrors LevelDB's VersionEdit::AddFile; `add_new_file` takes a struct.
    #[allow(clippy::too_many_arguments)]
    pub fn add_file(
        &mut self,
        level: usize,
        number: u64,
        file_size: u64,
        smallest: InternalKey,
        largest: InternalKey,
        smallest_seqno: u64,
        largest_seqno: u64,
    ) {
        self.add_new_file(
            level,
            NewFile {
                number,
                file_size,
                smallest,
                largest,
                smallest_seqno,
                largest_seqno,
                has_range_deletions: false,
            },
        );
    }

    /// Adds a table to `level`.
    pub fn add_new_file(&mut self, level: usize, file: NewFile) {
        assert!(level < NUM_LEVELS, "level {level} out of range");
        assert!(
            file.smallest_seqno <= file.largest_seqno,
            "file {}: smallest_seqno {} > largest_seqno {}",
            file.number,
            file.smallest_seqno,
            file.largest_seqno
        );
        self.new_files.push((level, file));
    }

    /// Removes table `number` from `level`.
    pub fn delete_file(&mut self, level: usize, number: u64) {
        assert!(level < NUM_LEVELS, "level {level} out of range");
        self.deleted_files.insert((level, number));
    }

    /// Records the name of the merge operator the database runs with
    /// (empty for none).
    pub fn set_merge_operator_name(&mut self, name: impl Into<String>) {
        self.merge_operator = Some(name.into());
    }

    /// The merge operator name, if the edit records one.
    pub fn merge_operator_name(&self) -> Option<&str> {
        self.merge_operator.as_deref()
    }

    /// The comparator name, if the edit records one.
    pub fn comparator_name(&self) -> Option<&str> {
        self.comparator.as_deref()
    }

    /// The log number, if set.
    pub fn log_number(&self) -> Option<u64> {
        self.log_number
    }

    /// The next file number, if set.
    pub fn next_file_number(&self) -> Option<u64> {
        self.next_file_number
    }

    /// The last sequence number, if set.
    pub fn last_sequence(&self) -> Option<u64> {
        self.last_sequence
    }

    /// Makes the edit change column family `id` (default: 0).
    pub fn set_column_family(&mut self, id: u32) {
        self.column_family = id;
    }

    /// The column family the edit changes.
    pub fn column_family(&self) -> u32 {
        self.column_family
    }

    /// Makes the edit create its column family under `name`.
    pub fn add_column_family(&mut self, name: impl Into<String>) {
        self.column_family_add = Some(name.into());
    }

    /// The name of the column family the edit creates, if it creates one.
    pub fn column_family_add(&self) -> Option<&str> {
        self.column_family_add.as_deref()
    }

    /// Makes the edit drop its column family.
    pub fn drop_column_family(&mut self) {
        self.column_family_drop = true;
    }

    /// True if the edit drops its column family.
    pub fn is_column_family_drop(&self) -> bool {
        self.column_family_drop
    }

    /// Records the largest column family id handed out.
    pub fn set_max_column_family(&mut self, id: u32) {
        self.max_column_family = Some(id);
    }

    /// The largest column family id handed out, if recorded.
    pub fn max_column_family(&self) -> Option<u32> {
        self.max_column_family
    }

    /// Deleted files as (level, number), ordered.
    pub fn deleted_files(&self) -> &BTreeSet<(usize, u64)> {
        &self.deleted_files
    }

    /// Added files as (level, file), in the order added.
    pub fn new_files(&self) -> &[(usize, NewFile)] {
        &self.new_files
    }

    /// Appends the encoding of the edit to `dst`.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        if self.column_family != 0 {
            put_varint32(dst, TAG_COLUMN_FAMILY);
            put_varint32(dst, self.column_family);
        }
        if let Some(name) = &self.column_family_add {
            put_varint32(dst, TAG_COLUMN_FAMILY_ADD);
            put_length_prefixed(dst, name.as_bytes());
        }
        if self.column_family_drop {
            put_varint32(dst, TAG_COLUMN_FAMILY_DROP);
        }
        if let Some(id) = self.max_column_family {
            put_varint32(dst, TAG_MAX_COLUMN_FAMILY);
            put_varint32(dst, id);
        }
        if let Some(name) = &self.comparator {
            put_varint32(dst, TAG_COMPARATOR);
            put_length_prefixed(dst, name.as_bytes());
        }
        if let Some(name) = &self.merge_operator {
            put_varint32(dst, TAG_MERGE_OPERATOR);
            put_length_prefixed(dst, name.as_bytes());
        }
        let counters = [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
        ];
        for (tag, value) in counters {
            if let Some(v) = value {
                put_varint32(dst, tag);
                put_varint64(dst, v);
            }
        }
        for &(level, number) in &self.deleted_files {
            put_varint32(dst, TAG_DELETED_FILE);
            put_varint32(dst, level_u32(level));
            put_varint64(dst, number);
        }
        for (level, f) in &self.new_files {
            let tag = if f.has_range_deletions {
                TAG_NEW_FILE_WITH_RANGE_DELETIONS
            } else {
                TAG_NEW_FILE
            };
            put_varint32(dst, tag);
            put_varint32(dst, level_u32(*level));
            put_varint64(dst, f.number);
            put_varint64(dst, f.file_size);
            put_length_prefixed(dst, f.smallest.encoded());
            put_length_prefixed(dst, f.largest.encoded());
            put_varint64(dst, f.smallest_seqno);
            put_varint64(dst, f.largest_seqno);
        }
    }

    /// Decodes an edit from one manifest record. `file` and `offset` (the
    /// record's offset in the manifest) go into a `Corruption` error, with
    /// the byte within the record and what was expected there.
    pub fn decode(src: &[u8], file: &str, offset: u64) -> Result<VersionEdit> {
        let mut r = FieldReader {
            d: Decoder::new(src),
            file,
            offset,
            field_start: 0,
            tag: 0,
        };
        let mut edit = VersionEdit::default();
        // Each pass consumes at least one byte or returns, so the loop runs
        // at most src.len() times.
        while !r.d.is_empty() {
            r.field_start = r.d.position();
            r.tag = 0;
            r.tag = r.d.varint32().ok_or_else(|| r.error("truncated tag"))?;
            match r.tag {
                TAG_COMPARATOR => {
                    let name = r.d.length_prefixed();
                    let name = name.ok_or_else(|| r.error("truncated comparator name"))?;
                    let name = std::str::from_utf8(name)
                        .map_err(|_| r.error("comparator name is not UTF-8"))?;
                    edit.comparator = Some(name.to_owned());
                }
                TAG_MERGE_OPERATOR => {
                    let name = r.d.length_prefixed();
                    let name = name.ok_or_else(|| r.error("truncated merge operator name"))?;
                    let name = std::str::from_utf8(name)
                        .map_err(|_| r.error("merge operator name is not UTF-8"))?;
                    edit.merge_operator = Some(name.to_owned());
                }
                TAG_LOG_NUMBER => edit.log_number = Some(r.varint64("log number")?),
                TAG_NEXT_FILE_NUMBER => {
                    edit.next_file_number = Some(r.varint64("next file number")?);
                }
                TAG_LAST_SEQUENCE => edit.last_sequence = Some(r.sequence("last sequence")?),
                TAG_DELETED_FILE => {
                    let level = r.level()?;
                    let number = r.varint64("file number")?;
                    edit.deleted_files.insert((level, number));
                }
                TAG_NEW_FILE | TAG_NEW_FILE_WITH_RANGE_DELETIONS => {
                    let level = r.level()?;
                    let mut file = r.new_file()?;
                    file.has_range_deletions = r.tag == TAG_NEW_FILE_WITH_RANGE_DELETIONS;
                    edit.new_files.push((level, file));
                }
                TAG_COLUMN_FAMILY => {
                    edit.column_family = r.d.varint32().ok_or_else(|| r.error("truncated id"))?;
                }
                TAG_COLUMN_FAMILY_ADD => {
                    let name = r.d.length_prefixed();
                    let name = name.ok_or_else(|| r.error("truncated column family name"))?;
                    let name = std::str::from_utf8(name)
                        .map_err(|_| r.error("column family name is not UTF-8"))?;
                    edit.column_family_add = Some(name.to_owned());
                }
                TAG_COLUMN_FAMILY_DROP => edit.column_family_drop = true,
                TAG_MAX_COLUMN_FAMILY => {
                    let id = r.d.varint32().ok_or_else(|| r.error("truncated id"))?;
                    edit.max_column_family = Some(id);
                }
                _ => return Err(r.error("unknown tag")),
            }
        }
        Ok(edit)
    }
}

/// Levels are below `NUM_LEVELS` (asserted when added), so they fit.
fn level_u32(level: usize) -> u32 {
    debug_assert!(level < NUM_LEVELS);
    level as u32
}

/// Reads the fields of one edit, turning every failure into a Corruption
/// that names the field being read.
struct FieldReader<'a> {
    d: Decoder<'a>,
    file: &'a str,
    offset: u64,
    field_start: usize,
    tag: u32,
}

impl FieldReader<'_> {
    fn error(&self, what: &str) -> Error {
        Error::corruption(
            self.file,
            self.offset,
            format!(
                "version edit field with tag {} at byte {} of the record: {what}",
                self.tag, self.field_start
            ),
        )
    }

    fn varint64(&mut self, field: &str) -> Result<u64> {
        self.d
            .varint64()
            .ok_or_else(|| self.error(&format!("truncated or overlong {field}")))
    }

    fn sequence(&mut self, field: &str) -> Result<u64> {
        let seq = self.varint64(field)?;
        if seq > MAX_SEQUENCE_NUMBER {
            return Err(self.error(&format!("{field} {seq} exceeds 56 bits")));
        }
        Ok(seq)
    }

    fn level(&mut self) -> Result<usize> {
        let level = self.d.varint32();
        let level = level.ok_or_else(|| self.error("truncated level"))?;
        match usize::try_from(level) {
            Ok(l) if l < NUM_LEVELS => Ok(l),
            _ => Err(self.error(&format!("level {level} not below {NUM_LEVELS}"))),
        }
    }

    fn internal_key(&mut self, field: &str) -> Result<InternalKey> {
        let bytes = self.d.length_prefixed();
        let bytes = bytes.ok_or_else(|| self.error(&format!("truncated {field}")))?;
        if bytes.len() > KEY_SIZE_BYTES_MAX + TRAILER_BYTES {
            return Err(self.error(&format!("{field} of {} bytes is too long", bytes.len())));
        }
        if parse_internal_key(bytes).is_none() {
            return Err(self.error(&format!("{field} is not an internal key")));
        }
        Ok(InternalKey::from_encoded(bytes.to_vec()))
    }

    fn new_file(&mut self) -> Result<NewFile> {
        let number = self.varint64("file number")?;
        let file_size = self.varint64("file size")?;
        let smallest = self.internal_key("smallest key")?;
        let largest = self.internal_key("largest key")?;
        let smallest_seqno = self.sequence("smallest seqno")?;
        let largest_seqno = self.sequence("largest seqno")?;
        if smallest_seqno > largest_seqno {
            return Err(self.error(&format!(
                "file {number}: smallest seqno {smallest_seqno} > largest seqno {largest_seqno}"
            )));
        }
        Ok(NewFile {
            number,
            file_size,
            smallest,
            largest,
            smallest_seqno,
            largest_seqno,
            has_range_deletions: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::key::ValueKind;

    fn ikey(user: &[u8], seq: u64) -> InternalKey {
        InternalKey::new(user, seq, ValueKind::Value)
    }

    fn sample() -> VersionEdit {
        let mut e = VersionEdit::new();
        e.set_comparator_name("leveldb.BytewiseComparator");
        e.set_log_number(7);
        e.set_next_file_number(20);
        e.set_last_sequence(1000);
        e.delete_file(1, 5);
        e.delete_file(0, 3);
        e.add_file(2, 12, 4096, ikey(b"a", 9), ikey(b"m", 3), 3, 9);
        e
    }

    fn decode(bytes: &[u8]) -> Result<VersionEdit> {
        VersionEdit::decode(bytes, "MANIFEST-000001", 0)
    }

    fn corruption_text(bytes: &[u8]) -> String {
        let err = decode(bytes).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        err.to_string()
    }

    #[test]
    fn round_trip_sample_and_empty() {
        for e in [sample(), VersionEdit::new()] {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            assert_eq!(decode(&buf).unwrap(), e);
        }
        let mut buf = Vec::new();
        VersionEdit::new().encode(&mut buf);
        assert!(buf.is_empty());
    }

    #[test]
    fn encoding_is_pinned() {
        // The example in docs/format/manifest.md.
        let mut e = VersionEdit::new();
        e.set_log_number(5);
        e.delete_file(3, 300);
        e.add_file(1, 12, 4096, ikey(b"a", 9), ikey(b"m", 3), 3, 9);
        let mut buf = Vec::new();
        e.encode(&mut buf);
        #[rustfmt::skip]
        let expected = [
            0x02, 0x05,
            0x06, 0x03, 0xac, 0x02,
            0x64, 0x01, 0x0c, 0x80, 0x20,
            0x09, 0x61, 0x01, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x09, 0x6d, 0x01, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
            0x03, 0x09,
        ];
        assert_eq!(buf, expected);
    }

    #[test]
    fn rejects_unknown_tag_bad_level_and_truncation() {
        let text = corruption_text(&[2, 5, 9, 1]);
        assert!(text.contains("tag 9 at byte 2") && text.contains("unknown tag"));
        let text = corruption_text(&[6, 7, 1]);
        assert!(text.contains("level 7 not below 7"), "{text}");
        let text = corruption_text(&[100, 0, 1, 1, 3, b'a']);
        assert!(text.contains("truncated smallest key"), "{text}");
        let text = corruption_text(&[1, 2, 0xff, 0xfe]);
        assert!(text.contains("not UTF-8"), "{text}");
        // A key shorter than the 8-byte trailer.
        let text = corruption_text(&[100, 0, 1, 1, 3, b'a', b'b', b'c']);
        assert!(text.contains("not an internal key"), "{text}");
        let text = corruption_text(&[0x80]);
        assert!(text.contains("truncated tag"), "{text}");
        // Every proper prefix of a valid edit either decodes (it ends on a
        // field boundary) or is corruption; none panics.
        let mut buf = Vec::new();
        sample().encode(&mut buf);
        for n in 0..buf.len() {
            let _ = decode(&buf[..n]);
        }
    }

    #[test]
    fn rejects_inverted_seqnos_and_oversized_sequence() {
        let mut buf = Vec::new();
        put_varint32(&mut buf, TAG_NEW_FILE);
        put_varint32(&mut buf, 1);
        put_varint64(&mut buf, 9);
        put_varint64(&mut buf, 100);
        put_length_prefixed(&mut buf, ikey(b"a", 1).encoded());
        put_length_prefixed(&mut buf, ikey(b"b", 1).encoded());
        put_varint64(&mut buf, 5);
        put_varint64(&mut buf, 4);
        assert!(corruption_text(&buf).contains("smallest seqno 5 > largest seqno 4"));

        let mut buf = Vec::new();
        put_varint32(&mut buf, TAG_LAST_SEQUENCE);
        put_varint64(&mut buf, MAX_SEQUENCE_NUMBER + 1);
        assert!(corruption_text(&buf).contains("exceeds 56 bits"));
    }

    fn arb_key() -> impl Strategy<Value = InternalKey> {
        (
            proptest::collection::vec(any::<u8>(), 0..12),
            0..=MAX_SEQUENCE_NUMBER,
            any::<bool>(),
        )
            .prop_map(|(user, seq, value)| {
                let kind = if value {
                    ValueKind::Value
                } else {
                    ValueKind::Deletion
                };
                InternalKey::new(&user, seq, kind)
            })
    }

    fn arb_new_file() -> impl Strategy<Value = (usize, NewFile)> {
        (
            0..NUM_LEVELS,
            any::<u64>(),
            any::<u64>(),
            arb_key(),
            arb_key(),
            0..=MAX_SEQUENCE_NUMBER,
            0..=MAX_SEQUENCE_NUMBER,
            any::<bool>(),
        )
            .prop_map(|(level, number, file_size, smallest, largest, a, b, rd)| {
                let file = NewFile {
                    number,
                    file_size,
                    smallest,
                    largest,
                    smallest_seqno: a.min(b),
                    largest_seqno: a.max(b),
                    has_range_deletions: rd,
                };
                (level, file)
            })
    }

    fn arb_edit() -> impl Strategy<Value = VersionEdit> {
        (
            proptest::option::of("[ -~]{0,20}|\\PC{0,5}"),
            proptest::option::of("[ -~]{0,8}"),
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(0..=MAX_SEQUENCE_NUMBER),
            proptest::collection::btree_set((0..NUM_LEVELS, any::<u64>()), 0..6),
            proptest::collection::vec(arb_new_file(), 0..6),
            (
                prop_oneof![Just(0u32), any::<u32>()],
                proptest::option::of("[ -~]{0,12}"),
                any::<bool>(),
                proptest::option::of(any::<u32>()),
            ),
        )
            .prop_map(
                |(comparator, merge_operator, log, next, last, deleted_files, new_files, cf)| {
                    VersionEdit {
                        comparator,
                        merge_operator,
                        log_number: log,
                        next_file_number: next,
                        last_sequence: last,
                        deleted_files,
                        new_files,
                        column_family: cf.0,
                        column_family_add: cf.1,
                        column_family_drop: cf.2,
                        max_column_family: cf.3,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn encode_decode_round_trip(edit in arb_edit()) {
            let mut buf = Vec::new();
            edit.encode(&mut buf);
            prop_assert_eq!(decode(&buf).unwrap(), edit);
        }

        #[test]
        fn decode_arbitrary_bytes_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let _ = decode(&bytes);
        }

        #[test]
        fn decode_mutated_edit_never_panics(
            edit in arb_edit(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut buf = Vec::new();
            edit.encode(&mut buf);
            if !buf.is_empty() {
                for (at, byte) in flips {
                    let i = at.index(buf.len());
                    buf[i] = byte;
                }
                let n = cut.index(buf.len() + 1);
                buf.truncate(n);
            }
            if let Err(e) = decode(&buf) {
                prop_assert!(e.is_corruption());
            }
        }
    }
}
