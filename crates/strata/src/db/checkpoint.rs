//! Checkpoints: an openable copy of a live database, made while writes go
//! on (RocksDB's `Checkpoint`, with the `rocksdb` crate's names).
//!
//! How a checkpoint is made:
//! 1. The memtable is flushed (not on a read-only handle), so the logs to
//!    copy are short.
//! 2. Under the database mutex, at a moment no write group is appending
//!    to the log: file deletions are paused (RocksDB's
//!    `DisableFileDeletions`), and the current version, its log number,
//!    the next file number, the last sequence and the active log's size
//!    are taken together, with a file number reserved for the
//!    checkpoint's manifest.
//! 3. Without the mutex: every table of that version is hard-linked into
//!    the new directory (copied where links cannot be made); the logs from
//!    that log number on that existed at step 2 are copied, the active one
//!    up to its size at step 2 (so it ends at a whole record and opens
//!    under every recovery mode); OPTIONS is copied; a new
//!    manifest holding the version as one snapshot edit is written, then
//!    CURRENT naming it, all synced.
//! 4. Deletions resume.
//!
//! What the checkpoint holds is therefore a prefix of the database's
//! writes: everything acknowledged before the checkpoint began (writes made
//! with the log disabled and not yet flushed excepted, as after a crash),
//! and perhaps some writes made during it. Table files are shared with
//! the source through hard links: they are never modified, only deleted,
//! and a link keeps the data for the checkpoint.

use std::path::{Path, PathBuf};

use parking_lot::MutexGuard;

use super::filename::{
    current_file_name, log_file_name, manifest_file_name, options_file_name, parse_file_name,
    table_file_name, FileType,
};
use super::inner::DbInner;
use super::DB;
use crate::env::copy_file;
use crate::error::{Error, Result};
use crate::version::write_checkpoint_manifest;

/// Makes checkpoints of a database: consistent, openable copies of it in
/// another directory, taken while it is being written.
///
/// ```
/// use strata_kv::checkpoint::Checkpoint;
/// use strata_kv::{Options, DB};
///
/// let dir = std::env::temp_dir().join(format!("strata-doc-checkpoint-{}", std::process::id()));
/// let _ = std::fs::remove_dir_all(&dir);
/// let mut opts = Options::default();
/// opts.create_if_missing(true);
/// let db = DB::open(&opts, dir.join("db"))?;
/// db.put(b"key", b"value")?;
/// Checkpoint::new(&db)?.create_checkpoint(dir.join("copy"))?;
/// let copy = DB::open(&opts, dir.join("copy"))?;
/// assert_eq!(copy.get(b"key")?.as_deref(), Some(&b"value"[..]));
/// # drop((db, copy));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), strata_kv::Error>(())
/// ```
#[derive(Debug)]
pub struct Checkpoint<'db> {
    db: &'db DB,
}

impl<'db> Checkpoint<'db> {
    /// A checkpoint maker for `db`.
    pub fn new(db: &'db DB) -> Result<Checkpoint<'db>> {
        Ok(Checkpoint { db })
    }

    /// Writes a checkpoint of the database into the new directory `path`
    /// (its parent must exist or be creatable). Errors: `InvalidArgument`
    /// if `path` exists; the database's background error if it has one;
    /// I/O errors, after which the partial directory is removed.
    pub fn create_checkpoint<P: AsRef<Path>>(&self, path: P) -> Result<()> {
        self.create(path.as_ref(), true)
    }

    /// [`Checkpoint::create_checkpoint`], flushing the memtable first only
    /// if `flush` (without, the unflushed writes travel in the copied logs).
    pub(crate) fn create(&self, dir: &Path, flush: bool) -> Result<()> {
        let inner = &*self.db.inner;
        if inner.fs.exists(dir) {
            return Err(Error::invalid_argument(format!(
                "checkpoint directory {} already exists",
                dir.display()
            )));
        }
        if flush && !inner.read_only {
            self.db.flush()?;
        }
        let pause = DeletionPause::new(inner)?;
        let mut created = Vec::new();
        let result = make_checkpoint(inner, &pause, dir, &mut created);
        drop(pause);
        if result.is_err() {
            // Remove what this checkpoint made, and only that (the
            // directory goes only if nothing else appeared in it), so
            // nothing that looks like a database is left behind.
            for path in created.iter().rev() {
                let _ = inner.fs.remove(path);
            }
            let _ = inner.fs.remove_dir(dir);
        }
        result
    }
}

/// What the checkpoint copies, taken under the database mutex, with file
/// deletions paused until it drops.
struct DeletionPause<'a> {
    inner: &'a DbInner,
    /// The manifest's edits rebuilding every family, as of the capture.
    snapshot: Vec<crate::version::VersionEdit>,
    /// The tables they name.
    tables: Vec<u64>,
    log_number: u64,
    manifest_number: u64,
    next_file_number: u64,
    /// The log receiving writes, and its size at the capture: the end of
    /// its last whole record. None on a read-only handle.
    active_log: Option<(u64, u64)>,
}

