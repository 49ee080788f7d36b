//! Backups: numbered, checksummed copies of a database in a backup
//! directory, sharing unchanged table files (RocksDB's `BackupEngine`, with
//! the `rocksdb` crate's names).
//!
//! ```text
//! <backup dir>/
//!   LOCK                                  held by the open BackupEngine
//!   shared/<number>_<crc32c>_<xxh3>_<size>.sst
//!                                         table files, shared by backups
//!   private/<id>/                         the rest of backup <id>:
//!                                         CURRENT, MANIFEST-*, *.log, OPTIONS-*
//!   meta/<id>                             what backup <id> holds (below)
//! ```
//!
//! A backup is a checkpoint ([`Checkpoint`]) made into `private/<id>.tmp`,
//! whose tables are then copied (never linked: a backup shares no bytes
//! with the live database) to `shared/` under a name that says their
//! number, CRC-32C, 64-bit XXH3 and size (a table already there under that
//! name is the same table, and the new copy goes), after which the
//! directory is renamed to `private/<id>` and the meta file is written: a
//! backup exists once its meta file does, and from then on nothing of it
//! is removed except by a purge, which removes the meta file first. The
//! meta file is text, one line per fact, the last line the CRC-32C of the
//! lines before it:
//!
//! ```text
//! strata-backup 1
//! timestamp <seconds since the epoch>
//! file <path relative to the backup dir> <size> <crc32c as 8 hex digits>
//! ...
//! crc <crc32c of the text above, 8 hex digits>
//! ```
//!
//! Tables are unchanged once written, so a table shared between backups is
//! shared safely. One `BackupEngine` at a time may use a backup directory
//! (its `LOCK` file; a second one gets `Busy`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checkpoint::Checkpoint;
use super::filename::{lock_file_name, parse_file_name, table_file_name, FileType};
use super::DB;
use crate::env::{FileSystem, PosixFileSystem};
use crate::error::{Error, Result};

const META_MAGIC: &str = "strata-backup 1";

/// The name a restore writes CURRENT under before renaming it.
const RESTORE_CURRENT_TMP: &str = "CURRENT.restore-tmp";

/// The environment backups go through: the file system of the backup
/// directory (the `rocksdb` crate's `Env`). The database being backed up
/// must reach the backup directory through its own file system too.
#[derive(Clone)]
pub struct Env {
    fs: Arc<dyn FileSystem>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env").finish_non_exhaustive()
    }
}

impl Env {
    /// The operating system's file system.
    pub fn new() -> Result<Env> {
        Ok(Env {
            fs: Arc::new(PosixFileSystem::new()),
        })
    }

    /// Another file system (an in-memory one in tests).
    pub fn from_file_system(fs: Arc<dyn FileSystem>) -> Env {
        Env { fs }
    }
}

/// Where backups go.
#[derive(Debug, Clone)]
pub struct BackupEngineOptions {
    dir: PathBuf,
}

impl BackupEngineOptions {
    /// Backups in `backup_dir` (created when the engine opens).
    pub fn new<P: AsRef<Path>>(backup_dir: P) -> Result<BackupEngineOptions> {
        Ok(BackupEngineOptions {
            dir: backup_dir.as_ref().to_path_buf(),
        })
    }
}

/// How a backup is restored. The defaults are the only behaviour: the
/// target directory's database files are replaced.
#[derive(Debug, Clone, Default)]
pub struct RestoreOptions {}

/// One backup, as [`BackupEngine::get_backup_info`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupEngineInfo {
    /// When the backup was made, in seconds since the Unix epoch.
    pub timestamp: i64,
    /// Its number.
    pub backup_id: u32,
    /// Bytes of all its files (shared ones counted in full).
    pub size: u64,
    /// Number of its files.
    pub num_files: u32,
}

/// A file of a backup, as its meta file lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BackupFile {
    /// Relative to the backup directory.
    path: String,
    size: u64,
    crc: u32,
}

