//! The read path: point lookups through memtables and levels, and the
//! internal iterator that user iterators are built on.

use std::cmp::Ordering;
use std::ops::Deref;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::iter::merging::MergingIterator;
use crate::iter::{InternalIterator, SeekReads};
use crate::key::{
    pack_trailer, Comparator, InternalKey, ParsedInternalKey, SequenceNumber, ValueKind,
    MAX_SEQUENCE_NUMBER, TRAILER_BYTES,
};
use crate::memtable::{MemLookup, MemTable};
use crate::range_del::{FragmentedRangeTombstones, RangeDelView, RangeTombstone, SkipCovered};
use crate::sst::filter::filter_hash;
use crate::sst::{BlockPropertyFilter, Table};
use crate::version::{FileMetaData, LevelRangeDels, Version, NUM_LEVELS};

use super::inner::{DbInner, SuperVersion};
use super::level_iter::LevelIterator;
use super::merge_operator::{self, MergeOperands};

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

/// What the memtables say of a key.
pub(super) enum MemGet<'s> {
    /// The newest visible version is this value, or a deletion (`None`).
    Found(Option<DBPinnableSlice>),
    /// The newest visible version is a merge operand. The memtables'
    /// operands were gathered, newest first, down to the value or deletion
    /// under them (`Some(base)`), or through the last memtable (`None`):
    /// the walk goes on in the tables.
    Merge(Option<Option<&'s [u8]>>),
    /// No memtable holds a visible version.
    NotFound,
}

/// The answer of the memtables of `sv` (active first, then the immutable
/// ones newest first) for `key` at `seq`: one search per memtable, merge
/// operands included (pushed onto `operands`, newest first). A version
/// older than `floor` (the newest range deletion over the key) is deleted.
pub(super) fn memtables_get<'s>(
    sv: &'s SuperVersion,
    key: &[u8],
    seq: SequenceNumber,
    floor: SequenceNumber,
    operands: &mut MergeOperands,
) -> MemGet<'s> {
    let mut mems = std::iter::once(&sv.mem).chain(sv.imm.iter());
    for mem in mems.by_ref() {
        match mem.lookup(key, seq, floor, operands) {
            Some(MemLookup::Value(v)) => {
                return MemGet::Found(Some(DBPinnableSlice::from_mem(mem, v)))
            }
            Some(MemLookup::Deleted) => return MemGet::Found(None),
            Some(MemLookup::Merge(Some(base))) => return MemGet::Merge(Some(base)),
            Some(MemLookup::Merge(None)) => break,
            None => {}
        }
    }
    if operands.is_empty() {
        return MemGet::NotFound;
    }
    // Older memtables: the rest of the key's operands, or its base.
    for mem in mems {
        if let Some(base) = mem.collect_operands(key, seq, floor, operands) {
            return MemGet::Merge(Some(base));
        }
    }
    MemGet::Merge(None)
}

/// Builds the lookup key of `key` at `seq` in `stack` when it fits, else
/// on the heap, and passes it to `f`.
fn with_lookup<R>(key: &[u8], seq: SequenceNumber, f: impl FnOnce(&[u8]) -> R) -> R {
    let mut stack = [0u8; 128];
    match stack.get_mut(..key.len() + TRAILER_BYTES) {
        Some(buf) => {
            let (user, trailer) = buf.split_at_mut(key.len());
            user.copy_from_slice(key);
            trailer.copy_from_slice(&pack_trailer(seq, ValueKind::FOR_SEEK).to_le_bytes());
            f(buf)
        }
        None => f(InternalKey::new(key, seq, ValueKind::FOR_SEEK).encoded()),
    }
}

/// What a merge read made of one source's versions of a key: the value
/// or deletion that ends the walk (`Some(Some(value))`, `Some(None)`), or
/// nothing yet (`None`: the key's operands here, if any, were pushed).
type Base = Option<Option<Vec<u8>>>;

