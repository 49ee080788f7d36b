//! Batched point lookups (MultiGet): many keys looked up in one walk of the
//! tree instead of one walk each.
//!
//! One super version serves the whole batch (one trip through the database
//! mutex). The memtables are searched key by key; the keys they do not
//! decide are sorted once, and the tables are then visited level by level,
//! newest first, each with only the keys still undecided:
//!
//! - L0: every file (newest first) with the keys inside its range;
//! - L1 and deeper: keys ascend, so the file that may hold a key is found
//!   from the previous key's file (that file, or the next one, before any
//!   binary search), and the keys of one file go to it together.
//!
//! Inside a table the keys are looked up together
//! (`TableReader::multi_get`: filter probes prefetched in one pass, one
//! index search and one block fetch shared by keys of the same block).
//! With direct reads, the blocks a level's tables lack for the batch are
//! read at once before those lookups (`read_ahead_level`).
//! Values found in tables are slices of the pinned block, found in a
//! memtable they borrow it: no copy. An error reading a table fails only the
//! keys whose lookup needed that table (or that block).

use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::ops::Range;
use std::sync::Arc;

use crate::error::Result;
use crate::key::prefix_search::compare_internal_in;
use crate::key::{extract_user_key, pack_trailer, SequenceNumber, ValueKind};
use crate::sst::filter::filter_hash;
use crate::sst::{Found, MultiGetScratch, TableProbe};
use crate::version::{FileMetaData, Version, NUM_LEVELS};

use super::inner::{DbInner, SuperVersion};
use super::merge_operator::MergeOperands;
use super::read::{memtables_get, with_seek_reads, DBPinnableSlice, MemGet};

/// Most blocks a batch reads ahead in a level (`read_ahead_level`), twice
/// the io_uring ring's entries: a bigger batch's other keys are read by
/// their tables as before (many keys to a table, which read theirs at
/// once). The buffer stays small, and no block is cached long before its
/// lookup, where a small cache could evict it.
const BATCH_READS_AT_ONCE: usize = 64;

/// Keys in a row whose blocks the cache holds after which a batch stops
/// planning reads ahead in a level (`read_ahead_level`): with the data
/// cached, planning is a second lookup of every key's block for nothing
/// (a quarter slower on a warm cache, docs/benchmarks.md, stop 71).
const CACHED_IN_A_ROW_MAX: usize = 4;

/// The answer for one key of a batch.
pub(crate) type MultiGetResult = Result<Option<DBPinnableSlice>>;

/// The keys of a batch still undecided after the memtables, ascending, with
/// their lookup keys in one buffer.
struct Pending {
    /// Index into the caller's keys.
    key_index: Vec<usize>,
    /// Range of the lookup key in `lookups`.
    lookup: Vec<Range<usize>>,
    hash: Vec<u64>,
    lookups: Vec<u8>,
}

impl Pending {
    fn len(&self) -> usize {
        self.key_index.len()
    }

    fn lookup(&self, j: usize) -> &[u8] {
        &self.lookups[self.lookup[j].clone()]
    }

    fn user_key(&self, j: usize) -> &[u8] {
        extract_user_key(self.lookup(j))
    }

    fn probe(&self, j: usize) -> TableProbe<'_> {
        TableProbe {
            lookup: self.lookup(j),
            hash: self.hash[j],
        }
    }
}

impl DbInner {
    /// [`multi_get`](Self::multi_get) at the read options' snapshot,
    /// checked or not and filling the cache or not as they say.
    pub(crate) fn multi_get_ro(
        &self,
        keys: &[&[u8]],
        sorted_input: bool,
        ro: &super::options::ReadOptions,
    ) -> Vec<MultiGetResult> {
        let _verify = crate::sst::ChecksumMode::for_read(ro.verify_checksums);
        self.multi_get(keys, sorted_input, ro.snapshot, ro.cache_fill())
    }

