//! A file system that wraps another one to simulate power loss and inject
//! I/O errors, for the crash, power-loss and I/O-error tests.
//!
//! # The power-loss model
//!
//! The wrapper tracks every file it sees as an *inode* (an identity that
//! survives renames) and every directory's entries twice: the *live* names
//! (what the inner file system shows now) and the *durable* names (what a
//! power loss would leave).
//!
//! - `WritableFile::sync` makes the file's contents durable: every byte
//!   appended through any handle up to that moment, and the file's length.
//!   It does **not** make the file's name durable.
//! - `FileSystem::sync_dir(dir)` makes every entry change in `dir` durable:
//!   creations (`create`, including one that replaces an existing name),
//!   renames into or out of `dir`, and removals. It makes no file contents
//!   durable.
//! - Appends, `flush`, and entry changes since the last such sync are
//!   volatile. A [`crash`](FaultInjectionFileSystem::crash) (or
//!   [`drop_unsynced`](FaultInjectionFileSystem::drop_unsynced)) puts the
//!   inner file system back to the durable state: every directory gets its
//!   durable entries back (a file created since the last `sync_dir`
//!   disappears, even if it was synced; a file removed or renamed away
//!   reappears under its old name; a rename over an existing name is undone),
//!   and every file is cut to its synced length.
//! - With [`CrashMode::KeepRandomPrefix`], a crash instead keeps, per file, a
//!   random prefix of the unsynced bytes, and per directory a random prefix
//!   (in issue order) of the unsynced entry changes: a page cache written
//!   back in part, and a metadata journal that commits in order. Bytes are
//!   never reordered or invented.
//! - `create` on an existing name is modelled as making a new file and
//!   renaming it over the old one (the old contents stay durable under that
//!   name until `sync_dir`). Directory creation is durable at once. Files the
//!   wrapper first sees already on the inner file system (it lists a
//!   directory when it first touches it) are taken as durable. `LOCK` files
//!   made by `lock` are passed through untracked.
//!
//! A crash also takes the file system *down*: every later operation fails,
//! so a database still running on it stops, until
//! [`restart`](FaultInjectionFileSystem::restart). Handles opened before a
//! crash fail forever after it. Close the database before restarting.
//!
//! # Error injection
//!
//! [`FaultRule`]s make chosen operations ([`FileOp`]) fail: after N matching
//! calls, on paths containing a string, at most M times, and with a chance
//! of 1 in K drawn from a seeded generator. A failed operation has no
//! effect (a failed append writes nothing; a failed sync makes nothing
//! durable). [`FaultStats`] counts calls and injected faults per operation.
//! [`crash_after_ops`](FaultInjectionFileSystem::crash_after_ops) crashes at
//! a chosen mutating operation, so a crash can land inside a flush, a
//! compaction or a manifest switch.
//!
//! Thread safety: shared across threads like any [`FileSystem`]. Every
//! operation that changes the inner file system runs under one mutex, so a
//! crash from another thread happens between two operations, never inside
//! one. Reads take the mutex only to check for faults.

mod files;
mod namespace;
mod rules;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::{display, FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};
use files::{FaultRandomAccessFile, FaultSequentialFile, FaultWritableFile};
use namespace::{DirChange, Namespace};
use rules::SplitMix64;
pub use rules::{CrashMode, FaultRule, FaultStats, FileOp};

struct State {
    active: bool,
    /// Bumped by every crash; handles from an older epoch fail.
    epoch: u64,
    rules: Vec<FaultRule>,
    rng: SplitMix64,
    stats: FaultStats,
    /// Mutating operations left before a crash.
    crash_after_ops: Option<u64>,
    mode: CrashMode,
    ns: Namespace,
}

