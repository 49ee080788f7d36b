//! The state shared by a database's handles and background threads, and
//! its lock discipline.
//!
//! Lock order: `state` is the only long-lived lock. The write leader, flush
//! and compaction release it while doing I/O (`MutexGuard::unlocked`) and
//! re-take it to install results. Readers take it briefly to copy a
//! [`SuperVersion`] (Arcs of the memtables and the current version).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::env::{FileLock, FileSystem};
use crate::error::{Error, Result};
use crate::key::{Comparator, InternalKeyComparator, SequenceNumber};
use crate::memtable::{MemTable, SpareBlocks};
use crate::version::{add_live_files, Version, VersionSet, NUM_LEVELS};
use crate::wal::LogWriter;

use super::filename::{parse_file_name, table_file_name, FileType};
use super::options::Options;
use super::table_cache::TableCache;
use super::write_batch::WriteBatch;

/// A writer waiting in the group-commit queue.
pub(crate) struct Writer {
    pub(crate) slot: Mutex<WriterSlot>,
    pub(crate) sync: bool,
    pub(crate) disable_wal: bool,
    pub(crate) cv: Condvar,
    /// Bumped (under the database mutex) whenever the writer is finished or
    /// made the queue's front, so a waiting writer can spin on it before it
    /// sleeps on `cv`.
    pub(crate) wakeups: std::sync::atomic::AtomicU32,
}

pub(crate) struct WriterSlot {
    /// None for a flush request (it only makes room).
    pub(crate) batch: Option<WriteBatch>,
    /// Set by the leader of a group inserted in parallel: this writer's
    /// own batch goes into the memtables now.
    pub(crate) job: Option<super::write::InsertJob>,
    pub(crate) done: bool,
    pub(crate) result: Result<()>,
}

/// An immutable memtable waiting to be flushed, with the log holding its
/// writes.
pub(crate) struct ImmMemTable {
    pub(crate) mem: Arc<MemTable>,
    pub(crate) log_number: u64,
}

/// A column family's part of the state behind the database mutex.
pub(crate) struct CfState {
    /// The family's handle (cleared when the database closes, which
    /// breaks the cycle through the shared state).
    pub(crate) handle: Arc<DbInner>,
    pub(crate) mem: Arc<MemTable>,
    /// The log that was receiving writes when `mem` was made: the
    /// family's writes in memory are all in this log or later ones.
    pub(crate) mem_log_number: u64,
    /// Oldest first.
    pub(crate) imm: VecDeque<ImmMemTable>,
    /// Output level and user-key range of each running compaction.
    pub(crate) running: Vec<(usize, KeyRange)>,
    pub(crate) running_ids: Vec<u64>,
    /// A `compact_range` is running; automatic compactions wait.
    pub(crate) manual_compaction: bool,
    /// `drop_cf` is waiting for the family's background work to end: no
    /// new flush or compaction of it starts.
    pub(crate) dropping: bool,
    /// A memtable of this family is being flushed.
    pub(crate) flushing: bool,
    /// Per level, the largest key of the last compaction (round robin).
    pub(crate) compact_pointer: [Vec<u8>; NUM_LEVELS],
    /// Flush (L0) and compaction statistics, by output level.
    pub(crate) stats: [LevelStats; NUM_LEVELS],
}

impl CfState {
    /// The state of a new family over `handle`, whose first memtable is
    /// the one `make_cf` put in its read view.
    pub(crate) fn new(handle: Arc<DbInner>, log_number: u64) -> CfState {
        CfState {
            mem: handle.read_view.load().mem.clone(),
            handle,
            mem_log_number: log_number,
            imm: VecDeque::new(),
            running: Vec::new(),
            running_ids: Vec::new(),
            manual_compaction: false,
            dropping: false,
            flushing: false,
            compact_pointer: Default::default(),
            stats: [LevelStats::default(); NUM_LEVELS],
        }
    }
}

