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
use crate::memtable::{MemTable, MemTableWriter};
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
    /// Applies `batch`.
    pub(crate) fn write(&self, batch: WriteBatch, sync: bool, disable_wal: bool) -> Result<()> {
        self.write_or_switch(Some(batch), sync, disable_wal)
    }

    /// Applies `batch` (None: only make room, forcing a switch of this
    /// family's memtable).
    pub(crate) fn write_or_switch(
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
        let mut result = self.make_room_for_write(&mut st, force.then_some(self.id));
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
        let mems = Memtables::of(st, group.has_cf());
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
            insert_into(|cf| mems.get(cf), &group, first_seq);
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
                    if let Some(last) = st.live_logs.back_mut() {
                        last.1 += group.size_in_bytes() as u64;
                    }
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

    /// Waits until every family's memtable has room, switching those that
    /// are full (and `force`'s, if it holds data).
    fn make_room_for_write(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        mut force: Option<u32>,
    ) -> Result<()> {
        let mut allow_delay = force.is_none();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            // Stalls count level-0 files stacked on one key, not files: a
            // flush cut into one file per stream adds depth one.
            let mut slow = false;
            let mut full = Vec::new();
            let mut stop = false;
            for (&id, cf) in &st.cfs {
                let o = &cf.handle.opts;
                // Level 0 stalls wait for compactions; with automatic
                // compactions off none will come, and the writes would
                // wait for good (RocksDB applies the level-0 triggers only
                // with them on too).
                let l0 = if o.disable_auto_compactions {
                    0
                } else {
                    st.versions.level0_depth(id)
                };
                slow |= l0 >= o.level0_slowdown_writes_trigger;
                // An empty memtable is never switched: it may already
                // account for more than a tiny buffer, and switching it
                // again and again would make a log and a manifest edit per
                // attempt and never write.
                let wants = !cf.mem.is_empty()
                    && (force == Some(id)
                        || cf.mem.approximate_memory_usage() >= o.write_buffer_size);
                if wants {
                    if cf.imm.len() + 1 >= o.max_write_buffer_number
                        || l0 >= o.level0_stop_writes_trigger
                    {
                        stop = true;
                    }
                    full.push(id);
                }
            }
            // Logs kept alive by families written rarely: past the total,
            // those holding writes in the oldest log switch too, so that
            // their flush lets it go (RocksDB's max_total_wal_size).
            if !full.is_empty() || force.is_some() {
                for id in self.families_pinning_old_logs(st) {
                    if !full.contains(&id) {
                        full.push(id);
                    }
                }
            }
            if allow_delay && slow {
                // Give compaction some of this writer's time, once.
                MutexGuard::unlocked(st, || std::thread::sleep(Duration::from_millis(1)));
                allow_delay = false;
            } else if full.is_empty() {
                return Ok(());
            } else if stop {
                self.bg_work.notify_all();
                self.bg_done.wait_for(st, Duration::from_millis(100));
            } else if let Err(e) = self.switch_memtables(st, &full) {
                // A half-made switch (new log not durable, old log not
                // synced) leaves the logs in an unknown state: stop writes,
                // as RocksDB does.
                self.set_log_error(st, e.clone());
                return Err(e);
            } else {
                force = None;
            }
        }
    }

    /// Families whose memtables hold writes in the oldest live log, when
    /// the live logs exceed `max_total_wal_size` (0: four times the sum of
    /// every family's memtable budget, as RocksDB).
    fn families_pinning_old_logs(&self, st: &DbState) -> Vec<u32> {
        let total: u64 = st.live_logs.iter().map(|&(_, bytes)| bytes).sum();
        let limit = match self.db_opts.max_total_wal_size {
            0 => st
                .cfs
                .values()
                .map(|c| {
                    let o = &c.handle.opts;
                    (o.write_buffer_size * o.max_write_buffer_number) as u64
                })
                .sum::<u64>()
                .saturating_mul(4),
            n => n,
        };
        let Some(&(oldest, _)) = st.live_logs.front() else {
            return Vec::new();
        };
        if total <= limit || st.cfs.len() < 2 {
            return Vec::new();
        }
        st.cfs
            .iter()
            .filter(|(_, c)| !c.mem.is_empty() && c.mem_log_number <= oldest)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Starts a new log and new memtables for the families `ids`; their
    /// old memtables wait for a flush. Families with empty memtables hold
    /// nothing in the old logs: they move to the new one too.
    pub(crate) fn switch_memtables(&self, st: &mut DbState, ids: &[u32]) -> Result<()> {
        let number = st.versions.new_file_number();
        let file = self.fs.create(&log_file_name(&self.dir, number))?;
        self.fs.sync_dir(&self.dir)?;
        if let Some(old) = st.log.as_mut() {
            // Sync, not just flush: a synced write to the new log must not
            // survive a power loss that drops earlier writes of the old one.
            old.sync()?;
        }
        st.log = Some(LogWriter::new(file));
        st.log_number = number;
        st.live_logs.push_back((number, 0));
        for (&id, cf) in st.cfs.iter_mut() {
            if ids.contains(&id) {
                let fresh = Arc::new(MemTable::new(cf.handle.icmp.clone()));
                let old_mem = std::mem::replace(&mut cf.mem, fresh);
                let old_log = std::mem::replace(&mut cf.mem_log_number, number);
                cf.imm.push_back(ImmMemTable {
                    mem: old_mem,
                    log_number: old_log,
                });
            } else if cf.mem.is_empty() {
                cf.mem_log_number = number;
            }
        }
        for &id in ids {
            let handle = st.cf(id).handle.clone();
            handle.publish_read_view(st);
        }
        self.bg_work.notify_all();
        Ok(())
    }
}

