//! The read path: point lookups through memtables and levels, and the
//! internal iterator that user iterators are built on.

use std::cmp::Ordering;
use std::ops::Deref;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::key::{pack_trailer, Comparator, InternalKey, SequenceNumber, ValueKind, TRAILER_BYTES};
use crate::memtable::{MemTable, MemTableGet};
use crate::sst::filter::filter_hash;
use crate::sst::BlockPropertyFilter;
use crate::version::NUM_LEVELS;

use super::inner::{DbInner, SuperVersion};
use super::level_iter::LevelIterator;

/// A value read by `get_pinned`: it borrows the block or memtable it was
/// found in rather than copying it, and keeps that memory alive while held.
pub struct DBPinnableSlice {
    repr: Repr,
}

enum Repr {
    Block(Bytes),
    Mem {
        _mem: Arc<MemTable>,
        ptr: *const u8,
        len: usize,
    },
}

// SAFETY: `Mem` points into the arena of the memtable it holds an Arc to.
// Arena bytes are written once, before the entry is published, never moved
// and never freed before the memtable drops, so sharing the pointer across
// threads is sharing immutable bytes.
unsafe impl Send for DBPinnableSlice {}
// SAFETY: as for Send; the bytes are never mutated.
unsafe impl Sync for DBPinnableSlice {}

impl DBPinnableSlice {
    fn from_mem(mem: &Arc<MemTable>, value: &[u8]) -> DBPinnableSlice {
        DBPinnableSlice {
            repr: Repr::Mem {
                _mem: mem.clone(),
                ptr: value.as_ptr(),
                len: value.len(),
            },
        }
    }

    pub(super) fn from_block(value: Bytes) -> DBPinnableSlice {
        DBPinnableSlice {
            repr: Repr::Block(value),
        }
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self
    }

    /// Copies the value into a `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}

impl Deref for DBPinnableSlice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.repr {
            Repr::Block(b) => b,
            // SAFETY: see the Send impl: the memtable (and so the arena
            // holding these `len` bytes) lives as long as `self`.
            Repr::Mem { ptr, len, .. } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
        }
    }
}

impl AsRef<[u8]> for DBPinnableSlice {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for DBPinnableSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DBPinnableSlice({} bytes)", self.len())
    }
}

impl PartialEq<[u8]> for DBPinnableSlice {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes() == other
    }
}

/// The answer of the memtables of `sv` (active first, then the immutable
/// ones newest first) for `key` at `seq`, if one of them decides it.
pub(super) fn memtables_get(
    sv: &SuperVersion,
    key: &[u8],
    seq: SequenceNumber,
) -> Option<Result<Option<DBPinnableSlice>>> {
    for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
        match mem.get(key, seq) {
            Some(MemTableGet::Value(v)) => {
                return Some(Ok(Some(DBPinnableSlice::from_mem(mem, v))))
            }
            Some(MemTableGet::Deleted) => return Some(Ok(None)),
            None => {}
        }
    }
    None
}

impl DbInner {
    /// The newest value of `key` visible at `snapshot` (or now).
    pub(crate) fn get(
        &self,
        key: &[u8],
        snapshot: Option<SequenceNumber>,
        fill_cache: bool,
    ) -> Result<Option<DBPinnableSlice>> {
        self.point_reads.add(1);
        let sv = self.super_version();
        let r = self.get_in(&sv, key, snapshot, fill_cache);
        self.release_version(sv.version);
        r
    }

    fn get_in(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        snapshot: Option<SequenceNumber>,
        fill_cache: bool,
    ) -> Result<Option<DBPinnableSlice>> {
        let seq = snapshot.unwrap_or(sv.sequence);
        if let Some(decided) = memtables_get(sv, key, seq) {
            return decided;
        }
        // The lookup key is built on the stack when it fits (most keys).
        let mut stack = [0u8; 128];
        let heap;
        let lookup: &[u8] = match stack.get_mut(..key.len() + TRAILER_BYTES) {
            Some(buf) => {
                let (user, trailer) = buf.split_at_mut(key.len());
                user.copy_from_slice(key);
                trailer.copy_from_slice(&pack_trailer(seq, ValueKind::FOR_SEEK).to_le_bytes());
                buf
            }
            None => {
                heap = InternalKey::new(key, seq, ValueKind::FOR_SEEK);
                heap.encoded()
            }
        };
        debug_assert_eq!(
            lookup,
            InternalKey::new(key, seq, ValueKind::FOR_SEEK).encoded()
        );
        let hash = filter_hash(key);
        let ucmp = &*self.user_cmp;
        let v = &sv.version;
        // L0 newest first, each file checked against both bounds (they
        // overlap), then one candidate file per level: the first whose
        // largest key is at or after the lookup key, so only its smallest
        // key is left to check.
        let l0 = v.files(0).iter().filter(|f| {
            ucmp.compare(key, f.smallest.user_key()) != Ordering::Less
                && ucmp.compare(key, f.largest.user_key()) != Ordering::Greater
        });
        let deeper = (1..NUM_LEVELS).filter_map(|level| {
            let i = v.find_file(&self.icmp, level, lookup);
            let f = v.files(level).get(i)?;
            (ucmp.compare(key, f.smallest.user_key()) != Ordering::Less).then_some((level, f))
        });
        for (level, f) in l0.map(|f| (0, f)).chain(deeper) {
            let table = self.table_cache.get_for(f, level)?;
            if let Some(e) = table.get_opt(lookup, hash, fill_cache)? {
                return Ok(match e.kind {
                    ValueKind::Value => Some(DBPinnableSlice::from_block(e.value)),
                    ValueKind::Deletion => None,
                });
            }
        }
        Ok(None)
    }

    /// A merged iterator over every memtable and table of `sv`.
    pub(crate) fn internal_iter(
        self: &Arc<Self>,
        sv: &SuperVersion,
        fill_cache: bool,
        filters: &[Arc<dyn BlockPropertyFilter>],
    ) -> Result<MergingIterator> {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        children.push(Box::new(sv.mem.iter()));
        for m in &sv.imm {
            children.push(Box::new(m.iter()));
        }
        for f in sv.version.files(0) {
            children.push(Box::new(
                self.table_cache
                    .get_for(f, 0)?
                    .iter_opt(fill_cache)
                    .with_filters(filters),
            ));
        }
        for level in 1..NUM_LEVELS {
            if sv.version.num_files(level) > 0 {
                children.push(Box::new(
                    LevelIterator::new(self.clone(), sv.version.clone(), level, fill_cache)
                        .with_filters(filters),
                ));
            }
        }
        let icmp: Arc<dyn Comparator> = Arc::new(self.icmp.clone());
        Ok(MergingIterator::new(icmp, children))
    }
}