impl<'a> DeletionPause<'a> {
    fn new(inner: &'a DbInner) -> Result<DeletionPause<'a>> {
        let mut st = inner.state.lock();
        // A leader writing a group holds the log outside the state and may
        // have handed part of a record to the file: wait until it puts the
        // log back, when the file ends at a whole record. (Only a write
        // group takes it, briefly; it is put back after an error too. A
        // panic while the group is applied drops it, and stops writes with
        // a background error, which ends this wait.)
        while !inner.read_only && st.log.is_none() && st.bg_error.is_none() {
            MutexGuard::unlocked(&mut st, std::thread::yield_now);
        }
        if let Some(e) = &st.bg_error {
            return Err(e.clone());
        }
        let unopened = st.versions.unopened_column_families();
        if !unopened.is_empty() {
            // Its manifest could not name them: the copy would lose them.
            return Err(Error::NotSupported(format!(
                "a checkpoint of a read-only open needs every column family open; not opened: {}",
                unopened.join(", ")
            )));
        }
        let active_log = st.log.as_ref().map(|log| (st.log_number, log.file_size()));
        st.file_deletions_disabled += 1;
        let manifest_number = st.versions.new_file_number();
        let snapshot = st.versions.snapshot_edits();
        let tables = snapshot
            .iter()
            .flat_map(|e| e.new_files().iter().map(|(_, f)| f.number))
            .collect();
        Ok(DeletionPause {
            inner,
            snapshot,
            tables,
            log_number: st.versions.min_log_number(),
            manifest_number,
            next_file_number: st.versions.next_file_number(),
            active_log,
        })
    }
}

impl Drop for DeletionPause<'_> {
    fn drop(&mut self) {
        let mut st = self.inner.state.lock();
        st.file_deletions_disabled -= 1;
        self.inner.delete_obsolete_files(&mut st);
    }
}

/// Fills the new directory `dir`, recording in `created` every file it
/// makes (before making it).
fn make_checkpoint(
    inner: &DbInner,
    p: &DeletionPause<'_>,
    dir: &Path,
    created: &mut Vec<PathBuf>,
) -> Result<()> {
    let fs = inner.fs.as_ref();
    fs.create_dir_all(dir)?;
    let mut new_file = |path: PathBuf| -> PathBuf {
        created.push(path.clone());
        path
    };
    for &number in &p.tables {
        let to = new_file(table_file_name(dir, number));
        fs.link_or_copy(&table_file_name(&inner.dir, number), &to)?;
    }
    // Logs the version still needs, as they are now; not those begun after
    // the snapshot (their numbers may be at or past `next_file_number`).
    let mut logs: Vec<u64> = fs
        .list(&inner.dir)?
        .iter()
        .filter_map(|name| parse_file_name(name))
        .filter(|&(kind, n)| kind == FileType::Log && n >= p.log_number && n < p.next_file_number)
        .map(|(_, n)| n)
        .collect();
    logs.sort_unstable();
    for n in logs {
        // The active log only up to its last whole record at the capture;
        // older ones were synced whole when writes moved off them.
        let limit = match p.active_log {
            Some((active, size)) if active == n => size,
            _ => u64::MAX,
        };
        let to = new_file(log_file_name(dir, n));
        copy_file(fs, &log_file_name(&inner.dir, n), &to, limit)?;
    }
    let options = options_file_name(&inner.dir);
    if fs.exists(&options) {
        let to = new_file(options_file_name(dir));
        copy_file(fs, &options, &to, u64::MAX)?;
    }
    debug_assert!(p.manifest_number < p.next_file_number);
    new_file(manifest_file_name(dir, p.manifest_number));
    new_file(current_file_name(dir));
    write_checkpoint_manifest(fs, dir, p.manifest_number, &p.snapshot)?;
    fs.sync_dir(dir)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs.sync_dir(parent)?;
    }
    Ok(())
}