/// Everything behind the database mutex.
pub(crate) struct DbState {
    /// The column families, by id; the default (0) is always there.
    pub(crate) cfs: BTreeMap<u32, CfState>,
    /// The log receiving writes.
    pub(crate) log: Option<LogWriter>,
    pub(crate) log_number: u64,
    pub(crate) versions: VersionSet,
    /// The first background failure; once set, writes fail with it.
    pub(crate) bg_error: Option<Error>,
    /// `bg_error` came from the write-ahead log (a write or a memtable
    /// switch): the log's end is unknown, so only a reopen clears it.
    pub(crate) bg_error_in_log: bool,
    /// Automatic clearings of a full-disk `bg_error` since the last
    /// flush or compaction that succeeded.
    pub(crate) auto_resumes: i64,
    /// A background thread is waiting to clear a full-disk `bg_error`.
    pub(crate) auto_resuming: bool,
    pub(crate) writers: VecDeque<Arc<Writer>>,
    /// Write groups logged whose entries are not yet all in the memtables
    /// or not yet visible. More than one only with `enable_pipelined_write`,
    /// where a group's leader hands the log to the next group before its
    /// memtable insert. No memtable is switched while any is pending.
    pub(crate) pending_groups: usize,
    /// The last sequence number given to a logged group: ahead of
    /// `versions.last_sequence()` while groups are pending, meaningless
    /// when none is.
    pub(crate) last_allocated: u64,
    /// Kept by the write path from one group to the next.
    pub(crate) write_scratch: super::write::WriteScratch,
    pub(crate) next_compaction_id: u64,
    /// Files being written that no version references yet.
    pub(crate) pending_outputs: HashSet<u64>,
    /// Live snapshots: sequence → count.
    pub(crate) snapshots: BTreeMap<SequenceNumber, usize>,
    /// Versions that were current once and may still be read.
    pub(crate) old_versions: Vec<Weak<Version>>,
    /// Bytes of user batches written (to the log and the memtable).
    pub(crate) user_bytes: u64,
    /// Bytes appended to logs.
    pub(crate) wal_bytes: u64,
    /// Write groups committed, the writers in them, and the groups whose
    /// writers inserted into the memtables in parallel.
    pub(crate) write_groups: u64,
    pub(crate) group_writers: u64,
    pub(crate) parallel_groups: u64,
    /// Batches their own writers inserted, beside the leader.
    pub(crate) parallel_batches: u64,
    /// Groups that handed the log on before their memtable insert
    /// (`enable_pipelined_write`).
    pub(crate) pipelined_groups: u64,
    /// Writers held back for the background to catch up.
    pub(crate) stalls: WriteStalls,
    /// The first sequence number of a group whose application panicked:
    /// it will never be published, so the groups after it fail instead of
    /// waiting for it (`stop_writes_after_panic`).
    pub(crate) unpublishable_from: Option<SequenceNumber>,
    /// Bytes appended to each log that may still be needed, oldest first
    /// (for `max_total_wal_size`).
    pub(crate) live_logs: VecDeque<(u64, u64)>,
    /// A write with the log disabled was applied since open: closing the
    /// database flushes the memtables, or such writes would be lost by a
    /// clean close (RocksDB's `has_unpersisted_data_`).
    pub(crate) unpersisted_data: bool,
    /// Checkpoints in progress: while nonzero no file is deleted (RocksDB's
    /// `DisableFileDeletions`), so the logs a checkpoint copies stay.
    pub(crate) file_deletions_disabled: usize,
}

pub(crate) use super::compaction::stats::LevelStats;

impl DbState {
    /// Column family `id`'s state. Panics if it is not live: callers hold
    /// the family's handle, and a family is dropped only when no flush or
    /// compaction of it runs.
    pub(crate) fn cf(&self, id: u32) -> &CfState {
        self.cfs.get(&id).expect("column family is live")
    }

    /// Column family `id`'s state, mutable.
    pub(crate) fn cf_mut(&mut self, id: u32) -> &mut CfState {
        self.cfs.get_mut(&id).expect("column family is live")
    }

    /// A flush is running (one at a time, in any family).
    pub(crate) fn flush_running(&self) -> bool {
        self.cfs.values().any(|c| c.flushing)
    }

    /// Compactions running in every family.
    pub(crate) fn running_compactions(&self) -> usize {
        self.cfs.values().map(|c| c.running.len()).sum()
    }
}

/// A range of user keys, both ends included.
pub(crate) type KeyRange = (Vec<u8>, Vec<u8>);

