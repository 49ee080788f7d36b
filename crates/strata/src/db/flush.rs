//! Background threads, memtable flush, and writing a level-0 table.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, InternalKey};
use crate::sst::{TableBuilder, TableProperties};
use crate::version::{NewFile, Version, VersionEdit};

use super::compaction::cutting::OutputCutter;
use super::filename::table_file_name;
use super::inner::{DbInner, DbState};

impl DbInner {
    /// The body of each background thread: flushes first, then compactions.
    pub(crate) fn background_loop(self: Arc<Self>) {
        let mut st = self.state.lock();
        loop {
            if self.shutting_down.load(Ordering::Acquire) {
                break;
            }
            if st.bg_error.is_none() && !st.flush_running && !st.imm.is_empty() {
                st.flush_running = true;
                let r = self.flush_oldest(&mut st);
                st.flush_running = false;
                if let Err(e) = r {
                    self.set_bg_error(&mut st, e);
                }
                self.bg_done.notify_all();
                self.bg_work.notify_all();
                continue;
            }
            if st.bg_error.is_none()
                && !st.manual_compaction
                && st.running.len() < self.max_compactions()
                && !self.opts.disable_auto_compactions
            {
                if let Some(c) = self.pick_compaction(&st) {
                    let r = self.run_compaction(&mut st, c);
                    if let Err(e) = r {
                        if !self.shutting_down.load(Ordering::Acquire) {
                            self.set_bg_error(&mut st, e);
                        }
                    }
                    self.bg_done.notify_all();
                    self.bg_work.notify_all();
                    continue;
                }
            }
            self.bg_work.wait(&mut st);
        }
    }

