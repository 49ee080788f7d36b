//! A batch of updates applied atomically, and its encoding, which is also
//! the payload of one write-ahead-log record:
//!
//! ```text
//! batch  := sequence:u64 LE  count:u32 LE  record{count}
//! record := 1 key:length-prefixed value:length-prefixed     (put)
//!         | 0 key:length-prefixed                           (delete)
//!         | 2 key:length-prefixed operand:length-prefixed   (merge)
//!         | 15 start:length-prefixed end:length-prefixed    (delete_range)
//!         | (128 + tag) cf:varint32 payload                 (the same, in column family cf)
//! length-prefixed := varint32 len, bytes
//! ```
//!
//! A record without a column family belongs to the default one (id 0).
//!
//! Record `i` gets sequence number `sequence + i`. See `docs/format/wal.md`.

use super::column_family::AsColumnFamilyRef;
use crate::error::{Error, Result};
use crate::key::{SequenceNumber, ValueKind, MAX_SEQUENCE_NUMBER};
use crate::limits::{KEY_SIZE_BYTES_MAX, LOG_RECORD_SIZE_BYTES_MAX, VALUE_SIZE_BYTES_MAX};
use crate::util::coding::{decode_fixed32, decode_fixed64, put_length_prefixed, Decoder};

/// Bytes of the batch header (sequence and count).
pub const BATCH_HEADER_BYTES: usize = 12;

/// Updates applied together: all or none are visible, and all get
/// consecutive sequence numbers.
///
/// ```
/// use strata_kv::{Options, WriteBatch, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// # let mut opts = Options::default();
/// # opts.create_if_missing(true);
/// let db = DB::open(&opts, &dir)?;
/// db.put(b"from", b"100")?;
/// // Move a value: both updates or neither, even across a crash.
/// let mut batch = WriteBatch::default();
/// batch.delete(b"from");
/// batch.put(b"to", b"100");
/// assert_eq!(batch.len(), 2);
/// db.write(batch)?;
/// assert_eq!(db.get(b"from")?, None);
/// assert_eq!(db.get(b"to")?.as_deref(), Some(&b"100"[..]));
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// The first key or value over the size limits, reported by `write`.
    oversized: Option<(usize, usize)>,
    /// Holds a merge record.
    has_merge: bool,
    /// Holds a range deletion.
    has_range_del: bool,
    /// Holds a record of a column family other than the default.
    has_cf: bool,
}

/// The tag bit of a record that names its column family.
const CF_TAG_BIT: u8 = 0x80;

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("count", &self.len())
            .field("bytes", &self.rep.len())
            .finish()
    }
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch {
            rep: vec![0; BATCH_HEADER_BYTES],
            oversized: None,
            has_merge: false,
            has_range_del: false,
            has_cf: false,
        }
    }
}

/// One update in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchRecord<'a> {
    /// Set `key` to `value`.
    Put(&'a [u8], &'a [u8]),
    /// Remove `key`.
    Delete(&'a [u8]),
    /// Merge `operand` into `key` (see [`Options::set_merge_operator`](crate::Options::set_merge_operator)).
    Merge(&'a [u8], &'a [u8]),
    /// Remove every key in `[from, to)`.
    DeleteRange(&'a [u8], &'a [u8]),
}

impl WriteBatch {
    /// An empty batch with room for `bytes` of updates.
    pub fn with_capacity_bytes(bytes: usize) -> WriteBatch {
        let mut rep = Vec::with_capacity(bytes.max(BATCH_HEADER_BYTES));
        rep.resize(BATCH_HEADER_BYTES, 0);
        WriteBatch {
            rep,
            oversized: None,
            has_merge: false,
            has_range_del: false,
            has_cf: false,
        }
    }