    /// [`multi_get_ro`](Self::multi_get_ro) appending its answers to
    /// `out`: a batch of one is the point lookup itself, with no vector
    /// of its own.
    pub(crate) fn multi_get_ro_into(
        &self,
        keys: &[&[u8]],
        sorted_input: bool,
        ro: &super::options::ReadOptions,
        out: &mut Vec<MultiGetResult>,
    ) {
        let _verify = crate::sst::ChecksumMode::for_read(ro.verify_checksums);
        match keys {
            [] => {}
            [key] => out.push(self.get(key, ro.snapshot, ro.cache_fill())),
            _ => out.extend(self.multi_get(keys, sorted_input, ro.snapshot, ro.cache_fill())),
        }
    }

    /// The newest visible value of every key of `keys` at `snapshot` (or
    /// now), in the order given. `sorted_input` is a hint that the keys
    /// ascend under the user comparator; it saves the sort, and a wrong hint
    /// costs only the check.
    pub(crate) fn multi_get(
        &self,
        keys: &[&[u8]],
        sorted_input: bool,
        snapshot: Option<SequenceNumber>,
        fill_cache: bool,
    ) -> Vec<MultiGetResult> {
        match keys {
            [] => return Vec::new(),
            // One key: the point lookup itself, without the batch's
            // sorting and bookkeeping (a batch of one is never slower
            // than a get).
            [key] => return vec![self.get(key, snapshot, fill_cache)],
            _ => {}
        }
        self.point_reads.add(keys.len() as u64);
        let sv = self.super_version();
        let r = self.multi_get_in(&sv, keys, sorted_input, snapshot, fill_cache);
        self.release_super_version(sv);
        r
    }

    fn multi_get_in(
        &self,
        sv: &SuperVersion,
        keys: &[&[u8]],
        sorted_input: bool,
        snapshot: Option<SequenceNumber>,
        fill_cache: bool,
    ) -> Vec<MultiGetResult> {
        let seq = snapshot.unwrap_or(sv.sequence);
        let range_dels = match self.range_del_view(sv) {
            Ok(view) => view,
            Err(e) => return keys.iter().map(|_| Err(e.clone())).collect(),
        };
        // Per key, the newest range deletion over it (none: no entry).
        let floors: Vec<SequenceNumber> = if range_dels.is_empty() {
            Vec::new()
        } else {
            keys.iter()
                .map(|k| range_dels.max_covering(k, seq))
                .collect()
        };
        let floor = |i: usize| floors.get(i).copied().unwrap_or(0);
        let mut results: Vec<Option<MultiGetResult>> = Vec::with_capacity(keys.len());
        // Keys whose newest visible version is a merge operand: decided
        // (no further source is asked in the batch), then answered one by
        // one by the merge read.
        let mut merges = Vec::new();
        let mut operands = MergeOperands::default();
        for (i, key) in keys.iter().enumerate() {
            operands.clear();
            results.push(match memtables_get(sv, key, seq, floor(i), &mut operands) {
                MemGet::Found(v) => Some(Ok(v)),
                MemGet::Merge(_) => {
                    merges.push(i);
                    Some(Ok(None))
                }
                MemGet::NotFound => None,
            });
        }
        let pending = self.pending(keys, &results, sorted_input, seq);
        let mut scratch = Vec::with_capacity(pending.len());
        let mut answers = Answers {
            results: &mut results,
            merges: &mut merges,
            floors: &floors,
            charges: SeekCharges::new(sv, pending.len(), self.opts.read_triggered_compactions),
        };
        self.tables_get(sv, &pending, &mut answers, &mut scratch, fill_cache);
        for i in merges {
            results[i] = Some(self.merge_get(sv, keys[i], seq, fill_cache, floor(i)));
        }
        results.into_iter().map(|r| r.unwrap_or(Ok(None))).collect()
    }