/// A [`FileSystem`] that simulates power loss and injects I/O errors on top
/// of another one; see the module documentation for the exact model.
/// Cloning gives another handle to the same state.
#[derive(Clone)]
pub struct FaultInjectionFileSystem {
    inner: Arc<dyn FileSystem>,
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for FaultInjectionFileSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // try_lock: Debug may run while this thread holds the state.
        let mut d = f.debug_struct("FaultInjectionFileSystem");
        d.field("inner", &self.inner);
        if let Some(st) = self.state.try_lock() {
            d.field("active", &st.active)
                .field("rules", &st.rules.len())
                .field("stats", &st.stats);
        }
        d.finish_non_exhaustive()
    }
}

fn injected(op: FileOp, path: &Path, no_space: bool) -> Error {
    let source = if no_space {
        // What the kernel returns: ENOSPC.
        std::io::Error::from_raw_os_error(28)
    } else {
        std::io::Error::other("injected I/O error")
    };
    Error::io(format!("{} {}", op.name(), display(path)), source)
}

fn down(what: &str, path: &Path) -> Error {
    Error::io(
        format!("{what} {}", display(path)),
        std::io::Error::other("file system down after a simulated power loss"),
    )
}

fn parent(path: &Path) -> PathBuf {
    path.parent().map(Path::to_owned).unwrap_or_default()
}

impl FaultInjectionFileSystem {
    /// Wraps `inner`, with no fault rules and the generator seeded with 0.
    pub fn new(inner: Arc<dyn FileSystem>) -> FaultInjectionFileSystem {
        FaultInjectionFileSystem {
            inner,
            state: Arc::new(Mutex::new(State {
                active: true,
                epoch: 0,
                rules: Vec::new(),
                rng: SplitMix64(0),
                stats: FaultStats::default(),
                crash_after_ops: None,
                mode: CrashMode::DropUnsynced,
                ns: Namespace::default(),
            })),
        }
    }

    /// The wrapped file system.
    pub fn inner(&self) -> &Arc<dyn FileSystem> {
        &self.inner
    }

    /// Seeds the generator behind `one_in` rules and `KeepRandomPrefix`.
    pub fn set_seed(&self, seed: u64) {
        self.state.lock().rng = SplitMix64(seed);
    }

    /// Adds a fault rule. Rules are checked in the order added; the first
    /// that fires fails the call.
    pub fn inject(&self, rule: FaultRule) {
        self.state.lock().rules.push(rule);
    }

    /// Removes every fault rule (and a pending `crash_after_ops`).
    pub fn clear_faults(&self) {
        let mut st = self.state.lock();
        st.rules.clear();
        st.crash_after_ops = None;
    }

    /// Calls, injected faults and crashes so far.
    pub fn stats(&self) -> FaultStats {
        self.state.lock().stats.clone()
    }

    /// Chooses what a crash keeps of the unsynced state.
    pub fn set_crash_mode(&self, mode: CrashMode) {
        self.state.lock().mode = mode;
    }

    /// Crashes when the `n`-th mutating operation from now (create,
    /// append, sync, rename, remove, sync_dir) starts: `n` = 0 crashes at
    /// the next one. That operation fails and has no effect.
    pub fn crash_after_ops(&self, n: u64) {
        self.state.lock().crash_after_ops = Some(n);
    }

    /// True between a crash and [`restart`](Self::restart).
    pub fn is_down(&self) -> bool {
        !self.state.lock().active
    }

    /// Simulates a power loss now: the file system goes down (every later
    /// operation fails) and the inner file system is put back to the
    /// durable state. Fails only if the inner file system does.
    pub fn crash(&self) -> Result<()> {
        let mut st = self.state.lock();
        self.crash_locked(&mut st)
    }

    /// Puts the inner file system back to the durable state without taking
    /// it down: for when nothing is running on it.
    pub fn drop_unsynced(&self) -> Result<()> {
        let mut st = self.state.lock();
        self.revert(&mut st)
    }

    /// Brings the file system back up after a crash. Handles opened before
    /// the crash keep failing.
    pub fn restart(&self) {
        let mut st = self.state.lock();
        st.active = true;
        st.crash_after_ops = None;
    }

