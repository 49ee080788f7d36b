//! The write path: group commit, making room in the memtable, and the
//! memtable switch.
//!
//! Writers queue up; the one at the front (the leader) takes the batches of
//! the writers behind it, writes them to the log as one record, syncs once
//! if any of them asked, inserts them into the memtable and wakes them. Only
//! the leader touches the log. With `allow_concurrent_memtable_write` (the
//! default) a group of several writers is inserted by all of them at once,
//! each its own batch at its own sequence numbers, through the memtable's
//! concurrent writers; the leader waits for the last, then makes the
//! group's writes visible together, as before. With
//! `enable_pipelined_write`, a leader with writers waiting behind its group
//! (or, with up to twice as many writers in flight as cores, with another
//! on its way: `hands_on_early`) hands the log to the next leader once its
//! record is written, and inserts while the next group logs; groups still
//! become visible one whole group at a time, in sequence order (see
//! `write_group`).
//!
//! A write allocates nothing of its own once its thread has written
//! before: each thread keeps its writer (the queue entry) and the batch
//! buffer of its last write for the next one ([`spare_batch`]), and a
//! parallel group's shared state and follower list are kept in the
//! database state for the next group ([`WriteScratch`]). What allocates
//! is the memtable's arena (one 4 KiB block per few dozen entries) and
//! the user's own batches.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::key::SequenceNumber;
use crate::memtable::{MemTable, MemTableWriter};
use crate::wal::{LogWriter, PredecessorLog};

use super::filename::log_file_name;
use super::inner::{DbInner, DbState, ImmMemTable, Writer, WriterSlot};
use super::write_batch::{BatchRecord, WriteBatch};

/// How long a waiting writer watches for its turn or its result before it
/// sleeps.
const WRITER_SPIN: Duration = Duration::from_micros(50);

/// Busy-wait rounds a waiting writer makes before it yields, when there is
/// a core to spare for them (see [`await_change`]).
const WRITER_SPIN_ROUNDS: u32 = 64;

/// The cores this process may run on (1 if unknown).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Returns once `counter` differs from `seen`, or after [`WRITER_SPIN`]:
/// a short busy wait, then yields to other threads (the leader may need
/// this core).
///
/// With `queued` writers (this one included) at least as many as the
/// cores, the change needs a thread that may not be running, and a busy
/// wait would only keep it off a core: the writer yields at once. On 2
/// cores, W6's fill with 16 writers: 38-39 micros/op instead of 49-54, a
/// quarter less CPU; with 4 and 8 writers, the median run 15-20% faster
/// (docs/benchmarks.md, stop 69).
fn await_change(counter: &AtomicU32, seen: u32, queued: usize) {
    let rounds = if queued >= cores() {
        0
    } else {
        WRITER_SPIN_ROUNDS
    };
    for _ in 0..rounds {
        if counter.load(Ordering::Acquire) != seen {
            return;
        }
        std::hint::spin_loop();
    }
    let start = Instant::now();
    while start.elapsed() < WRITER_SPIN {
        if counter.load(Ordering::Acquire) != seen {
            return;
        }
        std::thread::yield_now();
    }
}

/// Busy-wait rounds a group makes for the group before it to publish,
/// before it sleeps (see `write_group`).
const PUBLISH_SPIN_ROUNDS: u32 = 200;

/// Returns once `published` has reached `sequence`, or after
/// [`PUBLISH_SPIN_ROUNDS`] rounds.
fn await_published(published: &AtomicU64, sequence: u64) {
    for _ in 0..PUBLISH_SPIN_ROUNDS {
        if published.load(Ordering::Acquire) >= sequence {
            return;
        }
        std::hint::spin_loop();
    }
}

/// Returns once `pending` is zero, or after [`WRITER_SPIN`], as
/// [`await_change`].
fn await_zero(pending: &AtomicUsize) {
    let start = Instant::now();
    while pending.load(Ordering::Acquire) != 0 && start.elapsed() < WRITER_SPIN {
        std::thread::yield_now();
    }
}

/// Most records of a batch whose memtable path a waiting writer brings
/// into the cache (see `DbInner::warm_memtable`).
const WARM_RECORDS: usize = 16;

/// A thread inside a write, counted in `writers_in_flight` while it lives
/// (a panicking write included); holds the count its entry made.
struct InFlight<'a>(usize, &'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize) -> InFlight<'a> {
        InFlight(count.fetch_add(1, Ordering::Relaxed) + 1, count)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.1.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Largest group a leader builds, in bytes of batch encoding.
const GROUP_BYTES_MAX: usize = 1 << 20;

/// Largest batch buffer a thread keeps for its next write: a big group's
/// buffer is freed rather than held by an idle thread.
const SPARE_BATCH_BYTES_MAX: usize = 16 << 10;

