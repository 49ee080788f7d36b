//! The write path: group commit, making room in the memtable, and the
//! memtable switch.
//!
//! Writers queue up; the one at the front (the leader) takes the batches of
//! the writers behind it, writes them to the log as one record, syncs once
//! if any of them asked, inserts them into the memtable and wakes them. Only
//! the leader touches the log and inserts into the memtable, so the
//! memtable's single-writer contract holds.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::wal::LogWriter;

use super::filename::log_file_name;
use super::inner::{DbInner, DbState, ImmMemTable, Writer, WriterSlot};
use super::write_batch::{BatchRecord, WriteBatch};

/// How long a waiting writer watches for its turn or its result before it
/// sleeps.
const WRITER_SPIN: Duration = Duration::from_micros(50);

/// Returns once `counter` differs from `seen`, or after [`WRITER_SPIN`]:
/// a short busy wait, then yields to other threads (the leader may need
/// this core).
fn await_change(counter: &AtomicU32, seen: u32) {
    for _ in 0..64 {
        if counter.load(Ordering::Acquire) != seen {
            return;
        }
        std::hint::spin_loop();
    }
    let start = std::time::Instant::now();
    while start.elapsed() < WRITER_SPIN {
        if counter.load(Ordering::Acquire) != seen {
            return;
        }
        std::thread::yield_now();
    }
}

/// Largest group a leader builds, in bytes of batch encoding.
const GROUP_BYTES_MAX: usize = 1 << 20;

impl DbInner {
    /// Applies `batch` (None: only make room, forcing a memtable switch).
    pub(crate) fn write(
        &self,
        batch: Option<WriteBatch>,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        if self.read_only {
            return Err(Error::NotSupported(format!(
                "{} is open read-only: writes, flushes and compactions are refused",
                self.dir.display()
            )));
        }
        if let Some(b) = &batch {
            b.validate()?;
            if b.is_empty() {
                return Ok(());
            }
        }
        let force = batch.is_none();
        let w = Arc::new(Writer {
            slot: Mutex::new(WriterSlot {
                batch,
                done: false,
                result: Ok(()),
            }),
            sync,
            disable_wal,
            cv: Condvar::new(),
            wakeups: AtomicU32::new(0),
        });
        let mut st = self.state.lock();
        st.writers.push_back(w.clone());
        loop {
            {
                let slot = w.slot.lock();
                if slot.done {
                    return slot.result.clone();
                }
            }
            if st.writers.front().is_some_and(|f| Arc::ptr_eq(f, &w)) {
                break;
            }
            // A group is usually done in microseconds, less than a sleep
            // and a wake-up cost: watch for the change without the lock
            // first (RocksDB's writers spin and yield the same way), and
            // sleep only if it does not come.
            let seen = w.wakeups.load(Ordering::Acquire);
            MutexGuard::unlocked(&mut st, || await_change(&w.wakeups, seen));
            // Changes are made under the lock, so one not seen now is
            // followed by a notify that the wait below receives.
            if w.wakeups.load(Ordering::Acquire) == seen {
                w.cv.wait(&mut st);
            }
        }
        // This writer leads.
        let mut result = self.make_room_for_write(&mut st, force);
        let mut last = 0;
        if result.is_ok() && !force {
            let (group, n) = Self::build_group(&st, &w);
            last = n;
            result = self.write_group(&mut st, group, sync, disable_wal);
        }
        for _ in 0..=last {
            let Some(done) = st.writers.pop_front() else {
                break;
            };
            if !Arc::ptr_eq(&done, &w) {
                let mut slot = done.slot.lock();
                slot.done = true;
                slot.result = result.clone();
                done.wakeups.fetch_add(1, Ordering::Release);
                done.cv.notify_one();
            }
        }
        if let Some(next) = st.writers.front() {
            next.wakeups.fetch_add(1, Ordering::Release);
            next.cv.notify_one();
        }
        result
    }

    /// Joins the leader's batch with those of compatible writers behind it.
    /// Returns the group and the queue index of its last writer.
    fn build_group(st: &DbState, leader: &Arc<Writer>) -> (WriteBatch, usize) {
        let mut group = leader.slot.lock().batch.take().unwrap_or_default();
        let first = group.size_in_bytes();
        // A small first batch does not wait for a big group (as LevelDB).
        let max = if first <= 128 << 10 {
            first + (128 << 10)
        } else {
            GROUP_BYTES_MAX
        };
        let mut last = 0;
        for (i, w) in st.writers.iter().enumerate().skip(1) {
            if (w.sync && !leader.sync) || w.disable_wal != leader.disable_wal {
                break;
            }
            let slot = w.slot.lock();
            let Some(b) = slot.batch.as_ref() else { break };
            if group.size_in_bytes() + b.size_in_bytes() > max {
                break;
            }
            group.append(b);
            last = i;
        }
        (group, last)
    }

