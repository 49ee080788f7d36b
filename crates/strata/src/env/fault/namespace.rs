//! The model of a file system's names: each file an inode that survives
//! renames, each directory's live entries, its durable entries, and the
//! entry changes made since its last `sync_dir`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// A file's identity and what of it is durable.
#[derive(Debug, Default)]
pub(super) struct Inode {
    /// Bytes made durable by the last successful sync.
    pub(super) synced_len: u64,
    /// The contents, saved when the file lost its live name while a
    /// durable entry or a pending entry change still refers to it.
    pub(super) orphan: Option<Vec<u8>>,
}

/// One entry change in one directory: names set to an inode or removed,
/// applied together.
#[derive(Debug, Clone)]
pub(super) struct DirChange(pub(super) Vec<(PathBuf, Option<u64>)>);

/// Live and durable names of every tracked file.
#[derive(Debug, Default)]
pub(super) struct Namespace {
    pub(super) next_inode: u64,
    pub(super) inodes: HashMap<u64, Inode>,
    pub(super) live: BTreeMap<PathBuf, u64>,
    pub(super) durable: BTreeMap<PathBuf, u64>,
    /// Per directory, the entry changes since its last `sync_dir`.
    pub(super) pending: BTreeMap<PathBuf, Vec<DirChange>>,
    /// Directories whose existing files have been taken as durable.
    pub(super) adopted: HashSet<PathBuf>,
}

impl Namespace {
    pub(super) fn new_inode(&mut self, synced_len: u64) -> u64 {
        self.next_inode += 1;
        let id = self.next_inode;
        self.inodes.insert(
            id,
            Inode {
                synced_len,
                orphan: None,
            },
        );
        id
    }

    /// True if a crash could bring `inode` back.
    pub(super) fn referenced(&self, inode: u64) -> bool {
        self.durable.values().any(|&i| i == inode)
            || self
                .pending
                .values()
                .flatten()
                .any(|c| c.0.iter().any(|(_, i)| *i == Some(inode)))
    }

    pub(super) fn record(&mut self, dir: &Path, change: DirChange) {
        for (path, inode) in &change.0 {
            match inode {
                Some(i) => self.live.insert(path.clone(), *i),
                None => self.live.remove(path),
            };
        }
        self.pending.entry(dir.to_owned()).or_default().push(change);
    }

    /// Forgets inodes no name, durable entry or pending change refers to.
    pub(super) fn collect_garbage(&mut self) {
        let mut keep: HashSet<u64> = self.live.values().copied().collect();
        keep.extend(self.durable.values().copied());
        for c in self.pending.values().flatten() {
            keep.extend(c.0.iter().filter_map(|(_, i)| *i));
        }
        self.inodes.retain(|i, _| keep.contains(i));
    }
}