    /// The keys the memtables left undecided, sorted (stable, so duplicates
    /// keep their order), with their lookup keys and filter hashes.
    fn pending(
        &self,
        keys: &[&[u8]],
        results: &[Option<MultiGetResult>],
        sorted_input: bool,
        seq: SequenceNumber,
    ) -> Pending {
        let ucmp = &*self.user_cmp;
        let mut order: Vec<usize> = (0..keys.len()).filter(|&i| results[i].is_none()).collect();
        let ascending = |w: &[usize]| ucmp.compare(keys[w[0]], keys[w[1]]) != Ordering::Greater;
        if !(sorted_input && order.windows(2).all(ascending)) {
            order.sort_by(|&a, &b| ucmp.compare(keys[a], keys[b]));
        }
        let trailer = pack_trailer(seq, ValueKind::FOR_SEEK).to_le_bytes();
        let bytes: usize = order.iter().map(|&i| keys[i].len() + trailer.len()).sum();
        let mut p = Pending {
            key_index: Vec::with_capacity(order.len()),
            lookup: Vec::with_capacity(order.len()),
            hash: Vec::with_capacity(order.len()),
            lookups: Vec::with_capacity(bytes),
        };
        for i in order {
            let start = p.lookups.len();
            p.lookups.extend_from_slice(keys[i]);
            p.lookups.extend_from_slice(&trailer);
            p.key_index.push(i);
            p.lookup.push(start..p.lookups.len());
            p.hash.push(filter_hash(keys[i]));
        }
        p
    }

