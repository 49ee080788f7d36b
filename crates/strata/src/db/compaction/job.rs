//! Running a compaction and installing its result.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use crate::error::{Error, Result};
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::key::{
    pack_trailer, parse_entry_key, Comparator, InternalKey, SequenceNumber, ValueKind,
    MAX_SEQUENCE_NUMBER,
};
use crate::range_del::{self, CoveredFilter, FragmentedRangeTombstones};
use crate::version::{FileMetaData, NewFile, Version, VersionEdit, NUM_LEVELS};

use super::super::inner::{DbInner, DbState};
use super::super::merge_operator::{self, Folded};
use super::super::table_outputs::TableOutputs;
use super::cutting::OutputCutter;
use super::picker::{Compaction, LAST_LEVEL};

impl DbInner {
    /// Runs `c` with the lock released during the I/O and installs it.
    pub(crate) fn run_compaction(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        c: Compaction,
    ) -> Result<()> {
        let start = Instant::now();
        for f in c.all_inputs() {
            f.being_compacted.store(true, Ordering::Release);
        }
        if c.read_triggered {
            self.read_triggered_compactions
                .fetch_add(1, Ordering::Relaxed);
        }
        let id = st.next_compaction_id;
        st.next_compaction_id += 1;
        let cf = st.cf_mut(self.id);
        cf.running.push((c.output_level, c.range.clone()));
        cf.running_ids.push(id);
        let result = self.run_compaction_inner(st, &c, start);
        let cf = st.cf_mut(self.id);
        let at = cf
            .running_ids
            .iter()
            .position(|&x| x == id)
            .expect("running compaction is registered");
        cf.running.remove(at);
        cf.running_ids.remove(at);
        for f in c.all_inputs() {
            f.being_compacted.store(false, Ordering::Release);
        }
        // The compaction holds the version it was picked from, which still
        // names the inputs: let go of it before looking for obsolete files,
        // or the inputs stay on disk until the next flush or compaction.
        drop(c);
        if result.is_ok() {
            self.delete_obsolete_files(st);
        }
        result
    }