/// What a read needs: the published view (one reference, shared by every
/// reader of it) and the sequence number it reads at.
pub(crate) struct SuperVersion {
    view: Arc<ReadView>,
    pub(crate) sequence: SequenceNumber,
}

impl std::ops::Deref for SuperVersion {
    type Target = ReadView;
    fn deref(&self) -> &ReadView {
        &self.view
    }
}

/// A column family: its options, comparator, tables and published read
/// view, over the database's shared state (reached through `Deref`, so
/// code written for one family reads `self.state`, `self.fs` as before).
pub(crate) struct DbInner {
    pub(crate) shared: Arc<DbShared>,
    /// The family's id (0: the default) and name.
    pub(crate) id: u32,
    pub(crate) name: String,
    /// The family's options: its own where they are per family
    /// (comparator, table format, compaction), the database's otherwise.
    pub(crate) opts: Options,
    pub(crate) icmp: InternalKeyComparator,
    pub(crate) user_cmp: Arc<dyn Comparator>,
    pub(crate) table_cache: TableCache,
    /// The memtables and version reads use, published under the state
    /// lock whenever one of them changes, read without it.
    pub(crate) read_view: ArcSwap<ReadView>,
    /// Set once the family is dropped: writes and reads through its
    /// handle fail.
    pub(crate) dropped: AtomicBool,
}

impl std::ops::Deref for DbInner {
    type Target = DbShared;
    fn deref(&self) -> &DbShared {
        &self.shared
    }
}

/// What the column families of a database share: the directory, the lock,
/// the state behind the mutex (log, manifest, writers, snapshots) and the
/// background threads.
pub(crate) struct DbShared {
    pub(crate) dir: PathBuf,
    /// The options the database was opened with (the default family's).
    pub(crate) db_opts: Options,
    pub(crate) fs: Arc<dyn FileSystem>,
    pub(crate) state: Mutex<DbState>,
    /// The block cache of every family whose options name none (32 MiB,
    /// RocksDB's default).
    pub(crate) default_block_cache: Arc<crate::cache::BlockCache>,
    /// Flushed memtables' arena blocks, for the next memtables of any
    /// family (up to the largest family's write buffer).
    pub(crate) spare_blocks: Arc<SpareBlocks>,
    /// Signalled when background work finishes (memtable flushed, L0
    /// shrunk, error recorded): stalled writers and `flush` wait on it.
    pub(crate) bg_done: Condvar,
    /// Signalled when there may be background work.
    pub(crate) bg_work: Condvar,
    /// `state.writers.len()`, stored under the lock whenever it changes,
    /// for a look without it (see `write_group`).
    pub(crate) queued_writers: std::sync::atomic::AtomicUsize,
    /// Threads inside a write, queued or about to queue (see
    /// `write_or_switch`).
    pub(crate) writers_in_flight: std::sync::atomic::AtomicUsize,
    /// Signalled when a write group's sequence numbers become visible:
    /// the pipelined groups behind it wait for their turn on it, and a
    /// memtable switch waits on it for the groups still inserting.
    pub(crate) group_published: Condvar,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// The directory lock; `None` in a read-only open, which takes none.
    pub(crate) _lock: Option<Box<dyn FileLock>>,
    /// Opened with `DB::open_for_read_only`: no write, flush, compaction
    /// or file deletion ever happens.
    pub(crate) read_only: bool,
    /// Keys looked up by `get` and MultiGet (property `strata.num-point-reads`).
    pub(crate) point_reads: crate::util::counter::ShardedCounter,
    /// Iterator positionings and steps (`strata.num-iterator-steps`),
    /// added by each iterator in runs.
    pub(crate) iterator_steps: crate::util::counter::ShardedCounter,
    /// Compaction inputs dropped unread, wholly under newer range
    /// deletions (`strata.num-tables-dropped-unread`).
    pub(crate) tables_dropped_unread: std::sync::atomic::AtomicU64,
    /// Key ranges merged by compactions split into subcompactions.
    pub(crate) subcompactions: std::sync::atomic::AtomicU64,
    /// Compactions run because point lookups searched a file in vain too
    /// often (`strata.num-read-triggered-compactions`).
    pub(crate) read_triggered_compactions: std::sync::atomic::AtomicU64,
    /// The gate of read-triggered compactions (see
    /// [`DbInner::writes_quiet`]): the last sequence number the picker saw
    /// with a read compaction due, and since when it has stood.
    pub(crate) read_compaction_quiet: parking_lot::Mutex<Option<(u64, std::time::Instant)>>,
    /// Logs a memtable switch closed without syncing.
    pub(crate) closed_logs: super::closed_logs::ClosedLogs,
    /// The last sequence number whose write is in a memtable, published
    /// (Release) after the write's entries are; read (Acquire) before
    /// `read_view`.
    pub(crate) visible_sequence: AtomicU64,
}