    /// Logs and applies a group, with the lock released during the I/O.
    fn write_group(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        mut group: WriteBatch,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        let first_seq = st.versions.last_sequence() + 1;
        group.set_sequence(first_seq);
        let mem = st.mem.clone();
        let mut log = if disable_wal { None } else { st.log.take() };
        let io = MutexGuard::unlocked(st, || -> Result<()> {
            if let Some(log) = log.as_mut() {
                log.add_record(group.data())?;
                if sync {
                    log.sync()?;
                } else {
                    // Hand the record to the OS so a process crash keeps it.
                    log.flush()?;
                }
            }
            insert_into(&mem, &group, first_seq);
            Ok(())
        });
        if !disable_wal {
            st.log = log;
        }
        match io {
            Ok(()) => {
                st.versions
                    .set_last_sequence(first_seq + group.len() as u64 - 1);
                self.publish_sequence(st);
                st.user_bytes += group.size_in_bytes() as u64;
                if disable_wal {
                    st.unpersisted_data = true;
                } else {
                    st.wal_bytes += group.size_in_bytes() as u64;
                }
                Ok(())
            }
            Err(e) => {
                // The log may hold part of the record; no later write may
                // follow it, so writes stop (RocksDB's background error).
                self.set_log_error(st, e.clone());
                Err(e)
            }
        }
    }

    /// Waits until the memtable has room, switching it when full.
    fn make_room_for_write(&self, st: &mut MutexGuard<'_, DbState>, mut force: bool) -> Result<()> {
        let mut allow_delay = !force;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            // Stalls count level-0 files stacked on one key, not files: a
            // flush cut into one file per stream adds depth one.
            let l0 = st.versions.current().level0_depth();
            let o = &self.opts;
            if allow_delay && l0 >= o.level0_slowdown_writes_trigger {
                // Give compaction some of this writer's time, once.
                MutexGuard::unlocked(st, || std::thread::sleep(Duration::from_millis(1)));
                allow_delay = false;
            } else if st.mem.is_empty()
                || (!force && st.mem.approximate_memory_usage() < o.write_buffer_size)
            {
                // Nothing to flush, or room left. An empty memtable is
                // never switched: it may already account for more than a
                // tiny buffer, and switching it again and again would
                // make a log and a manifest edit per attempt and never
                // write.
                return Ok(());
            } else if st.imm.len() + 1 >= o.max_write_buffer_number
                || l0 >= o.level0_stop_writes_trigger
            {
                self.bg_work.notify_all();
                self.bg_done.wait_for(st, Duration::from_millis(100));
            } else if let Err(e) = self.switch_memtable(st) {
                // A half-made switch (new log not durable, old log not
                // synced) leaves the logs in an unknown state: stop writes,
                // as RocksDB does.
                self.set_log_error(st, e.clone());
                return Err(e);
            } else {
                force = false;
            }
        }
    }

    /// Starts a new log and memtable; the old memtable waits for a flush.
    fn switch_memtable(&self, st: &mut DbState) -> Result<()> {
        let number = st.versions.new_file_number();
        let file = self.fs.create(&log_file_name(&self.dir, number))?;
        self.fs.sync_dir(&self.dir)?;
        if let Some(old) = st.log.as_mut() {
            // Sync, not just flush: a synced write to the new log must not
            // survive a power loss that drops earlier writes of the old one.
            old.sync()?;
        }
        st.log = Some(LogWriter::new(file));
        let old_mem = std::mem::replace(&mut st.mem, Arc::new(MemTable::new(self.icmp.clone())));
        let old_log = std::mem::replace(&mut st.log_number, number);
        st.imm.push_back(ImmMemTable {
            mem: old_mem,
            log_number: old_log,
        });
        self.publish_read_view(st);
        self.bg_work.notify_all();
        Ok(())
    }
}

impl DbInner {
    /// The check a batch holding range deletions must pass before it is
    /// written: no range ends before it starts.
    pub(crate) fn check_range_deletions(&self, batch: &WriteBatch) -> Result<()> {
        for r in batch.iter() {
            if let Ok(BatchRecord::DeleteRange(from, to)) = r {
                if self.user_cmp.compare(from, to) == std::cmp::Ordering::Greater {
                    return Err(Error::invalid_argument(format!(
                        "delete_range: the end key \"{}\" comes before the start key \"{}\"",
                        to.escape_ascii(),
                        from.escape_ascii()
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Inserts a batch's records with sequence numbers from `first_seq`.
pub(crate) fn insert_into(mem: &MemTable, batch: &WriteBatch, first_seq: u64) {
    let mut writer = mem.writer();
    for (i, record) in batch.iter().enumerate() {
        let seq = first_seq + i as u64;
        match record {
            Ok(BatchRecord::Put(k, v)) => writer.add(seq, crate::key::ValueKind::Value, k, v),
            Ok(BatchRecord::Delete(k)) => writer.add(seq, crate::key::ValueKind::Deletion, k, &[]),
            Ok(BatchRecord::Merge(k, v)) => writer.add(seq, crate::key::ValueKind::Merge, k, v),
            Ok(BatchRecord::DeleteRange(from, to)) => writer.add_range_deletion(seq, from, to),
            // Batches are validated when built or decoded from a log.
            Err(what) => unreachable!("validated batch is malformed: {what}"),
        }
    }
}