impl BackupFile {
    /// `Corruption` naming `shown` unless `size` and `crc` (of what was
    /// read) are the recorded ones.
    fn check(&self, id: u32, shown: &str, size: u64, crc: u32) -> Result<()> {
        if size == self.size && crc == self.crc {
            return Ok(());
        }
        Err(Error::corruption(
            shown,
            0,
            format!(
                "backup {id}: {size} bytes with CRC-32C {crc:08x}, recorded {} bytes with {:08x}",
                self.size, self.crc
            ),
        ))
    }
}

/// A backup's meta file, parsed.
#[derive(Debug, Clone)]
struct Meta {
    timestamp: i64,
    files: Vec<BackupFile>,
}

/// Creates, lists, verifies, restores and purges backups in one directory.
///
/// ```
/// use strata_kv::backup::{BackupEngine, BackupEngineOptions, RestoreOptions};
/// use strata_kv::{Env, Options, DB};
///
/// let dir = std::env::temp_dir().join(format!("strata-doc-backup-{}", std::process::id()));
/// let _ = std::fs::remove_dir_all(&dir);
/// let mut opts = Options::default();
/// opts.create_if_missing(true);
/// let db = DB::open(&opts, dir.join("db"))?;
/// db.put(b"key", b"v1")?;
/// let mut engine = BackupEngine::open(&BackupEngineOptions::new(dir.join("backups"))?, &Env::new()?)?;
/// engine.create_new_backup(&db)?;
/// db.put(b"key", b"v2")?;
/// engine.create_new_backup(&db)?;
/// assert_eq!(engine.get_backup_info().len(), 2);
/// engine.verify_backup(1)?;
/// engine.restore_from_backup(dir.join("restored"), dir.join("restored"), &RestoreOptions::default(), 1)?;
/// let restored = DB::open(&opts, dir.join("restored"))?;
/// assert_eq!(restored.get(b"key")?.as_deref(), Some(&b"v1"[..]));
/// # drop((db, restored));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), strata_kv::Error>(())
/// ```
pub struct BackupEngine {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    _lock: Box<dyn crate::env::FileLock>,
}

impl std::fmt::Debug for BackupEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupEngine")
            .field("dir", &self.dir)
            .finish()
    }
}

impl BackupEngine {
    /// Opens (creating it if needed) the backup directory of `opts`.
    /// `Busy` if another engine has it open.
    pub fn open(opts: &BackupEngineOptions, env: &Env) -> Result<BackupEngine> {
        let fs = env.fs.clone();
        let dir = opts.dir.clone();
        for sub in ["shared", "private", "meta"] {
            fs.create_dir_all(&dir.join(sub))?;
        }
        let lock = fs.lock(&dir.join("LOCK"))?;
        let engine = BackupEngine {
            fs,
            dir,
            _lock: lock,
        };
        // Leftovers of a backup or purge a crash interrupted.
        engine.collect_garbage()?;
        Ok(engine)
    }

    /// Backs `db` up as a new backup, without flushing it first (its
    /// unflushed writes are in the backup's copy of the logs), as the
    /// `rocksdb` crate's `create_new_backup`.
    pub fn create_new_backup(&mut self, db: &DB) -> Result<()> {
        self.create_new_backup_flush(db, false)
    }

    /// Backs `db` up as a new backup; without `flush_before_backup`, the
    /// unflushed writes are in the backup's copy of the logs.
    pub fn create_new_backup_flush(&mut self, db: &DB, flush_before_backup: bool) -> Result<()> {
        let id = self.next_id()?;
        let tmp = self.dir.join("private").join(format!("{id}.tmp"));
        remove_tree(&*self.fs, &tmp);
        let result = self.create(db, id, &tmp, flush_before_backup);
        // A backup whose meta file is in place exists, whatever failed
        // after (a directory sync): nothing of it may go.
        if result.is_err() && !self.fs.exists(&self.dir.join("meta").join(id.to_string())) {
            remove_tree(&*self.fs, &tmp);
            remove_tree(&*self.fs, &self.dir.join("private").join(id.to_string()));
        }
        result
    }