/// The parts of the state a read needs: what [`DbInner::super_version`]
/// copies without the state lock.
pub(crate) struct ReadView {
    pub(crate) mem: Arc<MemTable>,
    /// Newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
}

impl ReadView {
    /// The view of column family `id` in `st`.
    pub(crate) fn of(st: &DbState, id: u32) -> ReadView {
        let cf = st.cf(id);
        ReadView {
            mem: cf.mem.clone(),
            imm: cf.imm.iter().rev().map(|m| m.mem.clone()).collect(),
            version: st.versions.current_cf(id),
        }
    }
}

impl DbInner {
    /// An empty memtable for this family: its comparator, its arena sized
    /// by its write buffer.
    pub(crate) fn new_memtable(&self) -> Arc<MemTable> {
        Arc::new(MemTable::with_spare(
            self.icmp.clone(),
            self.opts.write_buffer_size,
            Some(self.shared.spare_blocks.clone()),
        ))
    }

    /// What a read needs: one reference to the published view.
    ///
    /// Takes no lock: the sequence number first, then the view. Every
    /// write at or below that sequence number is in a memtable of the
    /// view, or in a table of its version (a memtable is switched, and a
    /// flush's table installed with its memtable's removal, in one
    /// publication under the state lock); newer entries the view may hold
    /// are above the sequence number, so hidden.
    pub(crate) fn super_version(&self) -> SuperVersion {
        #[cfg(debug_assertions)]
        self.check_read_view();
        let sequence = self.visible_sequence.load(Ordering::Acquire);
        SuperVersion {
            view: self.read_view.load_full(),
            sequence,
        }
    }

    /// Ends a read of `sv`. The last reader of a view that is no longer
    /// published lets go of its version, which may leave files obsolete.
    pub(crate) fn release_super_version(&self, sv: SuperVersion) {
        if let Some(view) = Arc::into_inner(sv.view) {
            self.release_version(view.version);
        }
    }

    /// Publishes the read view and the visible sequence number of `st`;
    /// called under the state lock after every change of the memtables,
    /// the version or the last sequence number.
    pub(crate) fn publish_read_view(&self, st: &DbState) {
        self.read_view.store(Arc::new(ReadView::of(st, self.id)));
        self.publish_sequence(st);
    }

    /// Publishes `st`'s last sequence number to readers.
    pub(crate) fn publish_sequence(&self, st: &DbState) {
        self.visible_sequence
            .store(st.versions.last_sequence(), Ordering::Release);
    }

    /// Debug builds: the published view is the state's (a change left
    /// unpublished would make reads miss data).
    #[cfg(debug_assertions)]
    fn check_read_view(&self) {
        let st = self.state.lock();
        if !st.cfs.contains_key(&self.id) {
            return; // dropped
        }
        let view = self.read_view.load();
        let fresh = ReadView::of(&st, self.id);
        assert!(
            Arc::ptr_eq(&view.mem, &fresh.mem)
                && Arc::ptr_eq(&view.version, &fresh.version)
                && view.imm.len() == fresh.imm.len()
                && view
                    .imm
                    .iter()
                    .zip(&fresh.imm)
                    .all(|(a, b)| Arc::ptr_eq(a, b)),
            "the published read view is stale"
        );
        assert_eq!(
            self.visible_sequence.load(Ordering::Acquire),
            st.versions.last_sequence(),
            "the published sequence number is stale"
        );
    }

