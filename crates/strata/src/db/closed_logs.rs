//! Logs a memtable switch closed without syncing them.
//!
//! A switch does not sync the log it closes: the writer that fills the
//! memtable would wait for it (RocksDB does not sync there either). The
//! closed log is synced later, by whichever comes first:
//!
//! - a synced write, before it syncs the active log: a synced write must
//!   not be durable while earlier writes in an older log are not;
//! - a flush with more than one column family, before its manifest edit:
//!   another family may still replay the closed log after a power loss,
//!   and the flushed family's tables must not hold writes the replay loses.
//!
//! Until then a power loss may keep the newer log's writes and lose the
//! older log's tail. Each new log starts with the older log's number and
//! size ([`PredecessorLog`](crate::wal::PredecessorLog)), and recovery stops
//! where an older log falls short of it (`DbInner::predecessor_hole`), so
//! what is recovered is still a prefix of the writes.
//!
//! A closed log that becomes obsolete first (its writes are in tables on
//! record) is never synced.
//!
//! The switch does not sync the directory either, so the new log's name is
//! not durable yet (RocksDB's `log_dir_synced_`). The same two sync it
//! first: a synced write in the new log must not vanish with its file, and
//! nor may a closed log another family replays. Until then a power loss
//! may take the new log (and any newer one) away whole: its writes were
//! not synced, and recovery stops where the first missing log should be.
//! (A flush's table creation syncs the directory too.)

use parking_lot::Mutex;

use super::inner::DbInner;
use crate::error::{Error, Result};
use crate::wal::LogWriter;

/// Closed, not yet synced logs, and the lock that orders their syncs.
#[derive(Default)]
pub(crate) struct ClosedLogs {
    pending: Mutex<Pending>,
    /// Held while logs taken from `pending` are synced, so that a sync
    /// that finds `pending` empty also waits for one in progress. Holds
    /// the error of a failed sync: from then on nothing is known about
    /// that log's end, and every later sync fails with it.
    syncing: Mutex<Option<Error>>,
}

#[derive(Default)]
struct Pending {
    /// Logs waiting for a sync, by number, oldest first.
    logs: Vec<(u64, LogWriter)>,
    /// A log was created since the directory was last synced.
    dir: bool,
}

impl ClosedLogs {
    /// Notes a switch: it created a log without syncing the directory,
    /// and closed log `number` (if there was one), whose writes were
    /// handed to the operating system already.
    pub(crate) fn switched(&self, closed: Option<(u64, LogWriter)>) {
        let mut pending = self.pending.lock();
        pending.dir = true;
        pending.logs.extend(closed);
    }

    /// Forgets the logs older than `min_log` without syncing them: their
    /// writes are in tables on record, and no recovery reads them again.
    pub(crate) fn forget_older_than(&self, min_log: u64) {
        self.pending
            .lock()
            .logs
            .retain(|(number, _)| *number >= min_log);
    }

    /// Returns once every log closed before the call is durable, and so
    /// are the names of the logs created before it (`sync_dir` syncs the
    /// database's directory); or with the error of the sync that failed.
    /// Does I/O: call it without the state lock.
    pub(crate) fn sync_all(&self, sync_dir: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut failed = self.syncing.lock();
        if let Some(e) = failed.as_ref() {
            return Err(e.clone());
        }
        let Pending { logs, dir } = std::mem::take(&mut *self.pending.lock());
        if dir {
            if let Err(e) = sync_dir() {
                *failed = Some(e.clone());
                return Err(e);
            }
        }
        for (_, mut log) in logs {
            if let Err(e) = log.sync() {
                *failed = Some(e.clone());
                return Err(e);
            }
        }
        Ok(())
    }
}

impl DbInner {
    /// Makes the closed logs and the names of every log durable
    /// ([`ClosedLogs::sync_all`] over this database's directory).
    pub(crate) fn sync_closed_logs(&self) -> Result<()> {
        self.closed_logs.sync_all(|| self.fs.sync_dir(&self.dir))
    }
}
