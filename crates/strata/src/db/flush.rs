//! Background threads, memtable flush, and writing a level-0 table.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, InternalKey};
use crate::sst::TableBuilder;
use crate::version::{NewFile, VersionEdit};

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

    /// Writes the oldest immutable memtable to an L0 table and records it.
    fn flush_oldest(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        let Some(imm) = st.imm.front() else {
            return Ok(());
        };
        let mem = imm.mem.clone();
        let number = st.versions.new_file_number();
        st.pending_outputs.insert(number);
        let start = Instant::now();
        let built = MutexGuard::unlocked(st, || {
            let mut it = mem.iter();
            it.seek_to_first();
            self.write_table(&mut it, number)
        });
        st.pending_outputs.remove(&number);
        let file = built?;
        let mut edit = VersionEdit::new();
        if let Some(f) = &file {
            edit.add_new_file(0, f.clone());
            let s = &mut st.stats[0];
            s.bytes_written += f.file_size;
            s.micros += start.elapsed().as_micros() as u64;
            s.count += 1;
        }
        // Writes in logs before the next memtable's log are now in tables.
        let next_log = st.imm.get(1).map_or(st.log_number, |m| m.log_number);
        edit.set_log_number(next_log);
        Self::remember_current(st);
        st.versions.log_and_apply(&mut edit)?;
        st.imm.pop_front();
        self.delete_obsolete_files(st);
        Ok(())
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