    /// Writes the oldest immutable memtable to L0 tables and records them.
    /// The tables are cut where the keys cross the edge of a file already
    /// in the tree (see `compaction/cutting.rs`), so that a memtable holding
    /// several insert streams makes one table per stream.
    fn flush_oldest(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        let Some(imm) = st.imm.front() else {
            return Ok(());
        };
        let mem = imm.mem.clone();
        let version = st.versions.current();
        let start = Instant::now();
        let mut numbers = Vec::new();
        let built = MutexGuard::unlocked(st, || {
            let mut it = mem.iter();
            it.seek_to_first();
            self.write_flush_tables(&mut it, &version, &mut numbers)
        });
        drop(version);
        let files = match built {
            Ok(files) => files,
            Err(e) => {
                self.discard_outputs(st, &numbers);
                return Err(e);
            }
        };
        let mut edit = VersionEdit::new();
        for f in &files {
            edit.add_new_file(0, f.clone());
        }
        if !files.is_empty() {
            let s = &mut st.stats[0];
            s.bytes_written += files.iter().map(|f| f.file_size).sum::<u64>();
            s.micros += start.elapsed().as_micros() as u64;
            s.count += 1;
        }
        // Writes in logs before the next memtable's log are now in tables.
        let next_log = st.imm.get(1).map_or(st.log_number, |m| m.log_number);
        edit.set_log_number(next_log);
        Self::remember_current(st);
        let applied = st.versions.log_and_apply(&mut edit);
        for n in &numbers {
            st.pending_outputs.remove(n);
        }
        applied?;
        st.imm.pop_front();
        self.delete_obsolete_files(st);
        Ok(())
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

    /// Writes the entries of `it` (positioned at the first) to level-0
    /// tables cut by an [`OutputCutter`], each synced and checked to open.
    /// `numbers` receives every file number used, for cleanup on error.
    fn write_flush_tables(
        &self,
        it: &mut dyn InternalIterator,
        version: &Version,
        numbers: &mut Vec<u64>,
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
        let mut finished: Vec<(u64, TableBuilder, TableStats, TableProperties)> = Vec::new();
        let mut current: Option<(u64, TableBuilder, TableStats)> = None;
        let mut prev_user_key: Vec<u8> = Vec::new();
        while it.valid() {
            let key = it.key();
            let p = parse_internal_key(key)
                .ok_or_else(|| Error::corruption("memtable", 0, "malformed internal key"))?;
            let new_user_key =
                current.is_none() || ucmp.compare(&prev_user_key, p.user_key).is_ne();
            if new_user_key {
                let size = current.as_ref().map_or(0, |c| c.1.estimated_file_size());
                let prev = current.as_ref().map(|_| prev_user_key.as_slice());
                if cutter.should_cut(prev, p.user_key, size, None) {
                    let (number, mut b, stats) = current.take().expect("an output is open");
                    let props = b.finish()?;
                    b.sync()?;
                    finished.push((number, b, stats, props));
                }
                prev_user_key.clear();
                prev_user_key.extend_from_slice(p.user_key);
            }
            if current.is_none() {
                let number = self.new_output_number();
                numbers.push(number);
                let path = table_file_name(&self.dir, number);
                let file = self.fs.create(&path)?;
                let b =
                    TableBuilder::new(self.opts.table_options(), file, path.display().to_string())?;
                current = Some((number, b, TableStats::default()));
            }
            let (_, b, stats) = current.as_mut().expect("an output is open");
            stats.observe(key)?;
            b.add(key, it.value())?;
            it.next();
        }
        it.status()?;
        if let Some((number, mut b, stats)) = current.take() {
            let props = b.finish()?;
            b.sync()?;
            finished.push((number, b, stats, props));
        }
        if finished.is_empty() {
            return Ok(Vec::new());
        }
        // One directory sync makes every new name durable before the
        // manifest refers to them (see write_table).
        self.fs.sync_dir(&self.dir)?;
        let mut files = Vec::with_capacity(finished.len());
        for (number, b, stats, props) in finished {
            self.table_cache.get(number, 0)?;
            files.push(NewFile {
                number,
                file_size: b.file_size(),
                smallest: InternalKey::from_encoded(props.smallest_key),
                largest: InternalKey::from_encoded(props.largest_key),
                smallest_seqno: stats.smallest_seqno,
                largest_seqno: stats.largest_seqno,
            });
        }
        Ok(files)
    }

    /// Writes the entries of `it` (positioned at the first) to table
    /// `number`, synced, and checks that it opens. None if `it` was empty
    /// (no file is left behind).
    pub(crate) fn write_table(
        &self,
        it: &mut dyn InternalIterator,
        number: u64,
    ) -> Result<Option<NewFile>> {
        let path = table_file_name(&self.dir, number);
        let result = (|| {
            let file = self.fs.create(&path)?;
            let mut b =
                TableBuilder::new(self.opts.table_options(), file, path.display().to_string())?;
            let mut meta = TableStats::default();
            while it.valid() {
                meta.observe(it.key())?;
                b.add(it.key(), it.value())?;
                it.next();
            }
            it.status()?;
            let props = b.finish()?;
            b.sync()?;
            if props.num_entries == 0 {
                return Ok(None);
            }
            // The manifest may name the table only once its directory entry
            // is durable too, or a power loss leaves a dangling reference.
            self.fs.sync_dir(&self.dir)?;
            let file_size = b.file_size();
            // Open it through the cache: a table that cannot be read back is
            // never recorded in the manifest.
            self.table_cache.get(number, 0)?;
            Ok(Some(NewFile {
                number,
                file_size,
                smallest: InternalKey::from_encoded(props.smallest_key),
                largest: InternalKey::from_encoded(props.largest_key),
                smallest_seqno: meta.smallest_seqno,
                largest_seqno: meta.largest_seqno,
            }))
        })();
        if !matches!(result, Ok(Some(_))) {
            self.table_cache.evict(number);
            let _ = self.fs.remove(&path);
        }
        result
    }
}

/// Sequence range of the entries written to a table.
#[derive(Debug)]
pub(crate) struct TableStats {
    pub(crate) smallest_seqno: u64,
    pub(crate) largest_seqno: u64,
}

impl Default for TableStats {
    fn default() -> Self {
        TableStats {
            smallest_seqno: u64::MAX,
            largest_seqno: 0,
        }
    }
}

impl TableStats {
    pub(crate) fn observe(&mut self, ikey: &[u8]) -> Result<()> {
        let p = parse_internal_key(ikey).ok_or_else(|| {
            Error::corruption("memtable or compaction input", 0, "malformed internal key")
        })?;
        self.smallest_seqno = self.smallest_seqno.min(p.sequence);
        self.largest_seqno = self.largest_seqno.max(p.sequence);
        Ok(())
    }
}