    /// Looks the pending keys up in the tables of `sv`, L0 newest first,
    /// then level by level, each time with only the keys still undecided.
    /// `active` is scratch: the positions in `pending` still undecided.
    fn tables_get<'v>(
        &self,
        sv: &'v SuperVersion,
        pending: &Pending,
        answers: &mut Answers<'_, 'v>,
        active: &mut Vec<usize>,
        fill_cache: bool,
    ) {
        let ucmp = &*self.user_cmp;
        let scratch = &mut (
            Vec::with_capacity(pending.len()),
            MultiGetScratch::default(),
        );
        active.clear();
        active.extend(0..pending.len());
        let v = &sv.version;
        let read_ahead = fill_cache && self.opts.use_direct_reads;
        for f in v.files(0) {
            // The active keys ascend: the file's are one run of them, found
            // by two binary searches on user keys.
            let (lo, hi) = (f.smallest.user_key(), f.largest.user_key());
            let start = active.partition_point(|&j| ucmp.compare(pending.user_key(j), lo).is_lt());
            let len =
                active[start..].partition_point(|&j| ucmp.compare(pending.user_key(j), hi).is_le());
            if len > 0 {
                let group = &active[start..start + len];
                self.file_get((0, f), pending, scratch, group, answers, fill_cache);
                active.retain(|&j| answers.results[pending.key_index[j]].is_none());
            }
        }
        let mut group = Vec::new();
        for level in 1..NUM_LEVELS {
            let files = v.files(level);
            if files.is_empty() || active.is_empty() {
                continue;
            }
            if read_ahead {
                self.read_ahead_level(v, level, pending, active, &mut group);
            }
            self.for_each_file_group(v, level, pending, active, &mut group, |f, keys| {
                let file = (level, &files[f]);
                self.file_get(file, pending, scratch, keys, answers, fill_cache);
                ControlFlow::Continue(())
            });
            active.retain(|&j| answers.results[pending.key_index[j]].is_none());
        }
    }

    /// With direct reads, where every block read waits on the device:
    /// reads at once ([`SeekReads`](crate::iter::SeekReads)) the data
    /// block that the lookup of each `active` key would read first in its
    /// table of `level` (1 or deeper), where the filter lets the key
    /// through and the block cache lacks the block. The tables' lookups
    /// that follow find them in the cache. Without it each table reads its
    /// own blocks at once, and a batch spread over four tables waits on
    /// the device four times (RocksDB's MultiGet reads a level's blocks
    /// together with `ReadOptions::async_io`). At most
    /// [`BATCH_READS_AT_ONCE`] blocks, for the batch's first keys in the
    /// level; none after [`CACHED_IN_A_ROW_MAX`] keys in a row found
    /// their blocks in the cache.
    ///
    /// Level 0 is left to its tables: a key there has a candidate in
    /// every file, so reading them all at once reads blocks of older
    /// files for keys that a newer one answers (8% more device reads
    /// with six level-0 files, and no faster: docs/benchmarks.md, stop 71).
    fn read_ahead_level(
        &self,
        v: &Version,
        level: usize,
        pending: &Pending,
        active: &[usize],
        group: &mut Vec<usize>,
    ) {
        let files = v.files(level);
        with_seek_reads(|reads| {
            let mut cached_in_a_row = 0;
            self.for_each_file_group(v, level, pending, active, group, |f, keys| {
                // A table that cannot be opened fails its keys' lookups.
                let Ok(table) = self.table_cache.get_for(&files[f], level) else {
                    return ControlFlow::Continue(());
                };
                for &j in keys {
                    if table.plan_get(pending.lookup(j), pending.hash[j], reads) {
                        cached_in_a_row += 1;
                    } else {
                        cached_in_a_row = 0;
                    }
                    if reads.len() >= BATCH_READS_AT_ONCE || cached_in_a_row == CACHED_IN_A_ROW_MAX
                    {
                        return ControlFlow::Break(());
                    }
                }
                ControlFlow::Continue(())
            });
            reads.read_all();
        });
    }

    /// Calls `f` with each table of `level` (1 or deeper) that may hold
    /// some of the `active` keys (ascending positions in `pending`) and
    /// those keys, in file order, until `f` breaks. Keys ascend, so a
    /// key's file is the previous key's or the next one before any binary
    /// search. `group` is scratch, left empty.
    fn for_each_file_group(
        &self,
        v: &Version,
        level: usize,
        pending: &Pending,
        active: &[usize],
        group: &mut Vec<usize>,
        mut f: impl FnMut(usize, &[usize]) -> ControlFlow<()>,
    ) {
        let ucmp = &*self.user_cmp;
        let order = ucmp.builtin_order();
        let files = v.files(level);
        let before_or_at = |j: usize, f: usize| {
            compare_internal_in(
                order,
                &self.icmp,
                pending.lookup(j),
                files[f].largest.encoded(),
            )
            .is_le()
        };
        group.clear();
        let mut current: Option<usize> = None;
        for &j in active {
            let at = match current {
                Some(c) if before_or_at(j, c) => c,
                Some(c) if c + 1 < files.len() && before_or_at(j, c + 1) => c + 1,
                _ => v.find_file(&self.icmp, level, pending.lookup(j)),
            };
            if current != Some(at) && !group.is_empty() {
                let prev = current.expect("a group belongs to a file");
                let flow = f(prev, group);
                group.clear();
                if flow.is_break() {
                    return;
                }
            }
            current = Some(at);
            if at >= files.len() {
                break; // past the level's last key, as is every later key
            }
            if ucmp.compare(pending.user_key(j), files[at].smallest.user_key()) != Ordering::Less {
                group.push(j);
            }
        }
        if let (Some(at), false) = (current, group.is_empty()) {
            let _ = f(at, group);
        }
        group.clear();
    }

    /// Looks up the pending keys `group` (ascending positions in `pending`)
    /// in table `f` of `level`, recording each answer the table gives and
    /// each key it searched in vain. The probe list and table scratch are
    /// reused across the files of a batch.
    fn file_get<'p, 'v>(
        &self,
        (level, f): (usize, &'v Arc<FileMetaData>),
        pending: &'p Pending,
        (probes, scratch): &mut (Vec<TableProbe<'p>>, MultiGetScratch),
        group: &[usize],
        answers: &mut Answers<'_, 'v>,
        fill_cache: bool,
    ) {
        answers.charges.going_on(self, group);
        let table = match self.table_cache.get_for(f, level) {
            Ok(t) => t,
            Err(e) => {
                for &j in group {
                    answers.results[pending.key_index[j]] = Some(Err(e.clone()));
                }
                return;
            }
        };
        probes.clear();
        probes.extend(group.iter().map(|&j| pending.probe(j)));
        let need_sequence = !answers.floors.is_empty();
        table.multi_get(probes, fill_cache, need_sequence, scratch, &mut |p, r| {
            let i = pending.key_index[group[p]];
            let floor = answers.floors.get(i).copied().unwrap_or(0);
            answers.results[i] = Some(match r {
                // Under a range deletion.
                Ok(e) if e.sequence < floor => Ok(None),
                Ok(e) if e.kind == ValueKind::Merge => {
                    answers.merges.push(i);
                    Ok(None)
                }
                r => r.map(table_value),
            });
        });
        answers
            .charges
            .searched(group, scratch.searched(), (level, f));
    }
}

/// Per pending key of a batch, its lookup's charge toward a read-triggered
/// compaction, made as a get makes it ([`DbInner::charge_seek`]): the
/// first table whose filter let the key through and which did not answer
/// it is charged once the lookup goes on to another table. One charge per
/// key and batch. Empty (nothing charged) with read-triggered compactions
/// off.
struct SeekCharges<'v> {
    sv: &'v SuperVersion,
    state: Vec<SeekCharge<'v>>,
}