    /// Bytes appended to `path` that a crash would drop now (0 for an
    /// untracked file).
    pub fn unsynced_bytes(&self, path: &Path) -> u64 {
        let st = self.state.lock();
        let Some(inode) = st.ns.live.get(path).and_then(|i| st.ns.inodes.get(i)) else {
            return 0;
        };
        let len = self.inner.file_size(path).unwrap_or(0);
        len.saturating_sub(inode.synced_len)
    }

    fn crash_locked(&self, st: &mut State) -> Result<()> {
        st.active = false;
        st.epoch += 1;
        st.crash_after_ops = None;
        st.stats.crashes += 1;
        self.revert(st)
    }

    /// Checks an operation against the state and the rules: Err if the
    /// file system is down, the handle is stale, a crash is due, or a rule
    /// fires.
    fn check(&self, st: &mut State, op: FileOp, paths: &[&Path], epoch: Option<u64>) -> Result<()> {
        let path = paths.first().copied().unwrap_or(Path::new(""));
        if !st.active {
            return Err(down(op.name(), path));
        }
        if epoch.is_some_and(|e| e != st.epoch) {
            return Err(Error::io(
                format!("{} {}", op.name(), display(path)),
                std::io::Error::other("handle opened before a simulated power loss"),
            ));
        }
        st.stats.calls[op.index()] += 1;
        if op.is_mutation() {
            if let Some(left) = st.crash_after_ops {
                if left == 0 {
                    self.crash_locked(st)?;
                    return Err(down(op.name(), path));
                }
                st.crash_after_ops = Some(left - 1);
            }
        }
        let State {
            rules, rng, stats, ..
        } = st;
        for rule in rules.iter_mut() {
            if !rule.matches(op, paths) {
                continue;
            }
            rule.seen += 1;
            let eligible =
                rule.seen > rule.after_calls && rule.times_max.is_none_or(|max| rule.fired < max);
            if eligible && (rule.one_in <= 1 || rng.next_u64() % rule.one_in == 0) {
                rule.fired += 1;
                stats.injected[op.index()] += 1;
                return Err(injected(op, path, rule.no_space));
            }
        }
        Ok(())
    }

    /// The first time a directory is touched, takes the files already in
    /// it as durable.
    fn adopt(&self, ns: &mut Namespace, dir: &Path) -> Result<()> {
        if !ns.adopted.insert(dir.to_owned()) || !self.inner.is_dir(dir) {
            return Ok(());
        }
        for name in self.inner.list(dir)? {
            let path = dir.join(name);
            if self.inner.is_dir(&path) || ns.live.contains_key(&path) {
                continue;
            }
            let len = self.inner.file_size(&path)?;
            let inode = ns.new_inode(len);
            ns.live.insert(path.clone(), inode);
            ns.durable.insert(path, inode);
        }
        Ok(())
    }

    /// The inode of `path`, registering a file that appeared on the inner
    /// file system behind the wrapper's back as durable.
    fn tracked(&self, ns: &mut Namespace, path: &Path) -> Result<Option<u64>> {
        self.adopt(ns, &parent(path))?;
        if let Some(&inode) = ns.live.get(path) {
            return Ok(Some(inode));
        }
        if !self.inner.exists(path) || self.inner.is_dir(path) {
            return Ok(None);
        }
        let inode = ns.new_inode(self.inner.file_size(path)?);
        ns.live.insert(path.to_owned(), inode);
        ns.durable.insert(path.to_owned(), inode);
        Ok(Some(inode))
    }

    /// Before `path` loses its live name: the contents to keep for a crash
    /// that could bring it back, if one could.
    fn save_if_referenced(&self, ns: &Namespace, path: &Path) -> Result<Option<(u64, Vec<u8>)>> {
        let Some(&inode) = ns.live.get(path) else {
            return Ok(None);
        };
        if !ns.referenced(inode) {
            return Ok(None);
        }
        let len = self.inner.file_size(path)?;
        Ok(Some((inode, read_prefix(self.inner.as_ref(), path, len)?)))
    }