    fn run_compaction_inner(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        c: &Compaction,
        start: Instant,
    ) -> Result<()> {
        let mut edit = VersionEdit::new();
        edit.set_column_family(self.id);
        for f in &c.inputs[0] {
            edit.delete_file(c.level, f.number);
        }
        for f in &c.inputs[1] {
            edit.delete_file(c.output_level, f.number);
        }
        if c.is_trivial_move(&*self.user_cmp, &self.opts) {
            let moved: u64 = c.input_bytes(0);
            for f in &c.inputs[0] {
                edit.add_new_file(c.output_level, f.to_new_file());
            }
            self.remember_current(st);
            st.versions.log_and_apply(&mut edit)?;
            self.publish_read_view(st);
            self.advance_compact_pointer(st, c);
            let s = &mut st.cf_mut(self.id).stats[c.output_level];
            s.bytes_moved += moved;
            s.count += 1;
            s.micros += start.elapsed().as_micros() as u64;
            return Ok(());
        }
        let snapshots: Vec<SequenceNumber> = st.snapshots.keys().copied().collect();
        let results: Vec<JobResult> = MutexGuard::unlocked(st, || {
            // The boundaries read the inputs' indexes: without the lock.
            // One job per key range: [start, boundary 1), ..., [last, end].
            let mut jobs = Vec::new();
            let mut lower = None;
            for upper in self
                .subcompaction_boundaries(c)
                .into_iter()
                .map(Some)
                .chain(std::iter::once(None))
            {
                jobs.push(Job {
                    db: self,
                    c,
                    snapshots: snapshots.clone(),
                    lower: lower.take(),
                    upper: upper.clone(),
                });
                lower = upper;
            }
            if jobs.len() == 1 {
                return vec![jobs[0].run()];
            }
            // The first range on this thread, the others on their own.
            std::thread::scope(|s| {
                let others: Vec<_> = jobs[1..].iter().map(|j| s.spawn(move || j.run())).collect();
                let mut results = vec![jobs[0].run()];
                for h in others {
                    results.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
                }
                results
            })
        });
        // The ranges' outputs in key order, installed together or not at
        // all: one failed range discards every range's tables.
        let ranges = results.len() as u64;
        let (mut outputs, mut counts, mut numbers, mut failed) =
            (Vec::new(), (0u64, 0u64), Vec::new(), None);
        for r in results {
            match r {
                Ok((files, (read, dropped))) => {
                    numbers.extend(files.iter().map(|f| f.number));
                    outputs.extend(files);
                    counts.0 += read;
                    counts.1 += dropped;
                }
                Err((e, written)) => {
                    numbers.extend(written);
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            self.discard_outputs(st, &numbers);
            return Err(e);
        }
        if ranges > 1 {
            self.subcompactions.fetch_add(ranges, Ordering::Relaxed);
        }
        let written: u64 = outputs.iter().map(|f| f.file_size).sum();
        for f in &outputs {
            edit.add_new_file(c.output_level, f.clone());
        }
        self.remember_current(st);
        let applied = st.versions.log_and_apply(&mut edit);
        for f in &outputs {
            st.pending_outputs.remove(&f.number);
        }
        applied?;
        self.publish_read_view(st);
        #[cfg(feature = "invariants")]
        self.check_invariants(st);
        self.advance_compact_pointer(st, c);
        let s = &mut st.cf_mut(self.id).stats[c.output_level];
        s.bytes_read_n += c.input_bytes(0);
        s.bytes_read_np1 += c.input_bytes(1);
        s.bytes_written += written;
        s.micros += start.elapsed().as_micros() as u64;
        s.count += 1;
        s.keys_in += counts.0;
        s.keys_dropped += counts.1;
        Ok(())
    }

    fn advance_compact_pointer(&self, st: &mut DbState, c: &Compaction) {
        if let Some(last) = c.inputs[0]
            .iter()
            .map(|f| f.largest.encoded())
            .max_by(|a, b| self.icmp.compare(a, b))
        {
            st.cf_mut(self.id).compact_pointer[c.level] = last.to_vec();
        }
    }

    /// Checks the level invariants of the current version: levels 1 and
    /// deeper sorted and non-overlapping (by internal key), every file in one
    /// place only, every file present on disk.
    #[cfg(feature = "invariants")]
    pub(crate) fn check_invariants(&self, st: &DbState) {
        let v = st.versions.current_cf(self.id);
        let mut seen = std::collections::HashSet::new();
        for level in 0..NUM_LEVELS {
            for f in v.files(level) {
                assert!(seen.insert(f.number), "file {} referenced twice", f.number);
                assert!(
                    self.fs.exists(&super::super::filename::table_file_name(
                        &self.dir, f.number
                    )),
                    "file {} missing",
                    f.number
                );
            }
            if level > 0 {
                for w in v.files(level).windows(2) {
                    // Internal keys: a file whose last range deletion
                    // ends at the next file's first user key ends with a
                    // bound that sorts before that key's entries.
                    assert_eq!(
                        self.icmp
                            .compare(w[0].largest.encoded(), w[1].smallest.encoded()),
                        CmpOrdering::Less,
                        "L{level} files {} and {} overlap or are out of order",
                        w[0].number,
                        w[1].number
                    );
                }
            }
        }
    }

    /// Compacts every file overlapping `[begin, end]` (user keys, None =
    /// unbounded) level by level down to the last level holding data in
    /// the range, as LevelDB's `CompactRange`, then rewrites that last
    /// level's files in the range in place. Waits for running
    /// compactions first and keeps automatic ones out while it runs.
    pub(crate) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            let Some(cf) = st.cfs.get(&self.id) else {
                return Err(self.dropped_error());
            };
            if !cf.manual_compaction && cf.running.is_empty() {
                break;
            }
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            self.bg_done.wait(&mut st);
        }
        st.cf_mut(self.id).manual_compaction = true;
        let result = self.compact_range_locked(&mut st, begin, end);
        st.cf_mut(self.id).manual_compaction = false;
        if let Err(e) = &result {
            // An I/O or corruption error stops writes as it does for an
            // automatic compaction (Busy only means "not now").
            if !matches!(e, Error::Busy(_)) {
                self.set_bg_error(&mut st, e.clone());
            }
        }
        self.bg_done.notify_all();
        self.bg_work.notify_all();
        crate::util::heap::release_free_memory_unlocked(&mut st);
        result
    }