    fn create(&self, db: &DB, id: u32, tmp: &Path, flush: bool) -> Result<()> {
        Checkpoint::new(db)?.create(tmp, flush)?;
        let private = format!("private/{id}");
        let mut files = Vec::new();
        let mut names = self.fs.list(tmp)?;
        names.sort();
        for name in names {
            let path = tmp.join(&name);
            match parse_file_name(&name) {
                Some((FileType::Table, number)) => {
                    // The checkpoint linked the live table: copy its bytes.
                    let staging = self.dir.join("shared").join(format!("{name}.{id}.tmp"));
                    let (size, crc, hash) = copy_hashing(&*self.fs, &path, Some(&staging))?;
                    let shared = format!("shared/{number:06}_{crc:08x}_{hash:016x}_{size}.sst");
                    let to = self.dir.join(&shared);
                    if self.fs.exists(&to) {
                        self.fs.remove(&staging)?;
                    } else {
                        self.fs.rename(&staging, &to)?;
                    }
                    self.fs.remove(&path)?;
                    files.push(BackupFile {
                        path: shared,
                        size,
                        crc,
                    });
                }
                _ => {
                    let (size, crc, _) = copy_hashing(&*self.fs, &path, None)?;
                    files.push(BackupFile {
                        path: format!("{private}/{name}"),
                        size,
                        crc,
                    });
                }
            }
        }
        self.fs.sync_dir(&self.dir.join("shared"))?;
        self.fs.sync_dir(tmp)?;
        self.fs.rename(tmp, &self.dir.join(&private))?;
        self.fs.sync_dir(&self.dir.join("private"))?;
        let meta = Meta {
            timestamp: crate::sst::TableProperties::now_secs() as i64,
            files,
        };
        let text = meta.encode();
        crate::env::write_file_atomic(
            &*self.fs,
            &self.dir.join("meta").join(id.to_string()),
            text.as_bytes(),
        )
    }

    /// The next backup number: one more than any in use (a leftover
    /// private directory of a failed backup counts too).
    fn next_id(&self) -> Result<u32> {
        let mut max = 0;
        for sub in ["meta", "private"] {
            for name in self.fs.list(&self.dir.join(sub))? {
                let stem = name.strip_suffix(".tmp").unwrap_or(&name);
                if let Ok(id) = stem.parse::<u32>() {
                    max = max.max(id);
                }
            }
        }
        max.checked_add(1)
            .ok_or_else(|| Error::invalid_argument("backup numbers exhausted"))
    }