/// How a read's walk through the tables ended.
enum TablesEnd {
    /// With the answer: a value (pinned in its block), or none.
    Answer(Option<DBPinnableSlice>),
    /// With merge operands gathered, down to this base (a value) or to a
    /// deletion or the end of the key's versions (`None`).
    Merge(Option<Vec<u8>>),
}

/// The visitor of a merge read's walk over one table's versions of `key`,
/// newest first: pushes operands onto `operands` until a value or a
/// deletion, which it stores in `base` and ends the walk (returns false).
/// A version older than `floor` is under a range deletion: a deletion.
fn merge_visitor<'a>(
    floor: SequenceNumber,
    operands: &'a mut MergeOperands,
    base: &'a mut Base,
) -> impl FnMut(ParsedInternalKey<'_>, &[u8]) -> bool + 'a {
    move |p, value| {
        if p.sequence < floor {
            *base = Some(None);
            return false;
        }
        match p.kind {
            ValueKind::Value => *base = Some(Some(value.to_vec())),
            ValueKind::Deletion | ValueKind::RangeDeletion => *base = Some(None),
            ValueKind::Merge => {
                operands.push(value);
                return true;
            }
        }
        false
    }
}

impl DbInner {
    /// The newest value of `key` visible at the read options' snapshot (or
    /// now), checked or not and filling the cache or not as they say.
    pub(crate) fn get_ro(
        &self,
        key: &[u8],
        ro: &super::options::ReadOptions,
    ) -> Result<Option<DBPinnableSlice>> {
        let _verify = crate::sst::ChecksumMode::for_read(ro.verify_checksums);
        self.get(key, ro.snapshot, ro.cache_fill())
    }

    /// [`get_ro`](Self::get_ro)'s lookup.
    pub(crate) fn get(
        &self,
        key: &[u8],
        snapshot: Option<SequenceNumber>,
        fill_cache: bool,
    ) -> Result<Option<DBPinnableSlice>> {
        self.point_reads.add(1);
        let sv = self.super_version();
        let r = self.get_in(&sv, key, snapshot, fill_cache);
        self.release_super_version(sv);
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
        let range_dels = self.range_del_view(sv)?;
        let floor = range_dels.max_covering(key, seq);
        let mut operands = MergeOperands::default();
        match memtables_get(sv, key, seq, floor, &mut operands) {
            MemGet::Found(v) => return Ok(v),
            MemGet::Merge(Some(base)) => return self.full_merge(key, base, operands),
            MemGet::Merge(None) => {
                return self.get_from_tables(sv, key, seq, fill_cache, floor, operands, true)
            }
            MemGet::NotFound => {}
        }
        self.get_from_tables(sv, key, seq, fill_cache, floor, operands, false)
    }

    /// The tables' part of a read of `key` at `seq`, newest first. With
    /// `merging`, `operands` holds the newer sources' merge operands of
    /// the key (newest first) and every table's versions add to them;
    /// otherwise the first version found answers, unless it is a merge
    /// operand, from which the walk goes on without searching that table
    /// again. Per table: one filter probe, one index search, one block
    /// seek.
    #[allow(clippy::too_many_arguments)]
    fn get_from_tables(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        seq: SequenceNumber,
        fill_cache: bool,
        floor: SequenceNumber,
        mut operands: MergeOperands,
        mut merging: bool,
    ) -> Result<Option<DBPinnableSlice>> {
        // The lookup key is built on the stack when it fits (most keys).
        let end = with_lookup(key, seq, |lookup| -> Result<TablesEnd> {
            let hash = filter_hash(key);
            let mut read_ahead = fill_cache && self.opts.use_direct_reads;
            let mut base: Base = None;
            // The first table searched in vain, charged if the lookup goes
            // on to another (one charge per lookup, as LevelDB's).
            let mut wasted: Option<(usize, &Arc<FileMetaData>)> = None;
            let mut charged = !self.opts.read_triggered_compactions;
            let mut candidates = self.candidate_files(sv, key, lookup);
            while let Some((level, f)) = candidates.next() {
                if let Some((level, f)) = wasted.take() {
                    self.charge_seek(sv, level, f);
                    charged = true;
                }
                let table = self.table_cache.get_for(f, level)?;
                if read_ahead && self.read_ahead_for_get(&table, candidates.clone(), lookup, hash) {
                    read_ahead = false;
                }
                let mut visit = merge_visitor(floor, &mut operands, &mut base);
                let mut searched = false;
                if merging {
                    table.for_each_version(lookup, hash, fill_cache, &mut visit)?;
                } else if let Some(e) = table.get_opt(
                    lookup,
                    hash,
                    fill_cache,
                    floor > 0,
                    Some(&mut visit),
                    &mut searched,
                )? {
                    if e.sequence < floor {
                        return Ok(TablesEnd::Answer(None)); // under a range deletion
                    }
                    match e.kind {
                        ValueKind::Value => {
                            let value = DBPinnableSlice::from_block(e.value);
                            return Ok(TablesEnd::Answer(Some(value)));
                        }
                        ValueKind::Deletion | ValueKind::RangeDeletion => {
                            return Ok(TablesEnd::Answer(None))
                        }
                        // Visited, with the table's older versions.
                        ValueKind::Merge => merging = true,
                    }
                } else if searched && !charged {
                    wasted = Some((level, f));
                }
                drop(visit);
                if let Some(base) = base.take() {
                    return Ok(TablesEnd::Merge(base));
                }
            }
            Ok(match merging {
                true => TablesEnd::Merge(None),
                false => TablesEnd::Answer(None),
            })
        })?;
        match end {
            TablesEnd::Answer(v) => Ok(v),
            TablesEnd::Merge(base) => self.full_merge(key, base.as_deref(), operands),
        }
    }

    /// Takes one wasted lookup from `f` (of `level`), which a lookup
    /// searched before finding its answer in, or going on to, an older
    /// file; when that leaves `f` due, names it the read-triggered
    /// compaction candidate of the lookup's version and wakes the
    /// background threads (once per version: the state lock is taken
    /// only then).
    pub(super) fn charge_seek(&self, sv: &SuperVersion, level: usize, f: &Arc<FileMetaData>) {
        if f.charge_seek() && sv.version.seek_compaction.set((level, f.clone())).is_ok() {
            let _st = self.state.lock();
            self.bg_work.notify_all();
        }
    }

    /// `samples` read samples of an iterator (LevelDB's `RecordReadSample`,
    /// Pebble's `sampleRead`), all of `key`, which the iterator returned
    /// from version `sv`. If two or more files of the version may hold it,
    /// a read there merges them all, so the first (newest) is charged one
    /// wasted lookup per sample, as a get that searched it in vain would
    /// charge it. The files are found once for all the samples. Packed
    /// tables, whose lookups and scans read no blocks, are not charged (as
    /// for gets).
    pub(super) fn sample_read(&self, sv: &SuperVersion, key: &[u8], samples: u32) {
        with_lookup(key, MAX_SEQUENCE_NUMBER, |lookup| {
            let mut files = self.candidate_files(sv, key, lookup);
            let (Some((level, first)), Some(_)) = (files.next(), files.next()) else {
                return;
            };
            let table = self.table_cache.get_for(first, level);
            if table.is_ok_and(|t| matches!(*t, Table::Block(_))) {
                for _ in 0..samples {
                    self.charge_seek(sv, level, first);
                }
            }
        });
    }

    /// With direct reads, where every block read waits on the device: if
    /// the search for `lookup` in `table` (the next candidate) would read
    /// its first block from the device, reads that block and the first
    /// block of each candidate table after it (`rest`) at once
    /// ([`SeekReads`]), of the tables whose filters let the key through,
    /// so that the searches that follow find them in the block cache. True
    /// if it read.
    ///
    /// Tables whose blocks are cached are searched first, one by one: a
    /// key found in one of them reads nothing from the device. Once a
    /// table would read, the deeper ones are read with it, since a key
    /// that is not in that table would wait on each of them in turn. A
    /// key found in that table leaves the deeper blocks read for nothing:
    /// without filters (db_bench's default) that is a key above the last
    /// level, with them only a false positive.
    fn read_ahead_for_get<'v>(
        &self,
        table: &Table,
        rest: impl Iterator<Item = (usize, &'v Arc<FileMetaData>)>,
        lookup: &[u8],
        hash: u64,
    ) -> bool {
        SEEK_READS.with(|reads| {
            let mut reads = reads.borrow_mut();
            table.plan_get(lookup, hash, &mut reads);
            if reads.is_empty() {
                return false;
            }
            for (level, f) in rest {
                if let Ok(table) = self.table_cache.get_for(f, level) {
                    table.plan_get(lookup, hash, &mut reads);
                }
            }
            reads.read_all();
            true
        })
    }

    /// The table files of `sv` that may hold `key`, newest first: L0's
    /// (each checked against both bounds, as they overlap), then one
    /// candidate per level: the first whose largest key is at or after
    /// the lookup key, so only its smallest key is left to check.
    fn candidate_files<'v>(
        &'v self,
        sv: &'v SuperVersion,
        key: &'v [u8],
        lookup: &'v [u8],
    ) -> impl Iterator<Item = (usize, &'v Arc<FileMetaData>)> + Clone + 'v {
        let ucmp = &*self.user_cmp;
        let v = &sv.version;
        let l0 = v.files(0).iter().filter(move |f| {
            ucmp.compare(key, f.smallest.user_key()) != Ordering::Less
                && ucmp.compare(key, f.largest.user_key()) != Ordering::Greater
        });
        let deeper = (1..NUM_LEVELS).filter_map(move |level| {
            let i = v.find_file(&self.icmp, level, lookup);
            let f = v.files(level).get(i)?;
            (ucmp.compare(key, f.smallest.user_key()) != Ordering::Less).then_some((level, f))
        });
        l0.map(|f| (0, f)).chain(deeper)
    }

    /// The value of `key` at `seq` when its newest visible version is a
    /// merge operand (a batched read's keys that meet one): walks the
    /// versions of the key newest first, source by source, gathering
    /// operands until a value or a deletion, and merges them. Versions
    /// older than `floor` are under a range deletion: the walk ends there.
    pub(super) fn merge_get(
        &self,
        sv: &SuperVersion,
        key: &[u8],
        seq: SequenceNumber,
        fill_cache: bool,
        floor: SequenceNumber,
    ) -> Result<Option<DBPinnableSlice>> {
        let mut operands = MergeOperands::default();
        match memtables_get(sv, key, seq, floor, &mut operands) {
            MemGet::Found(v) => Ok(v),
            MemGet::Merge(Some(base)) => self.full_merge(key, base, operands),
            MemGet::Merge(None) => {
                self.get_from_tables(sv, key, seq, fill_cache, floor, operands, true)
            }
            MemGet::NotFound => {
                self.get_from_tables(sv, key, seq, fill_cache, floor, operands, false)
            }
        }
    }

    /// The merge of `operands` (newest first, as a read gathers them) onto
    /// `base`.
    fn full_merge(
        &self,
        key: &[u8],
        base: Option<&[u8]>,
        mut operands: MergeOperands,
    ) -> Result<Option<DBPinnableSlice>> {
        operands.reverse(); // met newest first
        let op = self.opts.merge_operator.as_deref();
        let merged = merge_operator::resolve(op, key, base, &operands)?;
        Ok(Some(DBPinnableSlice::from_block(Bytes::from(merged))))
    }

    /// The range deletions `sv` holds: its memtables' and its tables'.
    /// Free when there are none (a few atomic loads).
    pub(crate) fn range_del_view(&self, sv: &SuperVersion) -> Result<RangeDelView> {
        let mut view = RangeDelView::default();
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            if let Some(list) = mem.range_deletions() {
                view.push(list);
            }
        }
        if let Some(list) = self.version_range_deletions(&sv.version)? {
            view.push(list);
        }
        Ok(view)
    }

    /// The range deletions of every table of `v`, fragmented once per
    /// version (only tables recorded with range deletions are asked);
    /// `None` if there are none (no reference count is touched then).
    pub(crate) fn version_range_deletions(
        &self,
        v: &Version,
    ) -> Result<Option<Arc<FragmentedRangeTombstones>>> {
        if let Some(list) = v.range_dels.get() {
            return Ok((!list.is_empty()).then(|| list.clone()));
        }
        let mut all = Vec::new();
        for level in 0..NUM_LEVELS {
            for f in v.files(level) {
                if f.has_range_deletions {
                    all.extend_from_slice(&self.table_range_deletions(f, level)?);
                }
            }
        }
        let list = Arc::new(FragmentedRangeTombstones::new(&all, self.user_cmp.clone()));
        let list = v.range_dels.get_or_init(|| list);
        Ok((!list.is_empty()).then(|| list.clone()))
    }

    /// A merged iterator over every memtable and table of `sv`, for a
    /// read at `read_seq` (sources skip what newer sources' range
    /// deletions visible to it delete).
    pub(crate) fn internal_iter(
        self: &Arc<Self>,
        sv: &SuperVersion,
        read_seq: SequenceNumber,
        fill_cache: bool,
        filters: &[Arc<dyn BlockPropertyFilter>],
    ) -> Result<MergingIterator> {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        // The range deletions of the sources already added (all newer than
        // the next), one fragmented list per source: each is built once
        // (a memtable's is cached), and later sources share them.
        let mut newer = RangeDelView::default();
        let mut add = |child: Box<dyn InternalIterator>,
                       own: Option<Arc<FragmentedRangeTombstones>>| {
            let child: Box<dyn InternalIterator> = if newer.is_empty() {
                child
            } else {
                Box::new(SkipCovered::new(child, newer.clone(), read_seq))
            };
            children.push(child);
            if let Some(list) = own {
                newer.push(list);
            }
        };
        for m in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            add(Box::new(m.iter()), m.range_deletions());
        }
        // Whether any table holds range deletions: cached per version.
        let tables_have = self.version_range_deletions(&sv.version)?.is_some();
        for f in sv.version.files(0) {
            let own = match f.has_range_deletions {
                true => self.fragmented_once(&f.fragmented_range_dels, || {
                    self.table_range_deletions(f, 0).map(|own| own.to_vec())
                })?,
                false => None,
            };
            let table = self.table_cache.get_for(f, 0)?;
            add(
                Box::new(table.iter_opt(fill_cache).with_filters(filters)),
                own,
            );
        }
        for level in 1..NUM_LEVELS {
            if sv.version.num_files(level) > 0 {
                let own = match tables_have {
                    true => self.fragmented_once(&sv.version.level_range_dels[level], || {
                        let mut own = Vec::new();
                        for f in sv.version.files(level) {
                            if f.has_range_deletions {
                                own.extend_from_slice(&self.table_range_deletions(f, level)?);
                            }
                        }
                        Ok(own)
                    })?,
                    false => None,
                };
                add(
                    Box::new(
                        LevelIterator::new(self.clone(), sv.version.clone(), level, fill_cache)
                            .with_filters(filters),
                    ),
                    own,
                );
            }
        }
        let icmp: Arc<dyn Comparator> = Arc::new(self.icmp.clone());
        Ok(MergingIterator::new(icmp, children).with_seek_reads(self.opts.use_direct_reads))
    }

    /// The fragmented list `cell` holds, built from what `read` gives the
    /// first time (`None` if that is empty). Every iterator over a version
    /// used to fragment each source's range deletions anew: with 1,000
    /// of them that was most of a `seekrandom` that opens an iterator per
    /// seek (as db_bench's does).
    fn fragmented_once(
        &self,
        cell: &LevelRangeDels,
        read: impl FnOnce() -> Result<Vec<RangeTombstone>>,
    ) -> Result<Option<Arc<FragmentedRangeTombstones>>> {
        if let Some(list) = cell.get() {
            return Ok(list.clone());
        }
        let own = read()?;
        let list = (!own.is_empty())
            .then(|| Arc::new(FragmentedRangeTombstones::new(&own, self.user_cmp.clone())));
        Ok(cell.get_or_init(|| list).clone())
    }

    /// The range deletions of table `f` of `level`, read once per file.
    fn table_range_deletions(
        &self,
        f: &FileMetaData,
        level: usize,
    ) -> Result<Arc<[RangeTombstone]>> {
        if let Some(own) = f.range_dels.get() {
            return Ok(own.clone());
        }
        let table = self.table_cache.get_for(f, level)?;
        let own: Arc<[RangeTombstone]> = table.range_deletions().into();
        Ok(f.range_dels.get_or_init(|| own).clone())
    }
}