    /// Drops a reader's reference to `version`. The last holder of a
    /// version that is no longer current deletes the files only it kept
    /// alive (RocksDB does this when a super version's last reference goes):
    /// otherwise the inputs of a compaction that finished while a read was
    /// in flight stay on disk until the next flush or compaction.
    pub(crate) fn release_version(&self, version: Arc<Version>) {
        if let Some(v) = Arc::into_inner(version) {
            drop(v);
            let mut st = self.state.lock();
            self.delete_obsolete_files(&mut st);
        }
    }

    /// Every live family's handle and current version, default first.
    pub(crate) fn current_versions(&self) -> Vec<(Arc<DbInner>, Arc<Version>)> {
        let st = self.state.lock();
        st.cfs
            .iter()
            .map(|(&id, c)| (c.handle.clone(), st.versions.current_cf(id)))
            .collect()
    }

    /// Stops the background threads and lets go of the families' states,
    /// which hold their handles, which hold the shared state: without
    /// this, a closed (or failed) open would never free it, nor its lock.
    pub(crate) fn release_families(&self) {
        self.shutting_down.store(true, Ordering::Release);
        {
            let _st = self.state.lock();
            self.bg_work.notify_all();
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        let cfs = std::mem::take(&mut self.state.lock().cfs);
        drop(cfs);
    }

    /// The error of a write or read through the handle of a dropped family.
    pub(crate) fn dropped_error(&self) -> Error {
        Error::invalid_argument(format!("column family {:?} was dropped", self.name))
    }

    /// Switches the memtable if it holds data and waits until every
    /// memtable switched before the call is in tables (`DB::flush`).
    pub(crate) fn flush_memtables(&self) -> Result<()> {
        self.write_or_switch(None, false, false)?;
        let mut st = self.state.lock();
        // Every memtable switched before now has a log number below the
        // active memtable's log: those are the ones to wait for. Log
        // numbers only grow, and memtables are flushed oldest first.
        let active_log = st.log_number;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            let Some(cf) = st.cfs.get(&self.id) else {
                return Err(self.dropped_error());
            };
            if cf.imm.front().is_none_or(|m| m.log_number >= active_log) {
                return Ok(());
            }
            self.bg_work.notify_all();
            self.bg_done.wait(&mut st);
        }
    }

    /// [`DbInner::set_bg_error`] for a failure of the write-ahead log.
    pub(crate) fn set_log_error(&self, st: &mut DbState, e: Error) {
        // Even behind another error: the log's end is unknown either way.
        st.bg_error_in_log = true;
        self.set_bg_error(st, e);
    }