/// The memtables a write group inserts into, by column family.
enum Memtables {
    /// The default family's alone (a group without other families).
    Default(Arc<MemTable>),
    /// Every live family's.
    All(Vec<(u32, Arc<MemTable>)>),
}

impl Memtables {
    fn of(st: &DbState, any_cf: bool) -> Memtables {
        if !any_cf {
            return Memtables::Default(st.cf(0).mem.clone());
        }
        Memtables::All(st.cfs.iter().map(|(&id, c)| (id, c.mem.clone())).collect())
    }

    fn get(&self, cf: u32) -> Option<&MemTable> {
        match self {
            Memtables::Default(m) => (cf == 0).then_some(&**m),
            Memtables::All(all) => all.iter().find(|(id, _)| *id == cf).map(|(_, m)| &**m),
        }
    }
}

impl DbInner {
    /// The checks a batch must pass before it is written: every column
    /// family it names is live, merges go to families with a merge
    /// operator, and no range ends before it starts. `self` is the
    /// default family.
    pub(crate) fn check_batch(&self, batch: &WriteBatch) -> Result<()> {
        if !batch.has_cf() {
            return Self::check_records(self, batch.iter().map(|r| r.map(|r| (0, r))), |_| {
                Ok(self)
            });
        }
        let handles: Vec<(u32, Arc<DbInner>)> = {
            let st = self.state.lock();
            st.cfs
                .iter()
                .map(|(&id, c)| (id, c.handle.clone()))
                .collect()
        };
        let find = |cf: u32| -> Result<&DbInner> {
            handles
                .iter()
                .find(|(id, _)| *id == cf)
                .map(|(_, h)| &**h)
                .ok_or_else(|| {
                    Error::invalid_argument(format!(
                        "write batch names column family {cf}, which is not in the database (dropped?)"
                    ))
                })
        };
        Self::check_records(self, batch.iter_cf(), find)
    }

    fn check_records<'b, 'h>(
        &self,
        records: impl Iterator<Item = std::result::Result<(u32, BatchRecord<'b>), String>>,
        find: impl Fn(u32) -> Result<&'h DbInner>,
    ) -> Result<()> {
        for r in records {
            let Ok((cf, record)) = r else { continue };
            match record {
                BatchRecord::Merge(..) => {
                    let h = find(cf)?;
                    if h.opts.merge_operator.is_none() {
                        // As RocksDB: operands nobody can resolve are
                        // refused up front.
                        return Err(Error::NotSupported(format!(
                            "merge needs a merge operator: Options::set_merge_operator at open{}",
                            if cf == 0 {
                                String::new()
                            } else {
                                format!(" (column family {:?})", h.name)
                            }
                        )));
                    }
                }
                BatchRecord::DeleteRange(from, to) => {
                    let h = find(cf)?;
                    if h.user_cmp.compare(from, to) == std::cmp::Ordering::Greater {
                        return Err(Error::invalid_argument(format!(
                            "delete_range: the end key \"{}\" comes before the start key \"{}\"",
                            to.escape_ascii(),
                            from.escape_ascii()
                        )));
                    }
                }
                BatchRecord::Put(..) | BatchRecord::Delete(..) => {
                    find(cf)?;
                }
            }
        }
        Ok(())
    }
}

/// Inserts a batch's records with sequence numbers from `first_seq`, each
/// into the memtable `mem_of` gives for its column family (none: the
/// family was dropped, and its records are skipped).
pub(crate) fn insert_into<'m>(
    mem_of: impl Fn(u32) -> Option<&'m MemTable>,
    batch: &WriteBatch,
    first_seq: u64,
) {
    // One writer per memtable. Most batches touch one family: its writer
    // needs no allocation.
    let mut first: Option<(u32, MemTableWriter<'m>)> = None;
    let mut others: Vec<(u32, MemTableWriter<'m>)> = Vec::new();
    for (i, record) in batch.iter_cf().enumerate() {
        let seq = first_seq + i as u64;
        // Batches are validated when built or decoded from a log.
        let (cf, record) = match record {
            Ok(r) => r,
            Err(what) => unreachable!("validated batch is malformed: {what}"),
        };
        let writer = match &mut first {
            Some((id, w)) if *id == cf => w,
            None => {
                let Some(mem) = mem_of(cf) else { continue };
                &mut first.insert((cf, mem.writer())).1
            }
            Some(_) => match others.iter().position(|(id, _)| *id == cf) {
                Some(at) => &mut others[at].1,
                None => {
                    let Some(mem) = mem_of(cf) else { continue };
                    others.push((cf, mem.writer()));
                    &mut others.last_mut().expect("just pushed").1
                }
            },
        };
        match record {
            BatchRecord::Put(k, v) => writer.add(seq, crate::key::ValueKind::Value, k, v),
            BatchRecord::Delete(k) => writer.add(seq, crate::key::ValueKind::Deletion, k, &[]),
            BatchRecord::Merge(k, v) => writer.add(seq, crate::key::ValueKind::Merge, k, v),
            BatchRecord::DeleteRange(from, to) => writer.add_range_deletion(seq, from, to),
        }
    }
}