    /// Sets `key` to `value`.
    pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, key: K, value: V) {
        self.add(0, ValueKind::Value, key.as_ref(), Some(value.as_ref()));
    }

    /// Sets `key` to `value` in column family `cf`.
    pub fn put_cf<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
    ) {
        self.add(
            cf.cf_id(),
            ValueKind::Value,
            key.as_ref(),
            Some(value.as_ref()),
        );
    }

    /// Removes `key`.
    pub fn delete<K: AsRef<[u8]>>(&mut self, key: K) {
        self.add(0, ValueKind::Deletion, key.as_ref(), None);
    }

    /// Removes `key` from column family `cf`.
    pub fn delete_cf<K: AsRef<[u8]>>(&mut self, cf: &impl AsColumnFamilyRef, key: K) {
        self.add(cf.cf_id(), ValueKind::Deletion, key.as_ref(), None);
    }

    /// Merges `value` into `key` with the database's merge operator
    /// ([`Options::set_merge_operator`](crate::Options::set_merge_operator)).
    pub fn merge<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, key: K, value: V) {
        self.add(0, ValueKind::Merge, key.as_ref(), Some(value.as_ref()));
    }

    /// Merges `value` into `key` of column family `cf`, with the family's
    /// merge operator.
    pub fn merge_cf<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
    ) {
        self.add(
            cf.cf_id(),
            ValueKind::Merge,
            key.as_ref(),
            Some(value.as_ref()),
        );
    }

    /// Removes every key in `[from, to)` (half open, under the database's
    /// comparator), as RocksDB's `DeleteRange`: one record, whatever the
    /// number of keys. `from == to` deletes nothing; `from` after `to`
    /// makes the write fail with `InvalidArgument`.
    pub fn delete_range<K: AsRef<[u8]>>(&mut self, from: K, to: K) {
        self.add(
            0,
            ValueKind::RangeDeletion,
            from.as_ref(),
            Some(to.as_ref()),
        );
    }

    /// [`delete_range`](Self::delete_range) in column family `cf`, under
    /// its comparator.
    pub fn delete_range_cf<K: AsRef<[u8]>>(&mut self, cf: &impl AsColumnFamilyRef, from: K, to: K) {
        self.add(
            cf.cf_id(),
            ValueKind::RangeDeletion,
            from.as_ref(),
            Some(to.as_ref()),
        );
    }

    /// Appends one record of column family `cf`.
    fn add(&mut self, cf: u32, kind: ValueKind, key: &[u8], value: Option<&[u8]>) {
        let value_len = value.map_or(0, <[u8]>::len);
        if kind == ValueKind::RangeDeletion {
            // Both bounds are keys.
            self.check_sizes(key.len().max(value_len), 0);
        } else {
            self.check_sizes(key.len(), value_len);
        }
        self.set_count(self.len() as u32 + 1);
        self.has_merge |= kind == ValueKind::Merge;
        self.has_range_del |= kind == ValueKind::RangeDeletion;
        if cf == 0 {
            self.rep.push(kind as u8);
        } else {
            self.has_cf = true;
            self.rep.push(CF_TAG_BIT | kind as u8);
            crate::util::coding::put_varint32(&mut self.rep, cf);
        }
        put_length_prefixed(&mut self.rep, key);
        if let Some(v) = value {
            put_length_prefixed(&mut self.rep, v);
        }
    }

    fn check_sizes(&mut self, key: usize, value: usize) {
        if (key > KEY_SIZE_BYTES_MAX || value > VALUE_SIZE_BYTES_MAX) && self.oversized.is_none() {
            self.oversized = Some((key, value));
        }
    }

    /// Number of updates.
    pub fn len(&self) -> usize {
        decode_fixed32(&self.rep[8..]).unwrap_or(0) as usize
    }

    /// True with no updates.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every update.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_BYTES, 0);
        self.oversized = None;
        self.has_merge = false;
        self.has_range_del = false;
        self.has_cf = false;
    }

    /// True if the batch holds a merge record.
    pub(crate) fn has_merge(&self) -> bool {
        self.has_merge
    }

    /// True if the batch holds a range deletion.
    pub(crate) fn has_range_del(&self) -> bool {
        self.has_range_del
    }

    /// True if the batch holds a record of a column family other than
    /// the default.
    pub(crate) fn has_cf(&self) -> bool {
        self.has_cf
    }

    /// Bytes of the encoding.
    pub fn size_in_bytes(&self) -> usize {
        self.rep.len()
    }

    /// The encoding (header and records).
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// The updates in order, of every column family alike: a batch with
    /// `_cf` records does not say here which family each belongs to.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            inner: self.iter_cf(),
        }
    }

    /// The updates in order, each with its column family id.
    pub(crate) fn iter_cf(&self) -> BatchCfIter<'_> {
        BatchCfIter {
            dec: Decoder::new(&self.rep[BATCH_HEADER_BYTES..]),
            left: self.len(),
        }
    }

    /// An error if a key or value is over the documented limits.
    /// Also an error if the whole batch is larger than one log record may
    /// be: the log writer would refuse it, and that refusal must reach the
    /// caller as bad input, not stop the database as an I/O failure would.
    pub(crate) fn validate(&self) -> Result<()> {
        if let Some((k, v)) = self.oversized {
            return Err(Error::invalid_argument(format!(
                "key of {k} bytes or value of {v} bytes exceeds the limits ({KEY_SIZE_BYTES_MAX} and {VALUE_SIZE_BYTES_MAX} bytes)"
            )));
        }
        if self.rep.len() > LOG_RECORD_SIZE_BYTES_MAX {
            return Err(Error::invalid_argument(format!(
                "write batch of {} bytes exceeds LOG_RECORD_SIZE_BYTES_MAX ({LOG_RECORD_SIZE_BYTES_MAX} bytes); split it into smaller batches",
                self.rep.len()
            )));
        }
        Ok(())
    }

    pub(crate) fn sequence(&self) -> SequenceNumber {
        decode_fixed64(&self.rep).unwrap_or(0)
    }

    /// Bytes the batch's buffer holds without growing.
    pub(crate) fn capacity(&self) -> usize {
        self.rep.capacity()
    }

    pub(crate) fn set_sequence(&mut self, seq: SequenceNumber) {
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    fn set_count(&mut self, n: u32) {
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
    }

    /// Appends the updates of `other` (used to group concurrent writers).
    pub(crate) fn append(&mut self, other: &WriteBatch) {
        self.set_count((self.len() + other.len()) as u32);
        self.rep.extend_from_slice(&other.rep[BATCH_HEADER_BYTES..]);
        if self.oversized.is_none() {
            self.oversized = other.oversized;
        }
        self.has_merge |= other.has_merge;
        self.has_range_del |= other.has_range_del;
        self.has_cf |= other.has_cf;
    }

    /// Rebuilds a batch from a log record, checking its whole structure.
    pub(crate) fn from_record(record: &[u8], file: &str, offset: u64) -> Result<WriteBatch> {
        if record.len() < BATCH_HEADER_BYTES {
            return Err(Error::corruption(
                file,
                offset,
                format!(
                    "log record of {} bytes is shorter than a batch header",
                    record.len()
                ),
            ));
        }
        let mut batch = WriteBatch {
            rep: record.to_vec(),
            oversized: None,
            has_merge: false,
            has_range_del: false,
            has_cf: false,
        };
        let corrupt = |what: String| Error::corruption(file, offset, what);
        let mut it = batch.iter_cf();
        let mut n = 0u64;
        let (mut has_merge, mut has_range_del, mut has_cf) = (false, false, false);
        for r in it.by_ref() {
            let (cf, r) = r.map_err(corrupt)?;
            has_cf |= cf != 0;
            has_merge |= matches!(r, BatchRecord::Merge(..));
            has_range_del |= matches!(r, BatchRecord::DeleteRange(..));
            let (key, value) = match r {
                BatchRecord::Put(k, v) | BatchRecord::Merge(k, v) => (k, v),
                // Both bounds are keys.
                BatchRecord::DeleteRange(k, e) if e.len() > k.len() => (e, &[][..]),
                BatchRecord::DeleteRange(k, _) => (k, &[][..]),
                BatchRecord::Delete(k) => (k, &[][..]),
            };
            if key.len() > KEY_SIZE_BYTES_MAX || value.len() > VALUE_SIZE_BYTES_MAX {
                return Err(corrupt(format!(
                    "batch record {n} has a {}-byte key and a {}-byte value, over the limits",
                    key.len(),
                    value.len()
                )));
            }
            n += 1;
        }
        if !it.dec.is_empty() {
            return Err(corrupt(format!("batch holds bytes after its {n} records")));
        }
        // Writers never log an empty batch, and every record's sequence
        // number must fit in 56 bits and follow sequence 0.
        let first = batch.sequence();
        if n == 0 || first == 0 || first.saturating_add(n - 1) > MAX_SEQUENCE_NUMBER {
            return Err(corrupt(format!(
                "batch of {n} records at sequence {first} is empty or outside 1..={MAX_SEQUENCE_NUMBER}"
            )));
        }
        batch.has_merge = has_merge;
        batch.has_range_del = has_range_del;
        batch.has_cf = has_cf;
        Ok(batch)
    }
}