#[derive(Clone, Copy)]
enum SeekCharge<'v> {
    /// No table searched in vain yet.
    Open,
    /// Table `file` of `level` searched in vain: charged if the lookup
    /// goes on.
    Wasted(usize, &'v Arc<FileMetaData>),
    /// The lookup's charge is made.
    Made,
}

impl<'v> SeekCharges<'v> {
    fn new(sv: &'v SuperVersion, keys: usize, enabled: bool) -> SeekCharges<'v> {
        let len = if enabled { keys } else { 0 };
        SeekCharges {
            sv,
            state: vec![SeekCharge::Open; len],
        }
    }

    /// The lookups of `group` (positions in the pending keys) go on to
    /// another table: each charges the table it searched in vain, if any.
    fn going_on(&mut self, db: &DbInner, group: &[usize]) {
        if self.state.is_empty() {
            return;
        }
        for &j in group {
            if let SeekCharge::Wasted(level, f) = self.state[j] {
                db.charge_seek(self.sv, level, f);
                self.state[j] = SeekCharge::Made;
            }
        }
    }

    /// Table `file` searched the lookups `searched` (positions in `group`)
    /// past its filter: the first such table of each lookup is the one a
    /// lookup that goes on charges. A lookup the table answered never goes
    /// on.
    fn searched(
        &mut self,
        group: &[usize],
        searched: impl Iterator<Item = usize>,
        (level, file): (usize, &'v Arc<FileMetaData>),
    ) {
        if self.state.is_empty() {
            return;
        }
        for p in searched {
            let j = group[p];
            if let SeekCharge::Open = self.state[j] {
                self.state[j] = SeekCharge::Wasted(level, file);
            }
        }
    }
}

/// The answers of a batch: per key, decided or not yet; and the keys
/// whose newest version is a merge operand, left to the merge read.
struct Answers<'r, 'v> {
    results: &'r mut [Option<MultiGetResult>],
    merges: &'r mut Vec<usize>,
    /// Per key, the newest range deletion over it; empty if there is none.
    floors: &'r [SequenceNumber],
    /// Per pending key (not per key), its lookup's read charge.
    charges: SeekCharges<'v>,
}

/// A table's answer as the user sees it.
fn table_value(e: Found) -> Option<DBPinnableSlice> {
    match e.kind {
        ValueKind::Value => Some(DBPinnableSlice::from_block(e.value)),
        ValueKind::Deletion | ValueKind::Merge | ValueKind::RangeDeletion => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use crate::sst::read_ahead_seen;
    use crate::{BlockBasedOptions, Cache, Error, Options, DB};

    fn value(k: u32) -> Vec<u8> {
        format!("value {k} ").repeat(3).into_bytes()
    }

    /// Direct reads, no filter (db_bench's default), small blocks and
    /// files, and a fresh cache.
    fn options() -> Options {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_write_buffer_size(64 << 10);
        opts.set_target_file_size_base(16 << 10);
        opts.set_disable_auto_compactions(true);
        opts.set_use_direct_reads(true);
        let mut t = BlockBasedOptions::default();
        t.set_block_size(512);
        t.set_block_cache(&Cache::new_lru_cache(8 << 20));
        opts.set_block_based_table_factory(&t);
        opts
    }

    /// A fresh directory for a database with direct reads, or None (and
    /// nothing left behind) where the file system refuses `O_DIRECT`.
    fn direct_dir(tag: &str) -> Option<PathBuf> {
        let dir = std::env::temp_dir().join(format!("strata-mget-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        match DB::open(&options(), &dir) {
            Ok(_) => Some(dir),
            Err(Error::NotSupported(what)) => {
                eprintln!("no O_DIRECT in the temporary directory: {what}");
                let _ = std::fs::remove_dir_all(&dir);
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    fn files_at(db: &DB, level: usize) -> usize {
        let p = format!("strata.num-files-at-level{level}");
        db.property_value(&p).unwrap().unwrap().parse().unwrap()
    }

    /// Looks up `keys` in `dir`, opened afresh, and checks the answers
    /// against `want`. Returns the calls that read blocks ahead, and the
    /// most tables one of them read from.
    fn batch_reads(
        dir: &Path,
        keys: &[u32],
        want: impl Fn(u32) -> Option<Vec<u8>>,
    ) -> (usize, usize) {
        let db = DB::open(&options(), dir).unwrap();
        let names: Vec<String> = keys.iter().map(|k| format!("{k:08}")).collect();
        read_ahead_seen::take();
        let got = db.batched_multi_get(names.iter(), false);
        let seen = read_ahead_seen::take();
        for (k, r) in keys.iter().zip(got) {
            assert_eq!(r.unwrap().map(|v| v.to_vec()), want(*k), "key {k}");
        }
        seen
    }

    /// With direct reads, a batch's blocks in the tables of one level are
    /// read at once, not a table at a time: one read, after which the
    /// tables' lookups read nothing more (the blocks read were the ones
    /// they needed). Every answer is right, for a batch larger than one
    /// such read too, and with newer values in level-0 files above.
    #[test]
    fn a_levels_blocks_for_a_batch_are_read_at_once() {
        let Some(dir) = direct_dir("level") else {
            return;
        };
        {
            let db = DB::open(&options(), &dir).unwrap();
            for k in (0..20_000u32).step_by(2) {
                db.put(format!("{k:08}"), value(k)).unwrap();
            }
            db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
            let deepest = (1..7).rev().find(|&l| files_at(&db, l) > 0).unwrap();
            assert!(files_at(&db, deepest) >= 8, "level {deepest}");
            assert_eq!(files_at(&db, 0), 0);
        }
        let old = |k: u32| k.is_multiple_of(2).then(|| value(k));
        // A key in each of several of the level's tables, absent ones too.
        let keys: Vec<u32> = (0..20).map(|i| i * 1000 + 2 * (i % 3) + i % 2).collect();
        let (calls, most) = batch_reads(&dir, &keys, old);
        assert_eq!(calls, 1, "blocks read after the level's read");
        assert!(most >= 8, "the read spanned {most} tables");
        // More blocks than one read takes: the rest read by their tables.
        let keys: Vec<u32> = (0..20_000).step_by(33).collect();
        let (calls, _) = batch_reads(&dir, &keys, old);
        assert!(calls > 1, "{calls} reads");
        // Then newer values in level-0 files, which each table reads on
        // its own, above the level read at once.
        let new = |k: u32| format!("new {k}").into_bytes();
        {
            let db = DB::open(&options(), &dir).unwrap();
            for round in 0..3u32 {
                for k in (0..20_000u32).step_by(2).filter(|k| k % 7 == round) {
                    db.put(format!("{k:08}"), new(k)).unwrap();
                }
                db.flush().unwrap();
            }
            assert!(files_at(&db, 0) >= 3);
        }
        let keys: Vec<u32> = (0..40).map(|i| i * 490 + 2 * (i % 5)).collect();
        let want = |k: u32| match (k % 2, k % 7) {
            (0, 0..=2) => Some(new(k)),
            _ => old(k),
        };
        batch_reads(&dir, &keys, want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