    /// Clears a background error a flush, compaction or manifest write
    /// left, and waits until the memtables it held up are flushed (or
    /// the retry fails again, with that error). An error of the log
    /// itself stays: its end is unknown, and only a reopen recovers it.
    pub(crate) fn resume(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::NotSupported(
                "the database is open read-only: there is nothing to resume".into(),
            ));
        }
        let mut st = self.state.lock();
        // The error is judged again after every wait: another resume may
        // have cleared it, or a log failure joined it, meanwhile.
        loop {
            let Some(e) = &st.bg_error else {
                return Ok(());
            };
            if st.bg_error_in_log {
                return Err(e.clone());
            }
            // Wait for background work that was running when it failed.
            if !st.flush_running() && st.running_compactions() == 0 {
                break;
            }
            self.bg_done.wait(&mut st);
        }
        st.bg_error = None;
        self.bg_work.notify_all();
        while st.cfs.values().any(|c| !c.imm.is_empty() && !c.dropping) {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            self.bg_done.wait(&mut st);
        }
        match &st.bg_error {
            Some(e) => Err(e.clone()),
            None => {
                self.delete_obsolete_files(&mut st);
                Ok(())
            }
        }
    }

    pub(crate) fn set_bg_error(&self, st: &mut DbState, e: Error) {
        if st.bg_error.is_none() {
            st.bg_error = Some(e);
        }
        self.bg_done.notify_all();
    }

    /// Moves the current version to the list of older ones before `f`
    /// installs a new one.
    pub(crate) fn remember_current(&self, st: &mut DbState) {
        let old = Arc::downgrade(&st.versions.current_cf(self.id));
        st.old_versions.retain(|w| w.strong_count() > 0);
        st.old_versions.push(old);
    }

    /// Deletes files no version, pending output or live log needs.
    ///
    /// Deletes nothing once a background error is set or a manifest write
    /// has failed (LevelDB returns early the same way): a failed
    /// `log_and_apply` may still have put its edit on disk, so a table that
    /// looks unreferenced in memory may be named by the manifest the next
    /// open replays. Such files wait for that open to sort them out.
    pub(crate) fn delete_obsolete_files(&self, st: &mut DbState) {
        // Logs no family needs leave the accounting of live log bytes
        // (`max_total_wal_size`) whether or not their files go now.
        let min_log = st.versions.min_log_number();
        while st.live_logs.len() > 1 && st.live_logs.front().is_some_and(|&(n, _)| n < min_log) {
            st.live_logs.pop_front();
        }
        self.closed_logs.forget_older_than(min_log);
        // A read-only open sees another process's files: none is its to
        // delete.
        if self.read_only
            || st.bg_error.is_some()
            || st.versions.manifest_failed()
            || st.file_deletions_disabled > 0
        {
            return;
        }
        let live = Self::live_file_numbers(st);
        let manifest = st.versions.manifest_file_number();
        let Ok(names) = self.fs.list(&self.dir) else {
            return;
        };
        for name in names {
            let Some((kind, number)) = parse_file_name(&name) else {
                continue;
            };
            let keep = match kind {
                // Logs below the manifest's log number are flushed durably.
                FileType::Log => number >= st.versions.min_log_number(),
                FileType::Manifest => number >= manifest,
                FileType::Table => live.contains(&number),
                FileType::Temp => live.contains(&number),
                FileType::Current | FileType::Lock | FileType::InfoLog | FileType::Options => true,
            };
            if !keep {
                if kind == FileType::Table {
                    for cf in st.cfs.values() {
                        cf.handle.table_cache.evict(number);
                    }
                }
                // A failed delete leaves garbage, not damage; the next pass retries.
                let _ = self.fs.remove(&self.dir.join(&name));
            }
        }
        // Every live table exists: opens check it, unless told not to
        // (`set_paranoid_checks(false)` opens over a missing table).
        debug_assert!(
            !self.db_opts.paranoid_checks
                || st.versions.column_families().keys().all(|&id| st
                    .versions
                    .current_cf(id)
                    .all_files()
                    .all(|f| self.fs.exists(&table_file_name(&self.dir, f.number))))
        );
    }

    /// Table numbers that some version (current or still read) or a
    /// running job needs.
    ///
    /// Old versions are upgraded while their files are collected. A
    /// reader releasing one of them in that window sees this pass as
    /// another holder and skips its own deletion pass; if the version dies
    /// when the upgrades are dropped, the files it held must be counted
    /// again without it, so the collection repeats. Each round drops at
    /// least one old version, so the rounds are bounded.
    fn live_file_numbers(st: &mut DbState) -> HashSet<u64> {
        loop {
            let mut live = st.versions.live_files();
            st.old_versions.retain(|w| w.strong_count() > 0);
            let held: Vec<Arc<Version>> =
                st.old_versions.iter().filter_map(Weak::upgrade).collect();
            for v in &held {
                add_live_files(v, &mut live);
            }
            drop(held);
            if st.old_versions.iter().all(|w| w.strong_count() > 0) {
                live.extend(st.pending_outputs.iter().copied());
                return live;
            }
        }
    }
}

/// Writes held back for flushes and compactions to catch up
/// (`make_room_for_write`), as RocksDB's write-stall statistics count them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct WriteStalls {
    /// Delays: a write slept 1 ms because level 0 reached
    /// `level0_slowdown_writes_trigger`.
    pub(crate) delays: u64,
    /// Writes stopped because the memtables were full
    /// (`max_write_buffer_number`), until a flush finished.
    pub(crate) memtable_stops: u64,
    /// Writes stopped because level 0 reached
    /// `level0_stop_writes_trigger`, until a compaction finished.
    pub(crate) level0_stops: u64,
    /// Time spent in delays and stops, microseconds.
    pub(crate) micros: u64,
}
