//! Constants of the manifest format (`docs/format/manifest.md`).
//!
//! A version edit is a sequence of tagged fields: `tag:varint32 payload`.
//! Tag numbers are LevelDB's (1 to 9) and RocksDB's (`NewFile2` = 100), so
//! the manifests of the three engines stay recognisable to each other's
//! tools; tags Strata does not write are rejected, never skipped.

/// `comparator_name: length-prefixed UTF-8`.
pub(super) const TAG_COMPARATOR: u32 = 1;
/// `log_number: varint64`.
pub(super) const TAG_LOG_NUMBER: u32 = 2;
/// `next_file_number: varint64`.
pub(super) const TAG_NEXT_FILE_NUMBER: u32 = 3;
/// `last_sequence: varint64`.
pub(super) const TAG_LAST_SEQUENCE: u32 = 4;
/// `level: varint32, number: varint64`.
pub(super) const TAG_DELETED_FILE: u32 = 6;
/// `merge_operator_name: length-prefixed UTF-8`, empty for none (Strata's
/// own: the operator of the last open, checked before logged merge
/// operands are replayed).
pub(super) const TAG_MERGE_OPERATOR: u32 = 20;
/// `level: varint32, number, file_size: varint64, smallest, largest:
/// length-prefixed internal keys, smallest_seqno, largest_seqno: varint64`
/// (RocksDB's `kNewFile2`).
pub(super) const TAG_NEW_FILE: u32 = 100;
/// As [`TAG_NEW_FILE`], for a table holding range deletions (Strata's
/// own; a reader that does not know it stops on it as corruption rather
/// than miss the deletions).
pub(super) const TAG_NEW_FILE_WITH_RANGE_DELETIONS: u32 = 101;
/// `column_family: varint32`: the column family the edit's files, log
/// number, comparator and merge operator belong to (RocksDB's
/// `kColumnFamily`); absent means the default family, 0.
pub(super) const TAG_COLUMN_FAMILY: u32 = 200;
/// `name: length-prefixed UTF-8`: the edit creates the column family it
/// names by [`TAG_COLUMN_FAMILY`] (RocksDB's `kColumnFamilyAdd`).
pub(super) const TAG_COLUMN_FAMILY_ADD: u32 = 201;
/// No payload: the edit drops its column family (`kColumnFamilyDrop`).
pub(super) const TAG_COLUMN_FAMILY_DROP: u32 = 202;
/// `id: varint32`: the largest column family id ever handed out
/// (`kMaxColumnFamily`), so a dropped family's id is never reused.
pub(super) const TAG_MAX_COLUMN_FAMILY: u32 = 203;