    /// The backups, oldest first (a backup whose meta file is damaged is
    /// left out; `verify_backup` reports it).
    pub fn get_backup_info(&self) -> Vec<BackupEngineInfo> {
        self.ids()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|id| {
                let meta = self.meta(id).ok()?;
                Some(BackupEngineInfo {
                    timestamp: meta.timestamp,
                    backup_id: id,
                    size: meta.files.iter().map(|f| f.size).sum(),
                    num_files: meta.files.len() as u32,
                })
            })
            .collect()
    }

    /// The numbers of the complete backups (those with a meta file),
    /// ascending.
    fn ids(&self) -> Result<Vec<u32>> {
        let mut ids: Vec<u32> = self
            .fs
            .list(&self.dir.join("meta"))?
            .into_iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn meta(&self, id: u32) -> Result<Meta> {
        let path = self.dir.join("meta").join(id.to_string());
        if !self.fs.exists(&path) {
            return Err(Error::NotFound(format!(
                "backup {id} in {}",
                self.dir.display()
            )));
        }
        let bytes = crate::env::read_file_to_vec(&*self.fs, &path)?;
        Meta::decode(&bytes, &path.display().to_string())
    }

    /// Checks that every file of backup `backup_id` is there with its size
    /// and CRC-32C: `Corruption` naming the first that is not, `NotFound`
    /// for an unknown backup.
    pub fn verify_backup(&self, backup_id: u32) -> Result<()> {
        let meta = self.meta(backup_id)?;
        for f in &meta.files {
            self.check_file(backup_id, f)?;
        }
        Ok(())
    }

    fn check_file(&self, id: u32, f: &BackupFile) -> Result<()> {
        let path = self.dir.join(&f.path);
        let shown = path.display().to_string();
        if !self.fs.exists(&path) {
            return Err(Error::corruption(
                &shown,
                0,
                format!("backup {id}: the file is missing"),
            ));
        }
        let (size, crc, _) = copy_hashing(&*self.fs, &path, None)?;
        f.check(id, &shown, size, crc)?;
        Ok(())
    }

    /// Restores the newest backup; see [`BackupEngine::restore_from_backup`].
    pub fn restore_from_latest_backup<D: AsRef<Path>, W: AsRef<Path>>(
        &mut self,
        db_dir: D,
        wal_dir: W,
        opts: &RestoreOptions,
    ) -> Result<()> {
        // The newest backup whose meta file is sound.
        let latest = self
            .ids()?
            .into_iter()
            .rev()
            .find(|&id| self.meta(id).is_ok())
            .ok_or_else(|| Error::NotFound(format!("no backup in {}", self.dir.display())))?;
        self.restore_from_backup(db_dir, wal_dir, opts, latest)
    }

    /// Restores backup `backup_id` into `db_dir`. The backup is verified
    /// first (`Corruption` naming the damaged file, and `db_dir` is left
    /// as it was); then, holding the directory's lock (`Busy` if a
    /// database there is open), the database files in `db_dir` (of a
    /// database, or of a restore a crash interrupted) are removed, every
    /// file is copied and checked again against its size and CRC-32C, and
    /// CURRENT is put in place last, atomically: a failure at any point
    /// leaves nothing that opens as a database. Strata keeps its logs with
    /// the database: `wal_dir` must be `db_dir` (`InvalidArgument`
    /// otherwise).
    pub fn restore_from_backup<D: AsRef<Path>, W: AsRef<Path>>(
        &mut self,
        db_dir: D,
        wal_dir: W,
        _opts: &RestoreOptions,
        backup_id: u32,
    ) -> Result<()> {
        let (db_dir, wal_dir) = (db_dir.as_ref(), wal_dir.as_ref());
        if db_dir != wal_dir {
            return Err(Error::invalid_argument(format!(
                "restore: the log directory {} must be the database directory {} (Strata keeps its logs there)",
                wal_dir.display(),
                db_dir.display()
            )));
        }
        let meta = self.meta(backup_id)?;
        for f in &meta.files {
            self.check_file(backup_id, f)?;
        }
        self.fs.create_dir_all(db_dir)?;
        let _lock = self.fs.lock(&lock_file_name(db_dir))?;
        for name in self.fs.list(db_dir)? {
            if parse_file_name(&name).is_some_and(|(kind, _)| kind != FileType::Lock)
                || name == RESTORE_CURRENT_TMP
            {
                self.fs.remove(&db_dir.join(&name))?;
            }
        }
        self.fs.sync_dir(db_dir)?;
        let mut created = Vec::new();
        let result = self.restore_files(backup_id, &meta, db_dir, &mut created);
        if result.is_err() {
            // What this restore wrote goes.
            for path in &created {
                let _ = self.fs.remove(path);
            }
        }
        result
    }

    fn restore_files(
        &self,
        id: u32,
        meta: &Meta,
        db_dir: &Path,
        created: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let mut current = None;
        for f in &meta.files {
            let name = f.path.rsplit('/').next().unwrap_or(&f.path);
            let to = match f.path.strip_prefix("shared/") {
                Some(shared) => {
                    let number = shared
                        .split('_')
                        .next()
                        .and_then(|n| n.parse::<u64>().ok())
                        .ok_or_else(|| {
                            Error::corruption(&f.path, 0, "shared table name without a number")
                        })?;
                    table_file_name(db_dir, number)
                }
                None if name == "CURRENT" => {
                    current = Some(f);
                    continue;
                }
                None => db_dir.join(name),
            };
            created.push(to.clone());
            self.copy_checked(id, f, &to)?;
        }
        // CURRENT last: until it is there, nothing opens as a database.
        let current = current.ok_or_else(|| {
            Error::corruption(
                format!("backup {id}"),
                0,
                "the backup holds no CURRENT file",
            )
        })?;
        self.fs.sync_dir(db_dir)?;
        let tmp = db_dir.join(RESTORE_CURRENT_TMP);
        created.push(tmp.clone());
        self.copy_checked(id, current, &tmp)?;
        self.fs.rename(&tmp, &db_dir.join("CURRENT"))?;
        self.fs.sync_dir(db_dir)
    }

    /// Copies a backup file to `to`, checking size and CRC-32C of what was
    /// read, and syncs it.
    fn copy_checked(&self, id: u32, f: &BackupFile, to: &Path) -> Result<()> {
        let from = self.dir.join(&f.path);
        let shown = from.display().to_string();
        let mut src = self.fs.open_sequential(&from).map_err(|e| {
            if e.is_not_found() {
                Error::corruption(&shown, 0, format!("backup {id}: the file is missing"))
            } else {
                e
            }
        })?;
        let mut dst = self.fs.create(to)?;
        let mut buf = vec![0u8; 1 << 20];
        let (mut size, mut crc) = (0u64, 0u32);
        loop {
            let n = src.read(&mut buf)?;
            if n == 0 {
                break;
            }
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            size += n as u64;
            dst.append(&buf[..n])?;
        }
        f.check(id, &shown, size, crc)?;
        dst.sync()
    }

    /// Deletes all backups but the newest `num_backups_to_keep`, and the
    /// shared tables no remaining backup holds.
    pub fn purge_old_backups(&mut self, num_backups_to_keep: usize) -> Result<()> {
        let ids = self.ids()?;
        let doomed = ids.len().saturating_sub(num_backups_to_keep);
        for &id in &ids[..doomed] {
            // The meta files first, durably: a backup without one is gone,
            // and only then may its files go.
            self.fs
                .remove(&self.dir.join("meta").join(id.to_string()))?;
        }
        self.fs.sync_dir(&self.dir.join("meta"))?;
        self.collect_garbage()
    }

    /// Removes shared tables no backup holds, and leftovers of failed
    /// backups and purges. A backup whose meta file cannot be read keeps
    /// everything: its files are not known.
    fn collect_garbage(&self) -> Result<()> {
        let ids = self.ids()?;
        let mut live = std::collections::HashSet::new();
        for &id in &ids {
            for f in self.meta(id)?.files {
                live.insert(f.path);
            }
        }
        for name in self.fs.list(&self.dir.join("meta"))? {
            if name.parse::<u32>().is_err() {
                self.fs.remove(&self.dir.join("meta").join(&name))?;
            }
        }
        for name in self.fs.list(&self.dir.join("shared"))? {
            if !live.contains(&format!("shared/{name}")) {
                self.fs.remove(&self.dir.join("shared").join(&name))?;
            }
        }
        for name in self.fs.list(&self.dir.join("private"))? {
            let complete = name.parse::<u32>().is_ok_and(|id| ids.contains(&id));
            if !complete {
                remove_tree(&*self.fs, &self.dir.join("private").join(&name));
            }
        }
        Ok(())
    }
}