    fn compact_range_locked(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        // No version is held across `run_compaction`: its obsolete-file
        // pass must see the inputs unreferenced.
        let ucmp = &*self.user_cmp;
        let last = {
            let version = st.versions.current_cf(self.id);
            (0..NUM_LEVELS)
                .rev()
                .find(|&l| !version.overlapping_files(l, begin, end, ucmp).is_empty())
        };
        let Some(last) = last else {
            return Ok(());
        };
        let mut level = 0;
        while level < last || (level == 0 && last == 0) {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            let version = st.versions.current_cf(self.id);
            let targets = super::level_targets(&self.opts, &version);
            let output = if level == 0 {
                targets.base_level
            } else {
                level + 1
            };
            if output > LAST_LEVEL {
                break;
            }
            let inputs0 = version.overlapping_files(level, begin, end, ucmp);
            if !inputs0.is_empty() {
                let c = self.build_compaction(st, &version, level, output, inputs0);
                drop(version);
                let Some(mut c) = c else {
                    return Err(Error::Busy(
                        "compact_range: inputs are being compacted".into(),
                    ));
                };
                c.manual = true;
                self.run_compaction(st, c)?;
            }
            level = output;
        }
        // Rewrite the last level in place too, so that versions no snapshot
        // needs and deletion markers are dropped (RocksDB's
        // `BottommostLevelCompaction::kForce`).
        if level == last && last > 0 {
            let version = st.versions.current_cf(self.id);
            let inputs0 = version.overlapping_files(last, begin, end, ucmp);
            if !inputs0.is_empty() {
                let c = self.build_compaction(st, &version, last, last, inputs0);
                drop(version);
                let Some(mut c) = c else {
                    return Err(Error::Busy(
                        "compact_range: inputs are being compacted".into(),
                    ));
                };
                c.manual = true;
                self.run_compaction(st, c)?;
            }
        }
        Ok(())
    }

    /// Waits until no flush or compaction is running or needed.
    pub(crate) fn wait_for_compact(&self) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            let idle = !st.flush_running()
                && st.cfs.values().all(|c| {
                    c.imm.is_empty()
                        && c.running.is_empty()
                        && !c.manual_compaction
                        && (c.handle.opts.disable_auto_compactions
                            || c.handle.pick_compaction(&st).is_none())
                });
            if idle {
                return Ok(());
            }
            self.bg_work.notify_all();
            self.bg_done
                .wait_for(&mut st, std::time::Duration::from_millis(50));
        }
    }
}

/// Key anchors sampled per input file to place subcompaction boundaries.
const SUBCOMPACTION_ANCHORS_PER_FILE: usize = 128;

/// The merge of one compaction, or of one key range of it (a
/// subcompaction), run without the database lock.
struct Job<'a> {
    db: &'a DbInner,
    c: &'a Compaction,
    /// Live snapshots, ascending.
    snapshots: Vec<SequenceNumber>,
    /// The user keys this job merges: `[lower, upper)`, unbounded where
    /// `None`. Every version of a user key falls in one job.
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
}

/// Tracks how much of the grandparent level the current output overlaps,
/// to cut it before a later compaction of it would read too much.
struct GrandparentCursor<'a> {
    files: &'a [Arc<crate::version::FileMetaData>],
    index: usize,
    overlapped: u64,
    seen_key: bool,
    limit: u64,
}