thread_local! {
    /// Each thread's reads ahead for a point lookup (`read_ahead_for_get`)
    /// or a batch of them (`with_seek_reads`).
    static SEEK_READS: std::cell::RefCell<SeekReads> = std::cell::RefCell::new(SeekReads::default());
}

/// Runs `f` with this thread's [`SeekReads`] (empty), for reads ahead of a
/// batched lookup.
pub(super) fn with_seek_reads<R>(f: impl FnOnce(&mut SeekReads) -> R) -> R {
    SEEK_READS.with(|reads| {
        let mut reads = reads.borrow_mut();
        reads.clear();
        f(&mut reads)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{BytewiseComparator, InternalKeyComparator};
    use crate::memtable::MemTableGet;

    fn key(i: usize) -> Vec<u8> {
        format!("key{i:06}").into_bytes()
    }

    /// Small values live in the arena's blocks; every seventh is bigger
    /// than a quarter block, which the arena allocates on its own.
    fn value(i: usize) -> Vec<u8> {
        let len = if i.is_multiple_of(7) {
            2000
        } else {
            10 + i % 50
        };
        (0..len).map(|j| (i * 31 + j) as u8).collect()
    }

    fn pin(mem: &Arc<MemTable>, i: usize) -> DBPinnableSlice {
        match mem.get_with_sequence(&key(i), MAX_SEQUENCE_NUMBER) {
            Some((MemTableGet::Value(v), _)) => DBPinnableSlice::from_mem(mem, v),
            _ => panic!("key {i} not in the memtable"),
        }
    }

    /// Values pinned from a memtable (the unsafe pointer in
    /// `DBPinnableSlice`) stay readable while other threads insert into
    /// the same memtable, from other threads, and after every other holder
    /// of the memtable is gone. Run under Miri in `.ci/run`.
    #[test]
    fn pinned_memtable_values_outlive_their_readers() {
        let n = if cfg!(miri) { 30 } else { 3000 };
        let mem = Arc::new(MemTable::new(
            InternalKeyComparator::new(Arc::new(BytewiseComparator)),
            64 << 20,
        ));
        for i in 0..n {
            mem.add(i as u64 + 1, ValueKind::Value, &key(i), &value(i));
        }
        let pinned: Vec<DBPinnableSlice> = (0..n).map(|i| pin(&mem, i)).collect();
        std::thread::scope(|s| {
            let writer = mem.clone();
            s.spawn(move || {
                for i in n..2 * n {
                    writer.add(i as u64 + 1, ValueKind::Value, &key(i), &value(i));
                }
            });
            s.spawn(|| {
                for (i, p) in pinned.iter().enumerate() {
                    assert_eq!(p.as_bytes(), &value(i)[..]);
                }
            });
        });
        let late = pin(&mem, 2 * n - 1);
        drop(mem);
        // Only the pinned values hold the memtable now.
        let reader = std::thread::spawn(move || {
            for (i, p) in pinned.iter().enumerate() {
                assert_eq!(p.to_vec(), value(i));
            }
            assert_eq!(&*late, &value(2 * n - 1)[..]);
        });
        reader.join().unwrap();
    }

    #[test]
    fn pinned_block_values_read_their_bytes() {
        let block = Bytes::from(value(14));
        let p = DBPinnableSlice::from_block(block.slice(100..300));
        drop(block);
        assert_eq!(p.as_bytes(), &value(14)[100..300]);
        assert!(p == value(14)[100..300]);
    }
}