    /// Puts the inner file system back to the durable state (see the
    /// module documentation), then makes that the whole tracked state.
    fn revert(&self, st: &mut State) -> Result<()> {
        let State { ns, rng, mode, .. } = st;
        let keep_prefix = *mode == CrashMode::KeepRandomPrefix;
        let mut target = ns.durable.clone();
        for changes in ns.pending.values() {
            let n = if keep_prefix {
                rng.up_to(changes.len() as u64) as usize
            } else {
                0
            };
            for change in &changes[..n] {
                for (path, inode) in &change.0 {
                    match inode {
                        Some(i) => target.insert(path.clone(), *i),
                        None => target.remove(path),
                    };
                }
            }
        }
        let live_by_inode: HashMap<u64, PathBuf> =
            ns.live.iter().map(|(p, i)| (*i, p.clone())).collect();
        // Read everything needed before changing anything.
        let mut untouched = HashSet::new();
        let mut rewrite: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        let mut lengths = HashMap::new();
        for (path, &id) in &target {
            let inode = ns
                .inodes
                .get(&id)
                .expect("a durable name refers to a known inode");
            let current_len = match (&inode.orphan, live_by_inode.get(&id)) {
                (Some(bytes), _) => bytes.len() as u64,
                (None, Some(live)) => self.inner.file_size(live)?,
                (None, None) => unreachable!("inode {id} has neither a live name nor saved bytes"),
            };
            let synced = inode.synced_len.min(current_len);
            let len = if keep_prefix {
                synced + rng.up_to(current_len - synced)
            } else {
                synced
            };
            lengths.insert(id, len);
            if ns.live.get(path) == Some(&id) && len == current_len {
                untouched.insert(path.clone());
                continue;
            }
            let bytes = match (&inode.orphan, live_by_inode.get(&id)) {
                (Some(bytes), _) => bytes[..len as usize].to_vec(),
                (None, Some(live)) => read_prefix(self.inner.as_ref(), live, len)?,
                (None, None) => unreachable!(),
            };
            rewrite.push((path.clone(), bytes));
        }
        for path in ns.live.keys() {
            if !untouched.contains(path) && self.inner.exists(path) {
                self.inner.remove(path)?;
            }
        }
        for (path, bytes) in &rewrite {
            let mut file = self.inner.create(path)?;
            file.append(bytes)?;
            file.sync()?;
        }
        ns.live = target.clone();
        ns.durable = target;
        ns.pending.clear();
        for (id, inode) in ns.inodes.iter_mut() {
            inode.orphan = None;
            if let Some(&len) = lengths.get(id) {
                inode.synced_len = len;
            }
        }
        ns.collect_garbage();
        Ok(())
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }
}

/// The first `len` bytes of `path`.
fn read_prefix(fs: &dyn FileSystem, path: &Path, len: u64) -> Result<Vec<u8>> {
    let mut file = fs.open_sequential(path)?;
    let mut out = vec![0u8; len as usize];
    let mut filled = 0;
    // Each pass reads at least one byte or stops.
    while filled < out.len() {
        let n = file.read(&mut out[filled..])?;
        if n == 0 {
            out.truncate(filled);
            break;
        }
        filled += n;
    }
    Ok(out)
}