/// Iterator over a batch's updates; yields an error text for a malformed
/// encoding (only possible for a batch decoded from a log).
#[derive(Debug)]
pub struct BatchIter<'a> {
    inner: BatchCfIter<'a>,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = std::result::Result<BatchRecord<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.inner.next()?.map(|(_, r)| r))
    }
}

/// [`BatchIter`] with each record's column family id.
#[derive(Debug)]
pub(crate) struct BatchCfIter<'a> {
    dec: Decoder<'a>,
    left: usize,
}

impl<'a> Iterator for BatchCfIter<'a> {
    type Item = std::result::Result<(u32, BatchRecord<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let record = (|| {
            let mut tag = self
                .dec
                .bytes(1)
                .ok_or("batch ends before its counted records")?[0];
            let mut cf = 0;
            if tag & CF_TAG_BIT != 0 {
                tag &= !CF_TAG_BIT;
                cf = self
                    .dec
                    .varint32()
                    .ok_or("batch column family id runs past the record")?;
                if cf == 0 {
                    return Err("batch record names the default column family explicitly".into());
                }
            }
            let key = self
                .dec
                .length_prefixed()
                .ok_or("batch key runs past the record")?;
            let record = match ValueKind::from_byte(tag) {
                Some(ValueKind::Value) => {
                    let value = self
                        .dec
                        .length_prefixed()
                        .ok_or("batch value runs past the record")?;
                    BatchRecord::Put(key, value)
                }
                Some(ValueKind::Deletion) => BatchRecord::Delete(key),
                Some(ValueKind::Merge) => {
                    let operand = self
                        .dec
                        .length_prefixed()
                        .ok_or("batch merge operand runs past the record")?;
                    BatchRecord::Merge(key, operand)
                }
                Some(ValueKind::RangeDeletion) => {
                    let end = self
                        .dec
                        .length_prefixed()
                        .ok_or("batch range end runs past the record")?;
                    BatchRecord::DeleteRange(key, end)
                }
                None => return Err(format!("unknown batch record tag {tag}")),
            };
            Ok((cf, record))
        })();
        if record.is_err() {
            self.left = 0;
        }
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip() {
        let mut b = WriteBatch::default();
        b.put(b"k1", b"v1");
        b.delete("k2");
        b.put(vec![0u8; 300], []);
        b.merge(b"k3", b"+1");
        b.set_sequence(77);
        let back = WriteBatch::from_record(b.data(), "log", 0).unwrap();
        assert_eq!(back.sequence(), 77);
        let recs: Vec<_> = back.iter().map(|r| r.unwrap()).collect();
        assert_eq!(
            recs,
            vec![
                BatchRecord::Put(b"k1", b"v1"),
                BatchRecord::Delete(b"k2"),
                BatchRecord::Put(&[0; 300], b""),
                BatchRecord::Merge(b"k3", b"+1")
            ]
        );
        let mut c = WriteBatch::default();
        c.put("x", "y");
        assert!(!c.has_merge());
        c.append(&b);
        assert_eq!(c.len(), 5);
        assert!(c.has_merge(), "a group holding a merge says so");
        c.clear();
        assert!(c.is_empty() && !c.has_merge());
    }

    #[test]
    fn oversized_key_is_reported() {
        let mut b = WriteBatch::default();
        b.put(vec![0u8; KEY_SIZE_BYTES_MAX + 1], b"");
        assert!(matches!(b.validate(), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn logged_batches_out_of_range_are_corruption() {
        let mut empty = WriteBatch::default();
        empty.set_sequence(5);
        assert!(WriteBatch::from_record(empty.data(), "log", 0)
            .unwrap_err()
            .is_corruption());
        let mut b = WriteBatch::default();
        b.put(b"k", b"v");
        b.put(b"k2", b"v");
        b.set_sequence(MAX_SEQUENCE_NUMBER);
        assert!(WriteBatch::from_record(b.data(), "log", 0)
            .unwrap_err()
            .is_corruption());
        b.set_sequence(0);
        assert!(WriteBatch::from_record(b.data(), "log", 0)
            .unwrap_err()
            .is_corruption());
        let mut big = WriteBatch::default();
        big.put(vec![0u8; KEY_SIZE_BYTES_MAX + 1], b"");
        big.set_sequence(1);
        assert!(WriteBatch::from_record(big.data(), "log", 0)
            .unwrap_err()
            .is_corruption());
    }

    proptest! {
        #[test]
        fn arbitrary_records_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = WriteBatch::from_record(&bytes, "fuzz", 0);
        }
    }
}