impl Meta {
    fn encode(&self) -> String {
        let mut text = format!("{META_MAGIC}\ntimestamp {}\n", self.timestamp);
        for f in &self.files {
            text.push_str(&format!("file {} {} {:08x}\n", f.path, f.size, f.crc));
        }
        let crc = crc32c::crc32c(text.as_bytes());
        text.push_str(&format!("crc {crc:08x}\n"));
        text
    }

    fn decode(bytes: &[u8], name: &str) -> Result<Meta> {
        let corrupt = |what: &str| Error::corruption(name, 0, format!("backup meta file: {what}"));
        let text = std::str::from_utf8(bytes).map_err(|_| corrupt("not UTF-8"))?;
        let lines_end = text
            .strip_suffix('\n')
            .ok_or_else(|| corrupt("does not end with a newline"))?;
        let body_end = lines_end.rfind('\n').ok_or_else(|| corrupt("too short"))? + 1;
        let (body, last) = lines_end.split_at(body_end);
        let recorded = last
            .strip_prefix("crc ")
            .filter(|h| h.len() == 8)
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| corrupt("no checksum line"))?;
        if crc32c::crc32c(body.as_bytes()) != recorded {
            return Err(corrupt("checksum mismatch"));
        }
        let mut lines = body.lines();
        if lines.next() != Some(META_MAGIC) {
            return Err(corrupt("not a Strata backup meta file"));
        }
        let mut meta = Meta {
            timestamp: 0,
            files: Vec::new(),
        };
        for line in lines {
            let mut parts = line.split(' ');
            match (parts.next(), parts.next(), parts.next(), parts.next()) {
                (Some("timestamp"), Some(t), None, None) => {
                    meta.timestamp = t.parse().map_err(|_| corrupt("bad timestamp"))?
                }
                (Some("file"), Some(path), Some(size), Some(crc)) => {
                    let safe = (path.starts_with("shared/") || path.starts_with("private/"))
                        && !path.contains('\\')
                        && !path
                            .split('/')
                            .any(|c| c.is_empty() || c == "." || c == "..");
                    if !safe {
                        return Err(corrupt("a file path outside the backup directory"));
                    }
                    meta.files.push(BackupFile {
                        path: path.to_string(),
                        size: size.parse().map_err(|_| corrupt("bad file size"))?,
                        crc: u32::from_str_radix(crc, 16).map_err(|_| corrupt("bad file CRC"))?,
                    });
                }
                _ => return Err(corrupt("unknown line")),
            }
        }
        Ok(meta)
    }
}

