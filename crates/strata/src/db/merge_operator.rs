//! Merge operators: read-modify-write without a read. `DB::merge` stores an
//! operand; reads combine the operands of a key, oldest first, with the
//! newest value or deletion below them, and compaction folds them.
//!
//! The names and signatures are the `rocksdb` crate's
//! (`Options::set_merge_operator_associative`, `set_merge_operator`,
//! [`MergeFn`], [`MergeOperands`]).

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{pack_trailer, parse_entry_key, Comparator, SequenceNumber, ValueKind};

/// A merge function: `(key, existing value, operands oldest first)` to the
/// merged value, or `None` when the operands cannot be merged (the read or
/// compaction that asked then fails with [`Error::MergeFailed`]).
///
/// As a full merge, `existing` is the value below the operands (`None` if
/// the key has no value there or was deleted). As a partial merge,
/// `existing` is always `None` and the result replaces the operands as one
/// operand.
pub trait MergeFn:
    Fn(&[u8], Option<&[u8]>, &MergeOperands) -> Option<Vec<u8>> + Send + Sync + 'static
{
}

impl<F> MergeFn for F where
    F: Fn(&[u8], Option<&[u8]>, &MergeOperands) -> Option<Vec<u8>> + Send + Sync + 'static
{
}

/// The operands of one merge, oldest first: `operands.iter()` or
/// `for op in operands`.
#[derive(Default, Clone)]
pub struct MergeOperands {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl MergeOperands {
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    pub(crate) fn push(&mut self, operand: &[u8]) {
        self.bytes.extend_from_slice(operand);
        self.ends.push(self.bytes.len());
    }

    /// Reverses the order: operands gathered newest first become oldest
    /// first.
    pub(crate) fn reverse(&mut self) {
        let old = std::mem::take(&mut self.bytes);
        let ends = std::mem::take(&mut self.ends);
        self.bytes.reserve(old.len());
        for i in (0..ends.len()).rev() {
            let start = if i == 0 { 0 } else { ends[i - 1] };
            self.push(&old[start..ends[i]]);
        }
    }

    /// Number of operands.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there are no operands.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The operands, oldest first.
    pub fn iter(&self) -> MergeOperandsIter<'_> {
        MergeOperandsIter {
            operands: self,
            next: 0,
        }
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }
}

impl fmt::Debug for MergeOperands {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over [`MergeOperands`], oldest first.
#[derive(Debug)]
pub struct MergeOperandsIter<'a> {
    operands: &'a MergeOperands,
    next: usize,
}

impl<'a> Iterator for MergeOperandsIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.next == self.operands.len() {
            return None;
        }
        self.next += 1;
        Some(self.operands.get(self.next - 1))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.operands.len() - self.next;
        (left, Some(left))
    }
}

impl ExactSizeIterator for MergeOperandsIter<'_> {}

impl<'a> IntoIterator for &'a MergeOperands {
    type Item = &'a [u8];
    type IntoIter = MergeOperandsIter<'a>;

    fn into_iter(self) -> MergeOperandsIter<'a> {
        self.iter()
    }
}

/// A named merge operator: a full merge and, optionally, a partial merge.
pub(crate) struct MergeOperator {
    name: String,
    full: Box<dyn MergeFn>,
    partial: Option<Box<dyn MergeFn>>,
}

impl fmt::Debug for MergeOperator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MergeOperator")
            .field("name", &self.name)
            .field("partial", &self.partial.is_some())
            .finish()
    }
}

impl MergeOperator {
    pub(crate) fn new(
        name: &str,
        full: Box<dyn MergeFn>,
        partial: Option<Box<dyn MergeFn>>,
    ) -> Arc<MergeOperator> {
        Arc::new(MergeOperator {
            name: name.to_string(),
            full,
            partial,
        })
    }

    /// The name stored with the tables that hold operands.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The value of `key`: `operands` (oldest first) applied to `base`.
    pub(crate) fn full_merge(
        &self,
        key: &[u8],
        base: Option<&[u8]>,
        operands: &MergeOperands,
    ) -> Result<Vec<u8>> {
        (self.full)(key, base, operands).ok_or_else(|| self.failed(key, operands))
    }

    /// `operands` (oldest first, at least two) combined into one operand,
    /// or `None` when there is no partial merge or it declines.
    pub(crate) fn partial_merge(&self, key: &[u8], operands: &MergeOperands) -> Option<Vec<u8>> {
        debug_assert!(operands.len() >= 2);
        self.partial.as_ref()?(key, None, operands)
    }

    fn failed(&self, key: &[u8], operands: &MergeOperands) -> Error {
        Error::MergeFailed(format!(
            "merge operator {:?} returned None for key {} ({} operand(s))",
            self.name,
            shown_key(key),
            operands.len()
        ))
    }
}

/// The error for operands met where no merge operator is set.
pub(crate) fn no_operator(key: &[u8]) -> Error {
    Error::invalid_argument(format!(
        "key {} holds merge operands but no merge operator is set (Options::set_merge_operator)",
        shown_key(key)
    ))
}

/// Folds the operands of one key for a read: `operands` oldest first,
/// applied to `base` (the value below them; `None` for a deletion or no
/// older version).
pub(crate) fn resolve(
    op: Option<&MergeOperator>,
    key: &[u8],
    base: Option<&[u8]>,
    operands: &MergeOperands,
) -> Result<Vec<u8>> {
    op.ok_or_else(|| no_operator(key))?
        .full_merge(key, base, operands)
}