thread_local! {
    /// This thread's writer from its last write, with the batch buffer of
    /// that write, for its next one. Taken out while in use, so a write
    /// made from inside another (a callback) simply makes its own.
    static SPARE_WRITER: Cell<Option<Arc<Writer>>> = const { Cell::new(None) };
}

/// An empty batch for a one-record write (`put`, `delete`...): the buffer
/// of this thread's last write when there is one, so the write allocates
/// nothing.
pub(crate) fn spare_batch() -> WriteBatch {
    let kept = SPARE_WRITER
        .try_with(|cell| {
            let mut w = cell.take();
            let batch = w
                .as_mut()
                .and_then(Arc::get_mut)
                .and_then(|w| w.slot.get_mut().batch.take());
            cell.set(w);
            batch
        })
        .ok()
        .flatten();
    match kept {
        Some(mut b) => {
            b.clear();
            b
        }
        None => WriteBatch::default(),
    }
}

/// `value` in `kept`'s allocation when nothing else holds it, else in a
/// new one.
fn reuse_or_new<T>(kept: Option<Arc<T>>, value: T) -> Arc<T> {
    if let Some(mut a) = kept {
        if let Some(old) = Arc::get_mut(&mut a) {
            *old = value;
            return a;
        }
    }
    Arc::new(value)
}

/// A writer for one write, in this thread's kept writer when nothing else
/// holds it any more (the last group it was in is over).
fn writer_for(batch: Option<WriteBatch>, sync: bool, disable_wal: bool) -> Arc<Writer> {
    let writer = Writer {
        slot: Mutex::new(WriterSlot {
            batch,
            job: None,
            done: false,
            result: Ok(()),
        }),
        sync,
        disable_wal,
        cv: Condvar::new(),
        wakeups: AtomicU32::new(0),
    };
    reuse_or_new(SPARE_WRITER.try_with(Cell::take).ok().flatten(), writer)
}

/// Keeps `w` (and the batch buffer in its slot, if not too big) for this
/// thread's next write.
fn keep_writer(w: Arc<Writer>) {
    {
        let mut slot = w.slot.lock();
        if slot
            .batch
            .as_ref()
            .is_some_and(|b| b.capacity() > SPARE_BATCH_BYTES_MAX)
        {
            slot.batch = None;
        }
    }
    // Fails only while the thread exits: `w` is then dropped.
    let _ = SPARE_WRITER.try_with(|cell| cell.set(Some(w)));
}

/// What the write path keeps from one group to the next, in the database
/// state: follower lists, lists of finished writers and parallel groups'
/// shared states. Each is a small pool, as pipelined groups overlap.
#[derive(Default)]
pub(crate) struct WriteScratch {
    followers: Vec<Vec<Follower>>,
    finished: Vec<Vec<Arc<Writer>>>,
    groups: Vec<Arc<GroupInsert>>,
}

/// Most pieces of each kind a [`WriteScratch`] keeps: groups in flight at
/// once are at most a few.
const SCRATCH_KEPT: usize = 4;

/// Keeps `piece` in `pool` for a later group, unless the pool is full.
fn keep<T>(pool: &mut Vec<T>, piece: T) {
    if pool.len() < SCRATCH_KEPT {
        pool.push(piece);
    }
}

/// A follower's part of a group inserted in parallel: its own batch, at
/// sequence numbers from `first_seq`, into the group's memtables.
pub(crate) struct InsertJob {
    first_seq: u64,
    group: Arc<GroupInsert>,
}

/// What the writers of a group inserted in parallel share.
struct GroupInsert {
    /// The memtables the group inserts into.
    mems: Memtables,
    /// Followers not done yet.
    pending: AtomicUsize,
    /// Followers that inserted their own batch (the leader inserted the
    /// others').
    helped: AtomicUsize,
    /// Woken (under the database mutex) by the last follower done; None
    /// while the state is kept for the next group.
    leader: Option<Arc<Writer>>,
    /// A follower's insert of its own batch panicked: part of the group is
    /// missing from the memtables, and it must not be published.
    panicked: AtomicBool,
}

/// Counts a follower's part of a parallel insert as done when dropped:
/// under the database mutex (the caller's duty), so the leader cannot miss
/// the last one (see `insert_in_parallel`).
struct CountDown<'a>(&'a GroupInsert);

impl Drop for CountDown<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.panicked.store(true, Ordering::Release);
        }
        if self.0.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(leader) = &self.0.leader {
                leader.wakeups.fetch_add(1, Ordering::Release);
                leader.cv.notify_one();
            }
        }
    }
}

impl Writer {
    /// Hands the writer its result and wakes it (under the database mutex,
    /// as every change a waiting writer watches for).
    fn finish(&self, result: Result<()>) {
        let mut slot = self.slot.lock();
        slot.done = true;
        slot.result = result;
        self.wakeups.fetch_add(1, Ordering::Release);
        self.cv.notify_one();
    }
}