/// Size, CRC-32C and XXH3-64 of a file, copied (and synced) to `to` on
/// the way if given.
fn copy_hashing(fs: &dyn FileSystem, path: &Path, to: Option<&Path>) -> Result<(u64, u32, u64)> {
    let mut file = fs.open_sequential(path)?;
    let mut dst = match to {
        Some(to) => Some(fs.create(to)?),
        None => None,
    };
    let mut buf = vec![0u8; 1 << 20];
    let (mut size, mut crc) = (0u64, 0u32);
    let mut xxh = xxhash_rust::xxh3::Xxh3::new();
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        xxh.update(&buf[..n]);
        size += n as u64;
        if let Some(dst) = &mut dst {
            dst.append(&buf[..n])?;
        }
    }
    if let Some(mut dst) = dst {
        dst.sync()?;
    }
    Ok((size, crc, xxh.digest()))
}

/// Removes a directory of files (one level), ignoring what is not there.
fn remove_tree(fs: &dyn FileSystem, dir: &Path) {
    if let Ok(names) = fs.list(dir) {
        for name in names {
            let _ = fs.remove(&dir.join(name));
        }
    }
    let _ = fs.remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trip_and_damage() {
        let meta = Meta {
            timestamp: 1_700_000_000,
            files: vec![
                BackupFile {
                    path: "shared/000007_0badf00d_4096.sst".into(),
                    size: 4096,
                    crc: 0x0bad_f00d,
                },
                BackupFile {
                    path: "private/3/CURRENT".into(),
                    size: 16,
                    crc: 7,
                },
            ],
        };
        let text = meta.encode();
        let back = Meta::decode(text.as_bytes(), "m").unwrap();
        assert_eq!(back.files, meta.files);
        assert_eq!(back.timestamp, meta.timestamp);
        // Any flipped byte is caught (by the checksum or the parse).
        for i in 0..text.len() {
            let mut bad = text.clone().into_bytes();
            bad[i] ^= 0x01;
            assert!(Meta::decode(&bad, "m").is_err(), "byte {i} flipped");
        }
        // A path leaving the directory is refused even with a good CRC.
        let evil = Meta {
            timestamp: 1,
            files: vec![BackupFile {
                path: "shared/../../etc/passwd".into(),
                size: 1,
                crc: 1,
            }],
        };
        assert!(Meta::decode(evil.encode().as_bytes(), "m").is_err());
    }
}
