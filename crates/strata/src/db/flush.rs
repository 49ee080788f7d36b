//! Background threads, memtable flush, and writing a level-0 table.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{parse_entry_key, SequenceNumber, ValueKind};
use crate::range_del::{self, CoveredFilter, FragmentedRangeTombstones, RangeTombstone};
use crate::util::heap::release_free_memory_unlocked;
use crate::version::{NewFile, Version, VersionEdit};

use super::compaction::cutting::OutputCutter;
use super::filename::table_file_name;
use super::inner::{DbInner, DbState};
use super::merge_operator;
use super::table_outputs::TableOutputs;

impl DbInner {
    /// The body of each background thread: flushes first (the family
    /// whose oldest memtable is oldest), then compactions (families in
    /// turn, starting after the last one served).
    pub(crate) fn background_loop(self: Arc<Self>) {
        let mut st = self.state.lock();
        let mut next_cf = 0u32;
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                break;
            }
            if self.auto_resume_due(&st) {
                self.auto_resume(&mut st);
                continue;
            }
            if st.bg_error.is_none() && !st.flush_running() {
                let oldest = st
                    .cfs
                    .values()
                    .filter(|c| !c.dropping)
                    .filter_map(|c| c.imm.front().map(|m| (m.log_number, c.handle.clone())))
                    .min_by_key(|(log, h)| (*log, h.id));
                if let Some((_, cf)) = oldest {
                    st.cf_mut(cf.id).flushing = true;
                    let r = cf.flush_oldest(&mut st);
                    st.cf_mut(cf.id).flushing = false;
                    match r {
                        Ok(()) => st.auto_resumes = 0,
                        Err(e) => self.set_bg_error(&mut st, e),
                    }
                    self.bg_done.notify_all();
                    self.bg_work.notify_all();
                    // What the job freed goes back to the system, once
                    // its waiters are on their way (util/heap.rs).
                    release_free_memory_unlocked(&mut st);
                    continue;
                }
            }
            if st.bg_error.is_none() && st.running_compactions() < self.max_compactions() {
                let ids: Vec<u32> = st.cfs.keys().copied().collect();
                let start = ids.partition_point(|&id| id < next_cf);
                let picked = ids[start..].iter().chain(&ids[..start]).find_map(|&id| {
                    let c = st.cf(id);
                    if c.manual_compaction || c.dropping || c.handle.opts.disable_auto_compactions {
                        return None;
                    }
                    let cf = c.handle.clone();
                    cf.pick_compaction(&st).map(|p| (cf, p))
                });
                if let Some((cf, c)) = picked {
                    next_cf = cf.id + 1;
                    let r = cf.run_compaction(&mut st, c);
                    match r {
                        Ok(()) => st.auto_resumes = 0,
                        Err(e) if !self.shutting_down.load(Ordering::Acquire) => {
                            self.set_bg_error(&mut st, e)
                        }
                        Err(_) => {}
                    }
                    self.bg_done.notify_all();
                    self.bg_work.notify_all();
                    release_free_memory_unlocked(&mut st);
                    continue;
                }
            }
            // A read-triggered compaction waiting for writes to pause is
            // looked at again when its wait ends.
            match self.read_compaction_recheck(&st) {
                Some(due) => {
                    self.bg_work.wait_until(&mut st, due);
                }
                None => self.bg_work.wait(&mut st),
            }
        }
    }

    /// True if a full-disk background error should be cleared by this
    /// thread now: it is not the log's, no other thread is on it, no flush
    /// or compaction is still running, and attempts are left.
    fn auto_resume_due(&self, st: &DbState) -> bool {
        let Some(e) = &st.bg_error else {
            return false;
        };
        e.is_no_space()
            && !st.bg_error_in_log
            && !st.auto_resuming
            && !st.flush_running()
            && st.running_compactions() == 0
            && st.auto_resumes < i64::from(self.db_opts.max_bgerror_resume_count)
    }

    /// Waits the retry interval, then clears the error (if it is still
    /// there and nothing else cleared it), so that the work that failed is
    /// picked again: RocksDB's automatic recovery from a full disk.
    fn auto_resume(&self, st: &mut MutexGuard<'_, DbState>) {
        st.auto_resuming = true;
        let interval =
            std::time::Duration::from_micros(self.db_opts.bgerror_resume_retry_interval_us);
        let deadline = Instant::now() + interval;
        while Instant::now() < deadline && !self.shutting_down.load(Ordering::Acquire) {
            self.bg_work.wait_until(st, deadline);
        }
        st.auto_resuming = false;
        if self.shutting_down.load(Ordering::Acquire) {
            return;
        }
        if st.bg_error.as_ref().is_some_and(|e| e.is_no_space()) && !st.bg_error_in_log {
            st.auto_resumes += 1;
            st.bg_error = None;
        }
        self.bg_done.notify_all();
        self.bg_work.notify_all();
    }

    /// Writes the oldest immutable memtable to L0 tables and records them.
    /// The tables are cut where the keys cross the edge of a file already
    /// in the tree (see `compaction/cutting.rs`), so that a memtable holding
    /// several insert streams makes one table per stream.
    fn flush_oldest(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        let Some(imm) = st.cf(self.id).imm.front() else {
            return Ok(());
        };
        let mem = imm.mem.clone();
        let version = st.versions.current_cf(self.id);
        // A snapshot taken later sees every entry of this memtable: only
        // these separate its versions.
        let snapshots: Vec<SequenceNumber> = st.snapshots.keys().copied().collect();
        let start = Instant::now();
        // Another family may replay the closed logs after a power loss:
        // they must be durable before this one's tables hold their writes
        // (see `closed_logs.rs`).
        let sync_closed_logs = st.cfs.len() > 1;
        let (built, numbers) = MutexGuard::unlocked(st, || {
            let range_dels = mem.range_deletions();
            let mut it = CoveredFilter::new(mem.iter(), range_dels.clone(), snapshots.clone());
            it.seek_to_first();
            let mut out = TableOutputs::new(self, 0, || self.new_output_number());
            if let Some(list) = &range_dels {
                // Level 0: older data below may need every one of them.
                out.set_range_deletions(range_del::compact_fragments(list, &snapshots, |_, _| {
                    false
                }));
            }
            let built = self.write_flush_tables(&mut it, &version, &snapshots, &mut out);
            let built = built.map_err(|e| (e, false)).and_then(|files| {
                if sync_closed_logs {
                    self.sync_closed_logs().map_err(|e| (e, true))?;
                }
                Ok(files)
            });
            (built, out.numbers().to_vec())
        });
        drop(version);
        let files = match built {
            Ok(files) => files,
            Err((e, in_log)) => {
                self.discard_outputs(st, &numbers);
                if in_log {
                    // A closed log's end is unknown: writes stop for good.
                    self.set_log_error(st, e.clone());
                }
                return Err(e);
            }
        };
        let mut edit = VersionEdit::new();
        edit.set_column_family(self.id);
        for f in &files {
            edit.add_new_file(0, f.clone());
        }
        let cf = st.cf_mut(self.id);
        if !files.is_empty() {
            let s = &mut cf.stats[0];
            s.bytes_written += files.iter().map(|f| f.file_size).sum::<u64>();
            s.micros += start.elapsed().as_micros() as u64;
            s.count += 1;
        }
        // The family's writes in logs before its next memtable's first log
        // are now in tables.
        let next_log = cf.imm.get(1).map_or(cf.mem_log_number, |m| m.log_number);
        edit.set_log_number(next_log);
        self.remember_current(st);
        let applied = st.versions.log_and_apply(&mut edit);
        for n in &numbers {
            st.pending_outputs.remove(n);
        }
        applied?;
        st.cf_mut(self.id).imm.pop_front();
        // The table and the memtable's removal, in one publication.
        self.publish_read_view(st);
        self.advance_idle_log_numbers(st)?;
        self.delete_obsolete_files(st);
        Ok(())
    }

    /// Records, for every family with nothing in memory before its
    /// memtable's first log, that older logs hold nothing of it: a family
    /// written rarely (or never) must not keep every log alive.
    pub(crate) fn advance_idle_log_numbers(&self, st: &mut DbState) -> Result<()> {
        let stale: Vec<(u32, u64)> = st
            .cfs
            .iter()
            .filter(|(_, c)| c.imm.is_empty())
            .map(|(&id, c)| (id, c.mem_log_number))
            .filter(|&(id, log)| st.versions.cf_log_number(id) < log)
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        // One sync for all of them.
        st.versions.record_log_numbers(&stale)
    }

    /// A new table file number, protected from the obsolete-file pass until
    /// the caller removes it from `pending_outputs`.
    pub(crate) fn new_output_number(&self) -> u64 {
        let mut st = self.state.lock();
        let n = st.versions.new_file_number();
        st.pending_outputs.insert(n);
        n
    }

    /// Forgets and deletes the outputs of a failed flush or compaction.
    pub(crate) fn discard_outputs(&self, st: &mut DbState, numbers: &[u64]) {
        for &n in numbers {
            st.pending_outputs.remove(&n);
            self.table_cache.evict(n);
            let _ = self.fs.remove(&table_file_name(&self.dir, n));
        }
    }

    /// Writes the entries of `it` (positioned at the first) to `out`, cut
    /// by an [`OutputCutter`]. The merge operands of a key between two of
    /// `snapshots` (ascending) are folded as a compaction folds them
    /// ([`merge_operator::fold_operands`]), except that older versions may
    /// lie in the tables: without a value or deletion below them they
    /// stay operands (one, where the partial merge combines them).
    fn write_flush_tables<F: FnMut() -> u64>(
        &self,
        it: &mut dyn InternalIterator,
        version: &Version,
        snapshots: &[SequenceNumber],
        out: &mut TableOutputs<'_, F>,
    ) -> Result<Vec<NewFile>> {
        let ucmp = &*self.user_cmp;
        let partitioner = self.opts.sst_partitioner.as_ref().map(|f| f.partitioner());
        let mut cutter = OutputCutter::new(
            version,
            &self.icmp,
            0,
            partitioner,
            self.opts.stream_aware_cutting,
            self.opts.target_file_size(1),
        );
        let mut prev_user_key: Vec<u8> = Vec::new();
        while it.valid() {
            let key = it.key();
            let p = parse_entry_key(key)
                .ok_or_else(|| Error::corruption("memtable", 0, "malformed internal key"))?;
            let size = out.current_size();
            if size.is_none() || ucmp.compare(&prev_user_key, p.user_key).is_ne() {
                let prev = size.map(|_| prev_user_key.as_slice());
                if cutter.should_cut(prev, p.user_key, size.unwrap_or(0), None) {
                    out.cut()?;
                }
                prev_user_key.clear();
                prev_user_key.extend_from_slice(p.user_key);
            }
            if p.kind == ValueKind::Merge {
                let stripe_of = |seq: SequenceNumber| snapshots.partition_point(|&s| s < seq);
                let stripe = stripe_of(p.sequence);
                let user_key = p.user_key.to_vec();
                let folded = merge_operator::fold_operands(
                    it,
                    &user_key,
                    stripe,
                    stripe_of,
                    ucmp,
                    self.opts.merge_operator.as_deref(),
                    || false,
                    false,
                )?;
                // A failed merge leaves the entries as they were: reads
                // report it, and a compaction stops on it.
                for (k, v, seq) in &folded.entries {
                    out.add(k, v, *seq)?;
                }
                continue;
            }
            out.add(key, it.value(), p.sequence)?;
            it.next();
        }
        it.status()?;
        out.finish()
    }

    /// Writes the entries of `it` (positioned at the first) and the range
    /// deletions `range_dels` (as written, any order) to table `number`,
    /// synced, and checks that it opens. None if both were empty (no file
    /// is left behind; nor is one on an error).
    pub(crate) fn write_table(
        &self,
        it: &mut dyn InternalIterator,
        range_dels: &[RangeTombstone],
        number: u64,
    ) -> Result<Option<NewFile>> {
        let mut out = TableOutputs::new(self, 0, || number);
        if !range_dels.is_empty() {
            let list = FragmentedRangeTombstones::new(range_dels, self.user_cmp.clone());
            out.set_range_deletions(list.fragments().to_vec());
        }
        let result = (|| {
            while it.valid() {
                let p = parse_entry_key(it.key()).ok_or_else(|| {
                    Error::corruption("recovered memtable", 0, "malformed internal key")
                })?;
                out.add(it.key(), it.value(), p.sequence)?;
                it.next();
            }
            it.status()?;
            out.finish()
        })();
        if result.is_err() {
            self.table_cache.evict(number);
            let _ = self.fs.remove(&table_file_name(&self.dir, number));
        }
        Ok(result?.pop())
    }
}