impl FileSystem for FaultInjectionFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.lock_state();
        self.check(&mut st, FileOp::Create, &[path], None)?;
        let dir = parent(path);
        self.tracked(&mut st.ns, path)?;
        let saved = self.save_if_referenced(&st.ns, path)?;
        let file = self.inner.create(path)?;
        let ns = &mut st.ns;
        if let Some((old, bytes)) = saved {
            if let Some(inode) = ns.inodes.get_mut(&old) {
                inode.orphan = Some(bytes);
            }
        }
        let inode = ns.new_inode(0);
        ns.record(&dir, DirChange(vec![(path.to_owned(), Some(inode))]));
        ns.collect_garbage();
        Ok(Box::new(FaultWritableFile {
            inner: file,
            path: path.to_owned(),
            inode,
            epoch: st.epoch,
            fs: self.clone(),
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.lock_state();
        self.check(&mut st, FileOp::Open, &[path], None)?;
        let file = self.inner.open_append(path)?;
        let inode = self
            .tracked(&mut st.ns, path)?
            .expect("a file just opened exists");
        Ok(Box::new(FaultWritableFile {
            inner: file,
            path: path.to_owned(),
            inode,
            epoch: st.epoch,
            fs: self.clone(),
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let epoch = {
            let mut st = self.lock_state();
            self.check(&mut st, FileOp::Open, &[path], None)?;
            st.epoch
        };
        Ok(Box::new(FaultSequentialFile {
            inner: self.inner.open_sequential(path)?,
            path: path.to_owned(),
            epoch,
            fs: self.clone(),
        }))
    }

    fn open_random_access(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let epoch = {
            let mut st = self.lock_state();
            self.check(&mut st, FileOp::Open, &[path], None)?;
            st.epoch
        };
        Ok(Arc::new(FaultRandomAccessFile {
            inner: self.inner.open_random_access(path)?,
            path: path.to_owned(),
            epoch,
            fs: self.clone(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.lock_state();
        self.check(&mut st, FileOp::Rename, &[from, to], None)?;
        let Some(inode) = self.tracked(&mut st.ns, from)? else {
            // Not a file: a directory, which this model does not track, or
            // nothing. Refused before anything changes.
            let e = if self.inner.is_dir(from) {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "a directory: the fault-injecting file system renames files only",
                )
            } else {
                std::io::Error::from(std::io::ErrorKind::NotFound)
            };
            return Err(Error::io(format!("rename {}", display(from)), e));
        };
        self.tracked(&mut st.ns, to)?;
        let saved = self.save_if_referenced(&st.ns, to)?;
        self.inner.rename(from, to)?;
        let ns = &mut st.ns;
        if let Some((old, bytes)) = saved {
            if let Some(inode) = ns.inodes.get_mut(&old) {
                inode.orphan = Some(bytes);
            }
        }
        let (from_dir, to_dir) = (parent(from), parent(to));
        if from_dir == to_dir {
            let change = vec![(from.to_owned(), None), (to.to_owned(), Some(inode))];
            ns.record(&from_dir, DirChange(change));
        } else {
            ns.record(&from_dir, DirChange(vec![(from.to_owned(), None)]));
            ns.record(&to_dir, DirChange(vec![(to.to_owned(), Some(inode))]));
        }
        ns.collect_garbage();
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut st = self.lock_state();
        self.check(&mut st, FileOp::Remove, &[path], None)?;
        self.tracked(&mut st.ns, path)?;
        let saved = self.save_if_referenced(&st.ns, path)?;
        self.inner.remove(path)?;
        let ns = &mut st.ns;
        if let Some((old, bytes)) = saved {
            if let Some(inode) = ns.inodes.get_mut(&old) {
                inode.orphan = Some(bytes);
            }
        }
        ns.record(&parent(path), DirChange(vec![(path.to_owned(), None)]));
        ns.collect_garbage();
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        if self.is_down() {
            return Err(down("list", dir));
        }
        self.inner.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        if self.is_down() {
            return Err(down("create directory", dir));
        }
        self.inner.create_dir_all(dir)
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        if self.is_down() {
            return Err(down("remove directory", dir));
        }
        self.inner.remove_dir(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        if self.is_down() {
            return Err(down("lock", path));
        }
        self.inner.lock(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut st = self.lock_state();
        self.check(&mut st, FileOp::SyncDir, &[dir], None)?;
        self.inner.sync_dir(dir)?;
        let ns = &mut st.ns;
        for change in ns.pending.remove(dir).unwrap_or_default() {
            for (path, inode) in change.0 {
                match inode {
                    Some(i) => ns.durable.insert(path, i),
                    None => ns.durable.remove(&path),
                };
            }
        }
        ns.collect_garbage();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