impl GrandparentCursor<'_> {
    /// True if the output should be cut before `user_key`.
    fn should_stop_before(&mut self, user_key: &[u8], ucmp: &dyn Comparator) -> bool {
        while self.index < self.files.len()
            && ucmp.compare(user_key, self.files[self.index].largest.user_key())
                == CmpOrdering::Greater
        {
            if self.seen_key {
                self.overlapped += self.files[self.index].file_size;
            }
            self.index += 1;
        }
        self.seen_key = true;
        if self.overlapped > self.limit {
            self.overlapped = 0;
            return true;
        }
        false
    }

    fn reset(&mut self) {
        self.overlapped = 0;
    }
}

type JobResult = std::result::Result<(Vec<NewFile>, (u64, u64)), (Error, Vec<u64>)>;

impl Job<'_> {
    fn run(&self) -> JobResult {
        let db = self.db;
        let mut out = TableOutputs::new(db, self.c.output_level, || db.new_output_number());
        match self
            .merge(&mut out)
            .and_then(|counts| Ok((out.finish()?, counts)))
        {
            Ok(done) => Ok(done),
            Err(e) => Err((e, out.numbers().to_vec())),
        }
    }

    /// The snapshot stripe of `seq`: entries of one user key in the same
    /// stripe are indistinguishable to every reader, so only the newest
    /// needs keeping.
    fn stripe(&self, seq: SequenceNumber) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    /// True if `f` holds user keys of this job's range.
    fn overlaps(&self, f: &FileMetaData) -> bool {
        let ucmp = &*self.db.user_cmp;
        let after_lower = self
            .lower
            .as_ref()
            .is_none_or(|lo| ucmp.compare(f.largest.user_key(), lo) != CmpOrdering::Less);
        let before_upper = self
            .upper
            .as_ref()
            .is_none_or(|hi| ucmp.compare(f.smallest.user_key(), hi) == CmpOrdering::Less);
        after_lower && before_upper
    }

    /// Merges the inputs; returns (entries read, entries dropped).
    fn merge<F: FnMut() -> u64>(&self, out: &mut TableOutputs<'_, F>) -> Result<(u64, u64)> {
        let db = self.db;
        let ucmp = &*db.user_cmp;
        let range_dels = self.range_deletions(out)?;
        // Children are the inputs in order: the upper level's files first
        // (level 0: newest first). Their age ranks, for the cutter: each
        // level-0 file its own, the output level's files one rank.
        let upper = self.c.inputs[0].len();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        let mut ranks: Vec<u32> = Vec::new();
        for (i, f) in self.c.all_inputs().enumerate() {
            if !self.overlaps(f) {
                continue;
            }
            ranks.push(match i {
                i if i >= upper => u32::MAX,
                i if self.c.level == 0 => i as u32,
                _ => 0,
            });
            // A table wholly under newer range deletions of this compaction
            // is dropped without being read.
            let covered = !f.has_range_deletions
                && range_dels.as_ref().is_some_and(|list| {
                    range_del::covers_table(
                        list,
                        &self.snapshots,
                        f.smallest.user_key(),
                        f.largest.user_key(),
                        (f.smallest_seqno, f.largest_seqno),
                    )
                });
            if covered {
                // Counted once, by the range holding its first key.
                let first_here = self
                    .lower
                    .as_ref()
                    .is_none_or(|lo| ucmp.compare(f.smallest.user_key(), lo) != CmpOrdering::Less);
                if first_here {
                    db.tables_dropped_unread.fetch_add(1, Ordering::Relaxed);
                }
                children.push(Box::new(range_del::EmptyIterator));
                continue;
            }
            // Inputs leave with this compaction: open them as deep tables.
            let reader = db
                .table_cache
                .get(f.number, f.file_size, self.c.output_level)?;
            children.push(Box::new(
                reader.iter_for_compaction(db.opts.compaction_readahead_size),
            ));
        }
        let icmp: Arc<dyn Comparator> = Arc::new(db.icmp.clone());
        let mut it = CoveredFilter::new(
            MergingIterator::new(icmp, children),
            range_dels,
            self.snapshots.clone(),
        );
        match &self.lower {
            Some(lo) => {
                it.seek(InternalKey::new(lo, MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK).encoded())
            }
            None => it.seek_to_first(),
        }
        let target = db.opts.target_file_size(self.c.output_level);
        let mut grandparents = GrandparentCursor {
            files: &self.c.grandparents,
            index: 0,
            overlapped: 0,
            seen_key: false,
            limit: db.max_compaction_bytes(),
        };
        let partitioner = db.opts.sst_partitioner.as_ref().map(|f| f.partitioner());
        let mut cutter = OutputCutter::new(
            &self.c.version,
            &db.icmp,
            self.c.output_level,
            partitioner,
            db.opts.stream_aware_cutting,
            target,
        );
        let rank = |child: usize| -> u32 { ranks[child] };
        // Nothing below the output: an entry every snapshot sees loses its
        // sequence number (as RocksDB's bottommost compactions do), so the
        // tables of the last level carry no version information (a packed
        // table then stores no version tags at all).
        let bottommost =
            (self.c.output_level + 1..NUM_LEVELS).all(|level| self.c.version.num_files(level) == 0);
        let mut zeroed: Vec<u8> = Vec::new();
        let mut current_user_key: Vec<u8> = Vec::new();
        let mut last_stripe = usize::MAX;
        let (mut read, mut dropped) = (0u64, 0u64);
        while it.valid() {
            read += 1;
            if read.is_multiple_of(1024) && db.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Busy(
                    "compaction stopped: the database is closing".into(),
                ));
            }
            let key = it.key();
            let Some(p) = parse_entry_key(key) else {
                return Err(Error::corruption(
                    "compaction input",
                    0,
                    "malformed internal key",
                ));
            };
            if let Some(hi) = &self.upper {
                if ucmp.compare(p.user_key, hi) != CmpOrdering::Less {
                    break;
                }
            }
            let new_user_key =
                read == 1 || ucmp.compare(&current_user_key, p.user_key) != CmpOrdering::Equal;
            if new_user_key {
                // Cut only between user keys, so no user key spans two files.
                let stop = grandparents.should_stop_before(p.user_key, ucmp);
                let size = out.current_size();
                let source = Some(rank(it.inner().current_child()));
                let prev = size.map(|_| current_user_key.as_slice());
                let cut = cutter.should_cut(prev, p.user_key, size.unwrap_or(0), source);
                if size.is_some_and(|size| cut || stop || size >= target) {
                    out.cut()?;
                    grandparents.reset();
                }
                current_user_key.clear();
                current_user_key.extend_from_slice(p.user_key);
                last_stripe = usize::MAX;
            }
            let stripe = self.stripe(p.sequence);
            let drop = if stripe == last_stripe {
                // A newer entry of this key is visible to the same readers.
                true
            } else {
                p.kind == ValueKind::Deletion
                    && stripe == 0
                    && is_base_level_for_key(&self.c.version, self.c.output_level, p.user_key, ucmp)
            };
            last_stripe = stripe;
            if !drop && p.kind == ValueKind::Merge {
                // The operands of this key in this stripe, down to a value
                // or deletion, become one entry where they can.
                let user_key = p.user_key.to_vec();
                let folded = self.fold_operands(&mut it, &user_key, stripe, bottommost)?;
                if let Some(e) = folded.failed {
                    return Err(e);
                }
                read += folded.consumed - 1;
                dropped += folded.consumed - folded.entries.len() as u64;
                for (k, v, seq) in &folded.entries {
                    out.add(k, v, *seq)?;
                    cutter.wrote((k.len() + v.len()) as u64);
                }
                // `it` is past what the fold consumed.
                continue;
            }
            if drop {
                dropped += 1;
            } else {
                let value = it.value();
                if bottommost && stripe == 0 && p.kind == ValueKind::Value && p.sequence != 0 {
                    // The key's oldest kept entry: older ones, if any, are
                    // in its stripe and dropped, so it still sorts last.
                    zeroed.clear();
                    zeroed.extend_from_slice(p.user_key);
                    zeroed.extend_from_slice(&pack_trailer(0, ValueKind::Value).to_le_bytes());
                    out.add(&zeroed, value, 0)?;
                } else {
                    out.add(key, value, p.sequence)?;
                }
                cutter.wrote((key.len() + value.len()) as u64);
            }
            it.next();
        }
        it.status()?;
        Ok((read, dropped))
    }
}

