//! What can fail and how often: operations, rules, counters, and the
//! seeded generator behind random faults.

use std::path::Path;

/// An operation that a [`FaultRule`] can make fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileOp {
    /// `open_append`, `open_sequential`, `open_random_access`.
    Open,
    /// `create`.
    Create,
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::sync`.
    Sync,
    /// `rename` (the rule's path filter sees both names).
    Rename,
    /// `SequentialFile::read`, `RandomAccessFile::read_exact_at`.
    Read,
    /// `remove`.
    Remove,
    /// `sync_dir`.
    SyncDir,
}

impl FileOp {
    /// Every operation, in the order of [`FaultStats`]'s arrays.
    pub const ALL: [FileOp; 8] = [
        FileOp::Open,
        FileOp::Create,
        FileOp::Append,
        FileOp::Sync,
        FileOp::Rename,
        FileOp::Read,
        FileOp::Remove,
        FileOp::SyncDir,
    ];

    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// Operations that change the file system (counted by `crash_after_ops`).
    pub(super) fn is_mutation(self) -> bool {
        !matches!(self, FileOp::Open | FileOp::Read)
    }

    /// A short lower-case name, as used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            FileOp::Open => "open",
            FileOp::Create => "create",
            FileOp::Append => "append",
            FileOp::Sync => "sync",
            FileOp::Rename => "rename",
            FileOp::Read => "read",
            FileOp::Remove => "remove",
            FileOp::SyncDir => "sync_dir",
        }
    }
}

/// Which calls fail. Built with [`FaultRule::new`] and the chained setters;
/// by default every matching call fails.
#[derive(Debug, Clone)]
pub struct FaultRule {
    pub(super) ops: Vec<FileOp>,
    pub(super) path_contains: Option<String>,
    pub(super) after_calls: u64,
    pub(super) times_max: Option<u64>,
    pub(super) one_in: u64,
    /// Matching calls seen so far.
    pub(super) seen: u64,
    /// Faults injected so far.
    pub(super) fired: u64,
    /// The faults are "no space left on device" (ENOSPC), not a generic
    /// I/O error.
    pub(super) no_space: bool,
}

impl FaultRule {
    /// A rule for calls of any of `ops`.
    pub fn new(ops: &[FileOp]) -> FaultRule {
        FaultRule {
            ops: ops.to_vec(),
            path_contains: None,
            after_calls: 0,
            times_max: None,
            one_in: 1,
            seen: 0,
            fired: 0,
            no_space: false,
        }
    }

    /// Only calls on a path whose display form contains `part` (e.g.
    /// `".sst"`, `"MANIFEST"`).
    pub fn path_contains(mut self, part: impl Into<String>) -> FaultRule {
        self.path_contains = Some(part.into());
        self
    }

    /// The first `n` matching calls succeed.
    pub fn after(mut self, n: u64) -> FaultRule {
        self.after_calls = n;
        self
    }

    /// At most `n` faults, then the rule is spent.
    pub fn times(mut self, n: u64) -> FaultRule {
        self.times_max = Some(n);
        self
    }

    /// The calls fail as a full disk fails them: ENOSPC, which
    /// [`Error::is_no_space`](crate::Error::is_no_space) recognizes.
    pub fn no_space(mut self) -> FaultRule {
        self.no_space = true;
        self
    }

    /// Each eligible call fails with probability 1/`n` (drawn from the file
    /// system's seeded generator); 1 means always.
    pub fn one_in(mut self, n: u64) -> FaultRule {
        self.one_in = n.max(1);
        self
    }

    pub(super) fn matches(&self, op: FileOp, paths: &[&Path]) -> bool {
        self.ops.contains(&op)
            && self.path_contains.as_ref().is_none_or(|part| {
                paths
                    .iter()
                    .any(|p| p.to_string_lossy().contains(part.as_str()))
            })
    }
}

/// What a crash keeps of the unsynced state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrashMode {
    /// Nothing: files are cut to their synced length and directories get
    /// exactly their durable entries back.
    #[default]
    DropUnsynced,
    /// A random prefix of each file's unsynced bytes and of each
    /// directory's unsynced entry changes.
    KeepRandomPrefix,
}

/// Calls seen and faults injected, per [`FileOp`] (indexed as
/// [`FileOp::ALL`]), and crashes simulated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Calls of each operation, failed ones included.
    pub calls: [u64; 8],
    /// Faults injected into each operation by rules.
    pub injected: [u64; 8],
    /// Crashes simulated (by `crash` or `crash_after_ops`).
    pub crashes: u64,
}

impl FaultStats {
    /// Calls of `op`.
    pub fn calls(&self, op: FileOp) -> u64 {
        self.calls[op.index()]
    }
    /// Faults injected into `op`.
    pub fn injected(&self, op: FileOp) -> u64 {
        self.injected[op.index()]
    }
    /// Faults injected into all operations.
    pub fn total_injected(&self) -> u64 {
        self.injected.iter().sum()
    }
}

/// A small seeded generator (SplitMix64): no dependency, same sequence on
/// every platform.
#[derive(Debug, Clone)]
pub(super) struct SplitMix64(pub(super) u64);

impl SplitMix64 {
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    pub(super) fn up_to(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            Some(n) => self.next_u64() % n,
            None => self.next_u64(),
        }
    }
}