/// What [`fold_operands`] made of a run of merge operands.
pub(crate) struct Folded {
    /// Entries read, the first operand included.
    pub(crate) consumed: u64,
    /// The entries to write, in order: (internal key, value, sequence).
    pub(crate) entries: Vec<(Vec<u8>, Vec<u8>, SequenceNumber)>,
    /// The full merge failed ([`Error::MergeFailed`]): `entries` are then
    /// the entries as read, unfolded.
    pub(crate) failed: Option<Error>,
}

/// For a flush or compaction: from `it` at a merge operand of `user_key`
/// (the newest entry of the key in snapshot stripe `stripe`; `stripe_of`
/// gives an entry's), consumes the key's entries of that stripe down to
/// and including a value or deletion, and leaves `it` after them. Every
/// reader that sees one of them sees all, so:
/// - a value or deletion below: one value, the full merge;
/// - the key's entries end and `nothing_older()` (no older version can
///   exist anywhere): one value, the full merge of the operands alone;
/// - otherwise (older entries in an older stripe, or elsewhere): the
///   operands stay operands, as one when the partial merge combines them.
///
/// A merged value gets sequence 0 when `zero_sequence` (the bottom level,
/// oldest stripe), else the newest operand's. When the full merge fails the
/// entries come back as read, with the error in [`Folded::failed`]: a
/// compaction fails with it, a flush writes them as they are.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fold_operands(
    it: &mut dyn InternalIterator,
    user_key: &[u8],
    stripe: usize,
    stripe_of: impl Fn(SequenceNumber) -> usize,
    ucmp: &dyn Comparator,
    op: Option<&MergeOperator>,
    nothing_older: impl FnOnce() -> bool,
    zero_sequence: bool,
) -> Result<Folded> {
    let malformed = || Error::corruption("merge input", 0, "malformed internal key");
    let first_seq = parse_entry_key(it.key()).ok_or_else(malformed)?.sequence;
    let mut raw: Vec<(Vec<u8>, Vec<u8>, SequenceNumber)> =
        vec![(it.key().to_vec(), it.value().to_vec(), first_seq)];
    let mut operands = MergeOperands::default();
    operands.push(it.value());
    let mut consumed = 1u64;
    // None: the run ended without a base; Some(base): at a value (`Some`)
    // or a deletion (`None`).
    let mut base: Option<Option<Vec<u8>>> = None;
    let mut end_of_key = true;
    it.next();
    while it.valid() {
        let p = parse_entry_key(it.key()).ok_or_else(malformed)?;
        if ucmp.compare(p.user_key, user_key) != std::cmp::Ordering::Equal {
            break;
        }
        if stripe_of(p.sequence) != stripe {
            end_of_key = false;
            break;
        }
        consumed += 1;
        // Every entry consumed, in case the merge fails.
        raw.push((it.key().to_vec(), it.value().to_vec(), p.sequence));
        match p.kind {
            ValueKind::Merge => operands.push(it.value()),
            ValueKind::Value => base = Some(Some(it.value().to_vec())),
            ValueKind::Deletion | ValueKind::RangeDeletion => base = Some(None),
        }
        it.next();
        if base.is_some() {
            break;
        }
    }
    it.status()?;
    operands.reverse(); // met newest first
    let full = match base {
        Some(base) => Some(base),
        None if end_of_key && nothing_older() => Some(None),
        None => None,
    };
    let mut failed = None;
    let entries = match full {
        Some(base) => match resolve(op, user_key, base.as_deref(), &operands) {
            Ok(value) => {
                let seq = if zero_sequence { 0 } else { first_seq };
                let mut key = user_key.to_vec();
                key.extend_from_slice(&pack_trailer(seq, ValueKind::Value).to_le_bytes());
                vec![(key, value, seq)]
            }
            Err(e) => {
                failed = Some(e);
                raw
            }
        },
        None => match op.filter(|_| operands.len() >= 2) {
            Some(op) => match op.partial_merge(user_key, &operands) {
                Some(value) => vec![(raw.swap_remove(0).0, value, first_seq)],
                None => raw,
            },
            None => raw,
        },
    };
    Ok(Folded {
        consumed,
        entries,
        failed,
    })
}

/// `key` for a message: as text when printable, else as hex; long keys
/// cut at 64 bytes.
fn shown_key(key: &[u8]) -> String {
    let cut = &key[..key.len().min(64)];
    let more = if cut.len() < key.len() { "..." } else { "" };
    if cut.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}{more}", String::from_utf8_lossy(cut))
    } else {
        let hex: String = cut.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{more}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_iterate_oldest_first_after_reverse() {
        let mut ops = MergeOperands::default();
        for op in [&b"c"[..], b"", b"ab"] {
            ops.push(op);
        }
        ops.reverse();
        let seen: Vec<&[u8]> = ops.iter().collect();
        assert_eq!(seen, vec![&b"ab"[..], b"", b"c"]);
        let mut n = 0;
        for op in &ops {
            n += op.len();
        }
        assert_eq!((n, ops.len(), ops.is_empty()), (3, 3, false));
    }

    #[test]
    fn a_declining_merge_is_merge_failed_naming_the_operator() {
        let op = MergeOperator::new(
            "never",
            Box::new(|_: &[u8], _: Option<&[u8]>, _: &MergeOperands| None),
            None,
        );
        let mut ops = MergeOperands::default();
        ops.push(b"x");
        let e = resolve(Some(&op), b"k", None, &ops).unwrap_err();
        assert!(matches!(e, Error::MergeFailed(_)), "{e}");
        assert!(e.to_string().contains("\"never\""), "{e}");
        let e = resolve(None, b"k", None, &ops).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert_eq!(
            op.partial_merge(b"k", &{
                let mut two = MergeOperands::default();
                two.push(b"a");
                two.push(b"b");
                two
            }),
            None
        );
    }
}