impl Job<'_> {
    /// The inputs' range deletions, fragmented: given to `out` as they are
    /// to be written (per snapshot stripe the newest only; none where no
    /// snapshot needs them and no level below the output holds their
    /// range), and returned whole, to hide the entries they delete.
    fn range_deletions<F: FnMut() -> u64>(
        &self,
        out: &mut TableOutputs<'_, F>,
    ) -> Result<Option<Arc<FragmentedRangeTombstones>>> {
        let db = self.db;
        let mut all = Vec::new();
        for (i, inputs) in self.c.inputs.iter().enumerate() {
            let level = if i == 0 {
                self.c.level
            } else {
                self.c.output_level
            };
            for f in inputs.iter().filter(|f| f.has_range_deletions) {
                let table = db.table_cache.get_for(f, level)?;
                all.extend_from_slice(table.range_deletions());
            }
        }
        if all.is_empty() {
            return Ok(None);
        }
        let list = Arc::new(FragmentedRangeTombstones::new(&all, db.user_cmp.clone()));
        let ucmp = &*db.user_cmp;
        let version = &self.c.version;
        let earliest = self
            .snapshots
            .first()
            .copied()
            .unwrap_or(SequenceNumber::MAX);
        let kept = range_del::compact_fragments(&list, &self.snapshots, |f, seq| {
            seq <= earliest
                && (self.c.output_level + 1..NUM_LEVELS).all(|level| {
                    version
                        .overlapping_files(level, Some(&f.start), Some(&f.end), ucmp)
                        .is_empty()
                })
        });
        // This job's range only: the neighbouring jobs write the rest.
        let kept = kept
            .into_iter()
            .filter_map(|mut f| {
                if let Some(lo) = &self.lower {
                    if ucmp.compare(&f.start, lo) == CmpOrdering::Less {
                        f.start = lo.clone();
                    }
                }
                if let Some(hi) = &self.upper {
                    if ucmp.compare(hi, &f.end) == CmpOrdering::Less {
                        f.end = hi.clone();
                    }
                }
                (ucmp.compare(&f.start, &f.end) == CmpOrdering::Less).then_some(f)
            })
            .collect();
        out.set_range_deletions(kept);
        Ok(Some(list))
    }

    /// [`merge_operator::fold_operands`] for this compaction: a run ending
    /// without a base is fully merged when nothing older of the key can
    /// exist (its last entry in the inputs, and no level below the output
    /// may hold it); the result loses its sequence number where a kept
    /// value would.
    fn fold_operands(
        &self,
        it: &mut CoveredFilter<MergingIterator>,
        user_key: &[u8],
        stripe: usize,
        bottommost: bool,
    ) -> Result<Folded> {
        let db = self.db;
        let ucmp = &*db.user_cmp;
        merge_operator::fold_operands(
            it,
            user_key,
            stripe,
            |seq| self.stripe(seq),
            ucmp,
            db.opts.merge_operator.as_deref(),
            || is_base_level_for_key(&self.c.version, self.c.output_level, user_key, ucmp),
            bottommost && stripe == 0,
        )
    }
}