/// How far a leader's group got, kept outside the leader's work so that a
/// panic in it can fail exactly that group.
#[derive(Default)]
struct GroupProgress {
    /// Queue index of the group's last writer (0 until the group is built).
    last: usize,
    /// The group's first sequence number while it counts in
    /// `pending_groups` (logged, not yet published or given up): `None`
    /// before and after, so a panic fails exactly what is still pending.
    first_seq: Option<SequenceNumber>,
}

/// The group whose first sequence number `pending` holds no longer counts
/// as pending (published, or given up after an error).
fn end_pending(st: &mut DbState, pending: &mut Option<SequenceNumber>) {
    debug_assert!(pending.is_some() && st.pending_groups > 0);
    st.pending_groups -= 1;
    *pending = None;
}

/// A writer of the group behind the leader, with the index of its first
/// record in the group.
type Follower = (Arc<Writer>, u64);

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
        let in_flight = InFlight::enter(&self.writers_in_flight);
        if let Some(b) = &batch {
            // More writers than cores and one queued: this writer will
            // most likely wait, maybe behind a thread that is not running.
            // It first walks the memtable to where its keys go. Its insert,
            // its own or the leader's, then finds that path in the cache,
            // and the wait is shorter. On 2 cores, W6's fill with 4 writers:
            // a median 15.4 micros/op instead of 17.5, an eighth less CPU
            // and a third fewer yields. With as many writers as cores the
            // walk only delayed the writer: 5% slower with 2 writers
            // (docs/benchmarks.md, stop 70).
            if in_flight.0 > cores() && self.queued_writers.load(Ordering::Relaxed) > 0 {
                self.warm_memtable(b);
            }
        }
        let force = batch.is_none();
        let w = writer_for(batch, sync, disable_wal);
        let result = self.queue_and_write(&w, force, sync, disable_wal);
        keep_writer(w);
        result
    }

    /// Whether a pipelined leader hands the queue on as soon as its
    /// record is written, even with no writer queued yet, and inserts
    /// beside the next group: with another writer in flight, and no more
    /// than twice as many as cores. The next writer then leads at once
    /// instead of waiting for the insert, as RocksDB's writers leave its
    /// log stage before their memtable stage. On 2 cores, W6's fill with 2
    /// writers: 5.0-5.5 micros/op instead of 7.1-8.1; with 4, 10.4-11.8
    /// instead of 12.6-13.3 (docs/benchmarks.md, stop 71). With more
    /// writers the group before is often not running when a group must
    /// wait for it to publish, and sleeps cost more than the hand-on
    /// saves (16 writers: twice as slow); alone, a writer keeps the
    /// plain insert.
    fn hands_on_early(&self) -> bool {
        let n = self.writers_in_flight.load(Ordering::Relaxed);
        n >= 2 && n <= 2 * cores()
    }

    /// Brings into the cache the memtable nodes where the first
    /// [`WARM_RECORDS`] keys of `batch` go (see [`MemTable::warm`]). Only
    /// batches all in the default family: others are left as they are.
    fn warm_memtable(&self, batch: &WriteBatch) {
        if self.id != 0 || batch.has_cf() {
            return;
        }
        let view = self.read_view.load();
        for record in batch.iter().take(WARM_RECORDS) {
            match record {
                Ok(
                    BatchRecord::Put(key, _)
                    | BatchRecord::Delete(key)
                    | BatchRecord::Merge(key, _),
                ) => view.mem.warm(key),
                Ok(BatchRecord::DeleteRange(..)) | Err(_) => {}
            }
        }
    }

    /// Queues `w` and waits until a leader has written its batch, or
    /// until it leads and writes a group itself.
    fn queue_and_write(
        &self,
        w: &Arc<Writer>,
        force: bool,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        let mut st = self.state.lock();
        st.writers.push_back(w.clone());
        self.queued_writers
            .store(st.writers.len(), Ordering::Relaxed);
        loop {
            let job = {
                let mut slot = w.slot.lock();
                if slot.done {
                    return slot.result.clone();
                }
                slot.job.take().map(|job| (job, slot.batch.take()))
            };
            if let Some((job, batch)) = job {
                // Declared after `st`, so dropped first, with the mutex held,
                // even when the insert panics: the leader is not left waiting.
                let count_down = CountDown(&job.group);
                job.group.helped.fetch_add(1, Ordering::Relaxed);
                // The leader logged the group: insert this writer's part.
                MutexGuard::unlocked(&mut st, || {
                    if let Some(batch) = &batch {
                        insert_into(
                            |cf| job.group.mems.get(cf),
                            batch,
                            job.first_seq,
                            usize::MAX,
                            true,
                        );
                    }
                });
                // The buffer goes back for this thread's next write.
                w.slot.lock().batch = batch;
                drop(count_down);
                continue;
            }
            if st.writers.front().is_some_and(|f| Arc::ptr_eq(f, w)) {
                break;
            }
            // A group is usually done in microseconds, less than a sleep
            // and a wake-up cost: watch for the change without the lock
            // first (RocksDB's writers spin and yield the same way; here
            // the spin only while cores are to spare), and sleep only if
            // it does not come.
            let seen = w.wakeups.load(Ordering::Acquire);
            let queued = st.writers.len();
            MutexGuard::unlocked(&mut st, || await_change(&w.wakeups, seen, queued));
            // Changes are made under the lock, so one not seen now is
            // followed by a notify that the wait below receives.
            if w.wakeups.load(Ordering::Acquire) == seen {
                w.cv.wait(&mut st);
            }
        }
        // This writer leads.
        // The group's writers, taken off the queue: early by a pipelined
        // group (see `write_group`), else here once it is done.
        let mut finished = st.write_scratch.finished.pop().unwrap_or_default();
        // How far the group got: its last writer's queue index, and its
        // first sequence number once it has one.
        let mut progress = GroupProgress::default();
        // A panic while leading (a user comparator's, in the memtable
        // insert) must not leave the group's writers waiting for good:
        // they fail, and writes stop, as after a failed log write.
        let led = panic::catch_unwind(AssertUnwindSafe(|| {
            self.lead(
                &mut st,
                w,
                force,
                sync,
                disable_wal,
                &mut finished,
                &mut progress,
            )
        }));
        let result = match led {
            Ok(result) => result,
            Err(payload) => {
                self.fail_group_after_panic(&mut st, w, &mut finished, &progress);
                drop(st);
                panic::resume_unwind(payload);
            }
        };
        if finished.is_empty() {
            self.take_group_off_queue(&mut st, progress.last, &mut finished);
        }
        for done in finished.drain(..) {
            if !Arc::ptr_eq(&done, w) {
                done.finish(result.clone());
            }
        }
        keep(&mut st.write_scratch.finished, finished);
        result
    }

    /// The leader's part of [`queue_and_write`](Self::queue_and_write):
    /// makes room, then builds, logs and applies the group. Returns the
    /// group's result; records in `progress` how far the group got.
    #[allow(clippy::too_many_arguments)]
    fn lead(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        w: &Arc<Writer>,
        force: bool,
        sync: bool,
        disable_wal: bool,
        finished: &mut Vec<Arc<Writer>>,
        progress: &mut GroupProgress,
    ) -> Result<()> {
        let mut result = self.make_room_for_write(st, force.then_some(self.id));
        if result.is_ok() && !force {
            let parallel = self.db_opts.allow_concurrent_memtable_write;
            let mut followers = st.write_scratch.followers.pop().unwrap_or_default();
            let (mut group, last) = Self::build_group(st, w, parallel, &mut followers);
            progress.last = last;
            result = self.write_group(
                st,
                w,
                &mut group,
                &followers,
                last,
                finished,
                &mut progress.first_seq,
                sync,
                disable_wal,
            );
            followers.clear();
            keep(&mut st.write_scratch.followers, followers);
            // The group's buffer (this writer's batch, grown) is kept.
            w.slot.lock().batch = Some(group);
        }
        result
    }

    /// After the leader `leader` panicked: stops writes (see
    /// [`stop_writes_after_panic`](Self::stop_writes_after_panic)) and fails
    /// the writers of its group, in `finished` (taken off the queue early
    /// by a pipelined group) or still at the front of the queue. Writers
    /// behind the group are not touched: the next leader, woken here or
    /// already leading a pipelined group of its own (whose followers may
    /// hold parts of its parallel insert), meets the stopped writes and
    /// fails its own group.
    fn fail_group_after_panic(
        &self,
        st: &mut DbState,
        leader: &Arc<Writer>,
        finished: &mut Vec<Arc<Writer>>,
        progress: &GroupProgress,
    ) {
        let mut pending = progress.first_seq;
        let e = self.stop_writes_after_panic(st, pending);
        if pending.is_some() {
            // The group counted as logged and not yet published; it never
            // will be.
            end_pending(st, &mut pending);
        }
        if finished.is_empty() {
            self.take_group_off_queue(st, progress.last, finished);
        }
        for waiting in finished.drain(..) {
            if !Arc::ptr_eq(&waiting, leader) {
                // A part handed to it for a parallel insert is not needed.
                waiting.slot.lock().job = None;
                waiting.finish(Err(e.clone()));
            }
        }
    }

    /// Stops writes with [`Error::Aborted`] after a panic while the group
    /// starting at `first_seq` was applied: it may be in the log and partly
    /// in the memtables, under sequence numbers never to be published. The
    /// groups after it that wait to publish fail instead (`write_group`);
    /// those before it publish as usual. Returns the error writes now get.
    fn stop_writes_after_panic(
        &self,
        st: &mut DbState,
        first_seq: Option<SequenceNumber>,
    ) -> Error {
        let e = Error::Aborted(
            "a write panicked while its batch was applied; writes are stopped until the \
             database is reopened"
                .into(),
        );
        self.set_log_error(st, e);
        if let Some(seq) = first_seq {
            st.unpublishable_from = Some(st.unpublishable_from.map_or(seq, |s| s.min(seq)));
        }
        self.group_published.notify_all();
        st.bg_error.clone().expect("just set")
    }

    /// Moves the leader and the writers of its group (the queue's first
    /// `last + 1`) from the queue to `finished`, and wakes the writer now
    /// at the front: the next leader.
    fn take_group_off_queue(&self, st: &mut DbState, last: usize, finished: &mut Vec<Arc<Writer>>) {
        for _ in 0..=last {
            let Some(w) = st.writers.pop_front() else {
                break;
            };
            finished.push(w);
        }
        self.queued_writers
            .store(st.writers.len(), Ordering::Relaxed);
        if let Some(next) = st.writers.front() {
            next.wakeups.fetch_add(1, Ordering::Release);
            next.cv.notify_one();
        }
    }

    /// Joins the leader's batch with those of compatible writers behind it.
    /// Returns the group and the queue index of its last writer; when
    /// `parallel`, fills `followers` (empty) with the writers behind the
    /// leader and the index of their first record in the group.
    fn build_group(
        st: &DbState,
        leader: &Arc<Writer>,
        parallel: bool,
        followers: &mut Vec<Follower>,
    ) -> (WriteBatch, usize) {
        debug_assert!(followers.is_empty());
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
            if parallel {
                followers.push((w.clone(), group.len() as u64));
            }
            group.append(b);
            last = i;
        }
        (group, last)
    }

    /// Logs and applies a group, with the lock released during the I/O and
    /// the inserts. With `followers`, each of them inserts its own batch
    /// while the leader inserts its own. The group is the queue's first
    /// `last + 1` writers.
    ///
    /// With `enable_pipelined_write`, if writers came while the record was
    /// written, or another is on its way (`hands_on_early`), the group
    /// leaves the queue (into `finished`) before its memtable insert, and
    /// the next leader starts while this one inserts.
    /// Groups are given their sequence numbers in queue order and become
    /// visible in that order: a group whose insert ends first waits for
    /// the one before it.
    #[allow(clippy::too_many_arguments)]
    fn write_group(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        leader: &Arc<Writer>,
        group: &mut WriteBatch,
        followers: &[Follower],
        last: usize,
        finished: &mut Vec<Arc<Writer>>,
        first_seq_out: &mut Option<SequenceNumber>,
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        let pending_before = st.pending_groups;
        let base = if pending_before == 0 {
            st.versions.last_sequence()
        } else {
            st.last_allocated
        };
        let first_seq = base + 1;
        let records = group.len() as u64;
        group.set_sequence(first_seq);
        st.pending_groups += 1;
        *first_seq_out = Some(first_seq);
        st.last_allocated = base + records;
        let pipelined = self.db_opts.enable_pipelined_write;
        let mems = Memtables::of(st, group.has_cf());
        let parallel = !followers.is_empty();
        let mut log = if disable_wal { None } else { st.log.take() };
        let mut inserted = false;
        let hand_on = pipelined && self.hands_on_early();
        let io = MutexGuard::unlocked(st, || -> Result<()> {
            if let Some(log) = log.as_mut() {
                log.add_record(group.data())?;
                if sync {
                    // Older logs first: this write must not outlast them.
                    self.sync_closed_logs()?;
                    log.sync()?;
                } else {
                    // Hand the record to the OS so a process crash keeps it.
                    log.flush()?;
                }
            }
            // Pipelined, the insert waits for a look at the queue under
            // the lock, unless no writer came meanwhile (a glance without
            // it: one coming later waits for this group, as unpipelined)
            // and none is expected (`hands_on_early`).
            let alone = || !hand_on && self.queued_writers.load(Ordering::Relaxed) <= last + 1;
            if !parallel && (!pipelined || alone()) {
                let concurrent = pending_before > 0;
                insert_into(|cf| mems.get(cf), group, first_seq, usize::MAX, concurrent);
                inserted = true;
            }
            Ok(())
        });
        if !disable_wal {
            st.log = log;
        }
        if let Err(e) = io {
            // The log may hold part of the record; no later write may
            // follow it, so writes stop (RocksDB's background error). No
            // group came after this one: its numbers are given back.
            end_pending(st, first_seq_out);
            st.last_allocated = base;
            self.group_published.notify_all();
            self.set_log_error(st, e.clone());
            return Err(e);
        }
        st.user_bytes += group.size_in_bytes() as u64;
        if disable_wal {
            st.unpersisted_data = true;
        } else {
            st.wal_bytes += group.size_in_bytes() as u64;
            if let Some(last) = st.live_logs.back_mut() {
                last.1 += group.size_in_bytes() as u64;
            }
        }
        if pipelined && !inserted {
            // Writers that came while the record was written, or that
            // will come during the insert, need not wait for it.
            let early = hand_on || st.writers.len() > last + 1;
            if early {
                st.pipelined_groups += 1;
                self.take_group_off_queue(st, last, finished);
            }
            if !parallel {
                // Another group may insert beside this one: both through
                // the memtables' concurrent writers.
                let concurrent = early || pending_before > 0;
                MutexGuard::unlocked(st, || {
                    insert_into(|cf| mems.get(cf), group, first_seq, usize::MAX, concurrent);
                });
            }
        }
        if parallel {
            let follower_panicked =
                self.insert_in_parallel(st, leader, group, first_seq, mems, followers);
            st.parallel_groups += 1;
            if follower_panicked {
                // Part of a follower's batch is missing: publishing the
                // group would show the rest of it.
                end_pending(st, first_seq_out);
                return Err(self.stop_writes_after_panic(st, Some(first_seq)));
            }
        }
        // Visible in sequence order, each group whole.
        debug_assert!(st.versions.last_sequence() < first_seq);
        let mut watched = false;
        while st.versions.last_sequence() + 1 != first_seq {
            if st.unpublishable_from.is_some_and(|from| from < first_seq) {
                // A group before this one will never publish: applying it
                // panicked (`stop_writes_after_panic`). This group is in
                // the log, but must not become visible after a gap.
                end_pending(st, first_seq_out);
                self.group_published.notify_all();
                return Err(st.bg_error.clone().expect("set with unpublishable_from"));
            }
            if !watched {
                // The group before is most likely inserting on another
                // core and about to publish: a short busy wait for it
                // first (as RocksDB's writers wait on each other), then
                // sleep. Without it, groups handed on early slept and
                // woke twice per write.
                watched = true;
                let published = &self.visible_sequence;
                MutexGuard::unlocked(st, || await_published(published, first_seq - 1));
                continue;
            }
            self.group_published.wait(st);
        }
        st.versions.set_last_sequence(base + records);
        self.publish_sequence(st);
        end_pending(st, first_seq_out);
        self.group_published.notify_all();
        st.write_groups += 1;
        st.group_writers += last as u64 + 1;
        Ok(())
    }

    /// Hands each follower its part of the logged `group`, inserts the
    /// leader's own part (its records come first), then the part of every
    /// follower that has not taken its own, and returns when every part is
    /// in. The sequence numbers are published by the caller, after this:
    /// no reader sees part of a group.
    ///
    /// A follower that is watching (spinning) takes its part and inserts it
    /// alongside the leader; one asleep is not woken for it (a wake-up costs
    /// more than the insert), and the leader inserts its part instead. The
    /// follower's slot decides who takes a part.
    fn insert_in_parallel(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        leader: &Arc<Writer>,
        group: &WriteBatch,
        first_seq: u64,
        mems: Memtables,
        followers: &[Follower],
    ) -> bool {
        let leader_records = followers[0].1 as usize;
        let fresh = GroupInsert {
            mems,
            pending: AtomicUsize::new(followers.len()),
            helped: AtomicUsize::new(0),
            leader: Some(leader.clone()),
            panicked: AtomicBool::new(false),
        };
        let shared = reuse_or_new(st.write_scratch.groups.pop(), fresh);
        // Under the database mutex, as every change a waiting writer
        // watches for (see `write_or_switch`).
        for (w, offset) in followers {
            w.slot.lock().job = Some(InsertJob {
                first_seq: first_seq + offset,
                group: shared.clone(),
            });
            w.wakeups.fetch_add(1, Ordering::Release);
        }
        MutexGuard::unlocked(st, || {
            let mut writers = MemWriters::new(true);
            writers.insert(|cf| shared.mems.get(cf), group, first_seq, leader_records);
            // The last followers are the least likely to be watching.
            for (w, _) in followers.iter().rev() {
                let taken = {
                    let mut slot = w.slot.lock();
                    slot.job.take().map(|job| (job, slot.batch.take()))
                };
                if let Some((job, batch)) = taken {
                    if let Some(batch) = &batch {
                        writers.insert(|cf| shared.mems.get(cf), batch, job.first_seq, usize::MAX);
                    }
                    w.slot.lock().batch = batch;
                    shared.pending.fetch_sub(1, Ordering::AcqRel);
                }
            }
            drop(writers);
            await_zero(&shared.pending);
        });
        // The last follower counts down and wakes the leader under the
        // mutex: a count seen non-zero here is followed by that wake-up.
        while shared.pending.load(Ordering::Acquire) != 0 {
            leader.cv.wait(st);
        }
        st.parallel_batches += shared.helped.load(Ordering::Relaxed) as u64;
        let panicked = shared.panicked.load(Ordering::Acquire);
        // Every follower dropped its handle under the mutex (see
        // `write_or_switch`): the state is kept for the next group, its
        // memtables and leader released.
        let mut shared = shared;
        if let Some(state) = Arc::get_mut(&mut shared) {
            state.mems = Memtables::All(Vec::new());
            state.leader = None;
            keep(&mut st.write_scratch.groups, shared);
        }
        panicked
    }

    /// Waits until every family's memtable has room, switching those that
    /// are full (and `force`'s, if it holds data).
    fn make_room_for_write(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        mut force: Option<u32>,
    ) -> Result<()> {
        let mut allow_delay = force.is_none();
        let mut stopped = false;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            // Stalls count level-0 files stacked on one key, not files: a
            // flush cut into one file per stream adds depth one.
            let mut slow = false;
            let mut full = Vec::new();
            let (mut memtable_stop, mut level0_stop) = (false, false);
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
                    memtable_stop |= cf.imm.len() + 1 >= o.max_write_buffer_number;
                    level0_stop |= l0 >= o.level0_stop_writes_trigger;
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
                let start = Instant::now();
                MutexGuard::unlocked(st, || std::thread::sleep(Duration::from_millis(1)));
                st.stalls.delays += 1;
                st.stalls.micros += start.elapsed().as_micros() as u64;
                allow_delay = false;
            } else if full.is_empty() {
                return Ok(());
            } else if memtable_stop || level0_stop {
                if !stopped {
                    // One stop per write, by its first cause.
                    stopped = true;
                    if memtable_stop {
                        st.stalls.memtable_stops += 1;
                    } else {
                        st.stalls.level0_stops += 1;
                    }
                }
                let start = Instant::now();
                self.bg_work.notify_all();
                self.bg_done.wait_for(st, Duration::from_millis(100));
                st.stalls.micros += start.elapsed().as_micros() as u64;
            } else if st.pending_groups > 0 {
                // A pipelined group is still inserting into the memtables
                // that would be switched (and logged in the old log).
                self.group_published.wait(st);
            } else if let Err(e) = self.switch_memtables(st, &full) {
                // A half-made switch (new log not durable, old log not
                // flushed) leaves the logs in an unknown state: stop writes,
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
        // The directory is synced later, with the closed logs.
        let file = self.fs.create(&log_file_name(&self.dir, number))?;
        let mut log = LogWriter::new(file);
        let old_number = st.log_number;
        if let Some(old) = st.log.as_mut() {
            // Not synced here (see `closed_logs.rs`): the new log records
            // how long the old one is, for recovery to check.
            old.flush()?;
            log.add_predecessor(PredecessorLog {
                number: old_number,
                size: old.file_size(),
            })?;
        }
        let closed = st.log.replace(log).map(|old| (old_number, old));
        self.closed_logs.switched(closed);
        st.log_number = number;
        st.live_logs.push_back((number, 0));
        for (&id, cf) in st.cfs.iter_mut() {
            if ids.contains(&id) {
                let old_mem = std::mem::replace(&mut cf.mem, cf.handle.new_memtable());
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

/// Inserts the first `limit` of a batch's records with sequence numbers
/// from `first_seq`, each into the memtable `mem_of` gives for its column
/// family (none: the family was dropped, and its records are skipped);
/// `concurrent`: through the memtables' concurrent writers, beside other
/// writers of the same group.
pub(crate) fn insert_into<'m>(
    mem_of: impl Fn(u32) -> Option<&'m MemTable>,
    batch: &WriteBatch,
    first_seq: u64,
    limit: usize,
    concurrent: bool,
) {
    MemWriters::new(concurrent).insert(mem_of, batch, first_seq, limit);
}

/// The memtable writers of a run of batches, one per column family met,
/// kept from batch to batch so that each insert starts from where the last
/// one in that memtable went.
struct MemWriters<'m> {
    concurrent: bool,
    /// Most batches touch one family: its writer needs no allocation.
    first: Option<(u32, MemTableWriter<'m>)>,
    others: Vec<(u32, MemTableWriter<'m>)>,
}

impl<'m> MemWriters<'m> {
    fn new(concurrent: bool) -> MemWriters<'m> {
        MemWriters {
            concurrent,
            first: None,
            others: Vec::new(),
        }
    }

    /// As [`insert_into`].
    fn insert(
        &mut self,
        mem_of: impl Fn(u32) -> Option<&'m MemTable>,
        batch: &WriteBatch,
        first_seq: u64,
        limit: usize,
    ) {
        let concurrent = self.concurrent;
        let writer_of = |mem: &'m MemTable| {
            if concurrent {
                mem.concurrent_writer()
            } else {
                mem.writer()
            }
        };
        for (i, record) in batch.iter_cf().take(limit).enumerate() {
            let seq = first_seq + i as u64;
            // Batches are validated when built or decoded from a log.
            let (cf, record) = match record {
                Ok(r) => r,
                Err(what) => unreachable!("validated batch is malformed: {what}"),
            };
            let writer = match &mut self.first {
                Some((id, w)) if *id == cf => w,
                None => {
                    let Some(mem) = mem_of(cf) else { continue };
                    &mut self.first.insert((cf, writer_of(mem))).1
                }
                Some(_) => match self.others.iter().position(|(id, _)| *id == cf) {
                    Some(at) => &mut self.others[at].1,
                    None => {
                        let Some(mem) = mem_of(cf) else { continue };
                        self.others.push((cf, writer_of(mem)));
                        &mut self.others.last_mut().expect("just pushed").1
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Options, DB};

    #[test]
    fn writers_in_flight_count_until_they_leave_even_by_a_panic() {
        let count = AtomicUsize::new(0);
        {
            let first = InFlight::enter(&count);
            let second = InFlight::enter(&count);
            assert_eq!((first.0, second.0), (1, 2));
        }
        assert_eq!(count.load(Ordering::Relaxed), 0);
        let unwound = panic::catch_unwind(AssertUnwindSafe(|| {
            let _in = InFlight::enter(&count);
            panic!("a comparator's panic in the insert");
        }));
        assert!(unwound.is_err());
        assert_eq!(count.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_follower_panicking_in_its_insert_marks_the_group() {
        let group = GroupInsert {
            mems: Memtables::All(Vec::new()),
            pending: AtomicUsize::new(2),
            helped: AtomicUsize::new(0),
            leader: None,
            panicked: AtomicBool::new(false),
        };
        // A follower that finishes its part normally.
        drop(CountDown(&group));
        assert!(!group.panicked.load(Ordering::Acquire));
        assert_eq!(group.pending.load(Ordering::Acquire), 1);
        // One whose insert panics: the count still goes down (the leader is
        // not left waiting), and the group is marked unpublishable.
        let unwound = panic::catch_unwind(AssertUnwindSafe(|| {
            let _count_down = CountDown(&group);
            panic!("a user comparator panicked");
        }));
        assert!(unwound.is_err());
        assert!(group.panicked.load(Ordering::Acquire));
        assert_eq!(group.pending.load(Ordering::Acquire), 0);
    }

    fn pipelined_groups(db: &DB) -> u64 {
        let p = db.property_value("strata.num-pipelined-write-groups");
        p.unwrap().unwrap().parse().unwrap()
    }

    /// A pipelined writer alone inserts before it leaves the queue; with
    /// another writer in flight (and no more than twice the cores) it
    /// hands the queue on once its record is written, with no writer
    /// queued yet, and its write is still there when the call returns.
    /// Without pipelining it never does.
    #[test]
    fn a_writer_with_another_in_flight_hands_the_queue_on_after_logging() {
        for pipelined in [true, false] {
            let dir = std::env::temp_dir()
                .join(format!("strata-hand-on-{pipelined}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let mut opts = Options::default();
            opts.create_if_missing(true);
            opts.set_enable_pipelined_write(pipelined);
            let db = DB::open(&opts, &dir).unwrap();
            db.put("a", "1").unwrap();
            assert_eq!(pipelined_groups(&db), 0, "alone, pipelined {pipelined}");
            // Another writer between its entry and the queue.
            db.inner.writers_in_flight.fetch_add(1, Ordering::Relaxed);
            db.put("b", "2").unwrap();
            db.delete("a").unwrap();
            db.inner.writers_in_flight.fetch_sub(1, Ordering::Relaxed);
            let want = if pipelined { 2 } else { 0 };
            assert_eq!(pipelined_groups(&db), want, "pipelined {pipelined}");
            assert_eq!(db.get("b").unwrap(), Some(b"2".to_vec()));
            assert_eq!(db.get("a").unwrap(), None);
            // Many writers in flight: the plain path again.
            db.inner
                .writers_in_flight
                .fetch_add(2 * cores() + 1, Ordering::Relaxed);
            db.put("c", "3").unwrap();
            db.inner
                .writers_in_flight
                .fetch_sub(2 * cores() + 1, Ordering::Relaxed);
            assert_eq!(
                pipelined_groups(&db),
                want,
                "crowded, pipelined {pipelined}"
            );
            assert_eq!(db.get("c").unwrap(), Some(b"3".to_vec()));
            drop(db);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