impl DbInner {
    /// Where to split `c` into subcompactions (`set_max_subcompactions`):
    /// the first user key of each range after the first, ascending; none
    /// for one range. Only compactions out of level 0 into a deeper level
    /// and those of `compact_range` split (as RocksDB's leveled
    /// compactions), into at most `max_subcompactions` ranges of at least
    /// the output level's target file size each. The boundaries are keys
    /// sampled from the inputs' indexes (each input's anchors split it
    /// into parts of equal size), chosen so the ranges hold about equal
    /// input bytes.
    fn subcompaction_boundaries(&self, c: &Compaction) -> Vec<Vec<u8>> {
        let max = self.opts.max_subcompactions as usize;
        if max <= 1 || !(c.manual || (c.level == 0 && c.output_level > 0)) {
            return Vec::new();
        }
        let ucmp = &*self.user_cmp;
        let total: u64 = c.all_inputs().map(|f| f.file_size).sum();
        let target = self.opts.target_file_size(c.output_level).max(1);
        let ranges = max.min((total / target) as usize);
        if ranges <= 1 {
            return Vec::new();
        }
        // Each input's key anchors (points splitting it into parts of
        // equal size, from its index) with the bytes before each, in key
        // order: a level-0 file spanning the whole key space then weighs
        // on each part of it as its data does.
        let mut anchors: Vec<(Vec<u8>, f64)> = Vec::new();
        for (i, inputs) in c.inputs.iter().enumerate() {
            let level = if i == 0 { c.level } else { c.output_level };
            for f in inputs {
                let keys = match self.table_cache.get_for(f, level) {
                    Ok(t) => t
                        .key_anchors(SUBCOMPACTION_ANCHORS_PER_FILE)
                        .unwrap_or_default(),
                    Err(_) => Vec::new(),
                };
                let keys = if keys.is_empty() {
                    vec![f.largest.user_key().to_vec()]
                } else {
                    keys
                };
                let share = f.file_size as f64 / keys.len() as f64;
                anchors.extend(keys.into_iter().map(|k| (k, share)));
            }
        }
        anchors.sort_by(|a, b| ucmp.compare(&a.0, &b.0));
        let first = c
            .all_inputs()
            .map(|f| f.smallest.user_key())
            .min_by(|a, b| ucmp.compare(a, b));
        let step = total as f64 / ranges as f64;
        let mut boundaries: Vec<Vec<u8>> = Vec::new();
        let mut before = 0.0;
        for (key, bytes) in anchors {
            before += bytes;
            if boundaries.len() + 1 >= ranges {
                break;
            }
            if before < step * (boundaries.len() + 1) as f64 {
                continue;
            }
            // A range starts after the anchor that ends its predecessor's
            // share; boundaries ascend strictly and skip the first key.
            let after_first = first.is_none_or(|f| ucmp.compare(&key, f) == CmpOrdering::Greater);
            let ascending = boundaries
                .last()
                .is_none_or(|b| ucmp.compare(&key, b) == CmpOrdering::Greater);
            if after_first && ascending {
                boundaries.push(key);
            }
        }
        boundaries
    }

    /// Bound on the grandparent bytes one output may overlap.
    pub(crate) fn max_compaction_bytes(&self) -> u64 {
        match self.opts.max_compaction_bytes {
            0 => self.opts.target_file_size_base.saturating_mul(25),
            n => n,
        }
    }
}

/// True if no level below `output_level` may hold `user_key`, so a deletion
/// of it has nothing left to hide.
fn is_base_level_for_key(
    version: &Version,
    output_level: usize,
    user_key: &[u8],
    ucmp: &dyn Comparator,
) -> bool {
    for level in output_level + 1..NUM_LEVELS {
        let files = version.files(level);
        let i = files
            .partition_point(|f| ucmp.compare(f.largest.user_key(), user_key) == CmpOrdering::Less);
        if i < files.len()
            && ucmp.compare(files[i].smallest.user_key(), user_key) != CmpOrdering::Greater
        {
            return false;
        }
    }
    true
}
