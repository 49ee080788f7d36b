//! The expected state: what the database must hold, kept in files that
//! survive a `kill -9` of the process writing them.
//!
//! `expected` is a header and one 8-byte slot per key or group:
//!
//! ```text
//! header := magic:u64 "STRESSv1" | version:u32 (1) | keys:u32 | groups:u32
//!           | group_size:u32 | ops:u64 | reads_verified:u64
//!           | history_floor:u64 | reserved:u8[16]          (64 bytes, LE)
//! slot   := acked:u32 | pending:u32                       (LE)
//! ```
//!
//! `acked` is the [`KeyState`] of the last acknowledged write; `pending` is
//! the state of a write in flight (set before the write is issued, cleared
//! when it is acknowledged), or `u32::MAX`. A slot is one aligned 8-byte
//! `pwrite` of the page cache, so a killed process leaves either the old or
//! the new slot, never half of one. In memory each slot is one `AtomicU64`,
//! so readers see both halves together.
//!
//! For `--disable_wal` runs two more files give the order of writes:
//! `expected.history` (8-byte records `slot | (last_in_batch << 31) : u32,
//! state : u32`, in the order the writes were applied) and `expected.base`
//! (the slots when the history began). `history_floor` counts the records
//! a successful explicit flush has made durable.
//!
//! Whole files (`expected` when created, `expected.base`) are written under
//! a temporary name, synced and renamed, so a kill never leaves half of
//! one. A history exists iff its base does; the base is written last.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::value::KeyState;

const MAGIC: u64 = u64::from_le_bytes(*b"STRESSv1");
const VERSION: u32 = 1;
const HEADER_BYTES: u64 = 64;
const OPS_OFFSET: u64 = 24;
const READS_OFFSET: u64 = 32;
const FLOOR_OFFSET: u64 = 40;
/// `pending` when no write is in flight.
const NO_PENDING: u32 = u32::MAX;
/// Flags a history record that ends a batch.
const LAST_IN_BATCH: u32 = 1 << 31;

/// One write of a `--disable_wal` history: slot, new state, and whether it
/// ends its batch.
pub type HistoryRecord = (u32, KeyState, bool);

/// A slot: the acknowledged state and the state of a write in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// State after the last acknowledged write.
    pub acked: KeyState,
    /// State a write in flight will make, if one is.
    pub pending: Option<KeyState>,
}

impl Slot {
    fn pack(self) -> u64 {
        let pending = self.pending.map_or(NO_PENDING, |s| s.0);
        u64::from(self.acked.0) | u64::from(pending) << 32
    }

    fn unpack(v: u64) -> Slot {
        let pending = (v >> 32) as u32;
        Slot {
            acked: KeyState(v as u32),
            pending: (pending != NO_PENDING).then_some(KeyState(pending)),
        }
    }
}

/// The shape of the key space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Plain keys.
    pub keys: u32,
    /// Groups of keys written together.
    pub groups: u32,
    /// Members per group.
    pub group_size: u32,
}

impl Shape {
    /// Slots: one per plain key and one per group.
    pub fn slots(&self) -> u32 {
        self.keys + self.groups
    }

    /// Checks that the key names can express the shape (`k` + 8 digits,
    /// `g` + 6 digits + `/` + 2 digits) and that it has at least one key,
    /// which also keeps [`slots`](Self::slots) far from overflowing.
    pub fn check(&self) -> Result<(), String> {
        if !(1..100_000_000).contains(&self.keys)
            || self.groups >= 1_000_000
            || !(1..=99).contains(&self.group_size)
        {
            return Err(format!(
                "bad key space {self:?}: keys 1..10^8, groups below 10^6, group size 1..=99"
            ));
        }
        Ok(())
    }
}

/// The expected-state file, open for reading and updating.
#[derive(Debug)]
pub struct ExpectedState {
    path: PathBuf,
    file: File,
    shape: Shape,
    slots: Vec<AtomicU64>,
}

fn io_context(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("{what} {}: {e}", path.display())
}

impl ExpectedState {
    /// Opens `path`, creating it (every slot never written) if missing.
    /// Fails if it exists with another shape.
    pub fn open_or_create(path: &Path, shape: Shape) -> Result<ExpectedState, String> {
        if !path.exists() {
            Self::create(path, shape)?;
        }
        Self::open_existing(path, shape)
    }

    /// Writes a new file of `shape` at `path`: whole under a temporary name,
    /// synced, then renamed, so that a kill leaves either no file or a
    /// complete one (a half-written file would fail every later open).
    fn create(path: &Path, shape: Shape) -> Result<(), String> {
        shape.check()?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_context("create", dir, e))?;
        }
        let mut bytes = vec![0u8; HEADER_BYTES as usize];
        bytes[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        bytes[8..12].copy_from_slice(&VERSION.to_le_bytes());
        bytes[12..16].copy_from_slice(&shape.keys.to_le_bytes());
        bytes[16..20].copy_from_slice(&shape.groups.to_le_bytes());
        bytes[20..24].copy_from_slice(&shape.group_size.to_le_bytes());
        let empty = Slot {
            acked: KeyState::INITIAL,
            pending: None,
        };
        for _ in 0..shape.slots() {
            bytes.extend_from_slice(&empty.pack().to_le_bytes());
        }
        write_atomically(path, &bytes)
    }

    /// Opens the existing file at `path` and checks that it describes
    /// `shape`. A missing file is an error: `verify` must not make up an
    /// empty expected state for a database that has one elsewhere.
    pub fn open_existing(path: &Path, shape: Shape) -> Result<ExpectedState, String> {
        if !path.exists() {
            return Err(format!(
                "{} does not exist: pass the --expected file of the runs that wrote the database",
                path.display()
            ));
        }
        let state = Self::open(path)?;
        if state.shape != shape {
            return Err(format!(
                "{} holds {:?}, not {shape:?}: remove it or pass the same --keys/--groups/--group_size",
                path.display(),
                state.shape
            ));
        }
        Ok(state)
    }

    /// Opens an existing expected-state file.
    pub fn open(path: &Path) -> Result<ExpectedState, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_context("open", path, e))?;
        let mut bytes = Vec::new();
        (&file)
            .read_to_end(&mut bytes)
            .map_err(|e| io_context("read", path, e))?;
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        if bytes.len() < HEADER_BYTES as usize
            || u64::from_le_bytes(bytes[0..8].try_into().unwrap()) != MAGIC
            || u32_at(8) != VERSION
        {
            return Err(format!("{} is not an expected-state file", path.display()));
        }
        let shape = Shape {
            keys: u32_at(12),
            groups: u32_at(16),
            group_size: u32_at(20),
        };
        shape
            .check()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let want = HEADER_BYTES as usize + 8 * shape.slots() as usize;
        if bytes.len() != want {
            return Err(format!(
                "{}: {} bytes, expected {want} for {shape:?}",
                path.display(),
                bytes.len()
            ));
        }
        let slots = bytes[HEADER_BYTES as usize..]
            .chunks_exact(8)
            .map(|c| AtomicU64::new(u64::from_le_bytes(c.try_into().unwrap())))
            .collect();
        Ok(ExpectedState {
            path: path.to_owned(),
            file,
            shape,
            slots,
        })
    }

    /// The key space this file describes.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The current contents of slot `slot`.
    pub fn get(&self, slot: u32) -> Slot {
        Slot::unpack(self.slots[slot as usize].load(Ordering::SeqCst))
    }

    /// Replaces slot `slot`, in memory and in the file. Only the writer
    /// holding the slot's lock calls this.
    pub fn set(&self, slot: u32, value: Slot) {
        let packed = value.pack();
        self.slots[slot as usize].store(packed, Ordering::SeqCst);
        let offset = HEADER_BYTES + 8 * u64::from(slot);
        self.file
            .write_all_at(&packed.to_le_bytes(), offset)
            .unwrap_or_else(|e| panic!("{}", io_context("write", &self.path, e)));
    }

    /// Marks a write in flight: `acked` stays, `pending` becomes `next`.
    pub fn begin_write(&self, slot: u32, next: KeyState) {
        let acked = self.get(slot).acked;
        self.set(
            slot,
            Slot {
                acked,
                pending: Some(next),
            },
        );
    }

    /// Acknowledges the write in flight.
    pub fn ack_write(&self, slot: u32) {
        let s = self.get(slot);
        let acked = s.pending.expect("a write in flight to acknowledge");
        self.set(
            slot,
            Slot {
                acked,
                pending: None,
            },
        );
    }

    fn read_u64(&self, offset: u64) -> u64 {
        let mut b = [0u8; 8];
        self.file
            .read_exact_at(&mut b, offset)
            .unwrap_or_else(|e| panic!("{}", io_context("read", &self.path, e)));
        u64::from_le_bytes(b)
    }

    fn write_u64(&self, offset: u64, v: u64) {
        self.file
            .write_all_at(&v.to_le_bytes(), offset)
            .unwrap_or_else(|e| panic!("{}", io_context("write", &self.path, e)));
    }

    /// Operations run and reads verified, over every run so far.
    pub fn counters(&self) -> (u64, u64) {
        (self.read_u64(OPS_OFFSET), self.read_u64(READS_OFFSET))
    }

    /// Stores the counters.
    pub fn set_counters(&self, ops: u64, reads_verified: u64) {
        self.write_u64(OPS_OFFSET, ops);
        self.write_u64(READS_OFFSET, reads_verified);
    }

    /// History records made durable by an explicit flush.
    pub fn history_floor(&self) -> u64 {
        self.read_u64(FLOOR_OFFSET)
    }

    /// Stores the history floor.
    pub fn set_history_floor(&self, floor: u64) {
        self.write_u64(FLOOR_OFFSET, floor);
    }

    fn history_path(&self) -> PathBuf {
        side_file(&self.path, HISTORY)
    }

    fn base_path(&self) -> PathBuf {
        side_file(&self.path, BASE)
    }

    /// Starts a new history: the slots now become its base.
    ///
    /// Safe against a kill at any point, before any write of the run is
    /// issued: the floor and an empty history come first, and the base
    /// appears last, whole, by a rename. Until it does there is no history
    /// (the base's absence means none), so `verify` checks the slots, which
    /// no write has changed yet.
    pub fn start_history(&self) -> Result<History, String> {
        let base_path = self.base_path();
        if self.has_history() {
            // Starting another would lose it.
            return Err(format!(
                "{} holds a history `verify` has not folded in: run `verify` first",
                base_path.display()
            ));
        }
        self.set_history_floor(0);
        let path = self.history_path();
        let file = File::create(&path).map_err(|e| io_context("create", &path, e))?;
        let base: Vec<u8> = (0..self.shape.slots())
            .flat_map(|s| self.get(s).acked.0.to_le_bytes())
            .collect();
        write_atomically(&base_path, &base)?;
        Ok(History {
            path,
            file,
            records: 0,
        })
    }

    /// Whether a history was started and not yet folded in by `verify`
    /// (its base exists).
    pub fn has_history(&self) -> bool {
        self.base_path().exists()
    }

    /// The base and the records of the history, if one was started.
    #[allow(clippy::type_complexity)]
    pub fn read_history(
        &self,
    ) -> Result<Option<(Vec<KeyState>, Vec<(u32, KeyState, bool)>)>, String> {
        let (base_path, path) = (self.base_path(), self.history_path());
        if !self.has_history() {
            return Ok(None);
        }
        let base = std::fs::read(&base_path).map_err(|e| io_context("read", &base_path, e))?;
        let bytes = std::fs::read(&path).map_err(|e| io_context("read", &path, e))?;
        let base: Vec<KeyState> = base
            .chunks_exact(4)
            .map(|c| KeyState(u32::from_le_bytes(c.try_into().unwrap())))
            .collect();
        if base.len() != self.shape.slots() as usize {
            return Err(format!("{} has the wrong size", base_path.display()));
        }
        // A record torn by the kill (the file grows 8 bytes at a time) is
        // ignored: its write was never issued.
        let slots = self.shape.slots();
        let records = bytes
            .chunks_exact(8)
            .map(|c| {
                let slot = u32::from_le_bytes(c[0..4].try_into().unwrap());
                let state = KeyState(u32::from_le_bytes(c[4..8].try_into().unwrap()));
                match slot & !LAST_IN_BATCH {
                    s if s < slots => Ok((s, state, slot & LAST_IN_BATCH != 0)),
                    s => Err(format!(
                        "{} names slot {s}; the key space has {slots}",
                        path.display()
                    )),
                }
            })
            .collect::<Result<_, String>>()?;
        Ok(Some((base, records)))
    }

    /// Forgets the history (after verification folded it into the slots).
    pub fn clear_history(&self) -> Result<(), String> {
        for p in [self.base_path(), self.history_path()] {
            if p.exists() {
                std::fs::remove_file(&p).map_err(|e| io_context("remove", &p, e))?;
            }
        }
        self.set_history_floor(0);
        Ok(())
    }
}

/// Removes the expected-state file `path` and every file kept beside it
/// (history, base, and their temporary names), so a crash test starts
/// afresh. Missing files are fine.
pub fn remove_all(path: &Path) {
    let _ = std::fs::remove_file(path);
    for suffix in [HISTORY, BASE, TMP] {
        let side = side_file(path, suffix);
        let _ = std::fs::remove_file(side_file(&side, TMP));
        let _ = std::fs::remove_file(side);
    }
}

/// Suffixes of the files beside the expected-state file.
const HISTORY: &str = "history";
const BASE: &str = "base";
const TMP: &str = "tmp";

/// The file `<path>.<suffix>` beside the expected-state file `path`
/// (appended, not an extension replaced: `--expected=x.base` must not
/// name its own base file).
fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

/// Writes `bytes` to `path` through a synced temporary file and a rename,
/// then syncs the directory: after a kill or a power cut `path` holds the
/// old contents (or nothing) or all of `bytes`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let tmp = side_file(path, TMP);
    let file = File::create(&tmp).map_err(|e| io_context("create", &tmp, e))?;
    file.write_all_at(bytes, 0)
        .map_err(|e| io_context("write", &tmp, e))?;
    file.sync_all().map_err(|e| io_context("sync", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_context("rename", &tmp, e))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_context("sync", dir, e))
}

/// The write order of a `--disable_wal` run.
#[derive(Debug)]
pub struct History {
    path: PathBuf,
    file: File,
    records: u64,
}

impl History {
    /// Appends the records of one batch, before the batch is issued.
    pub fn append_batch(&mut self, writes: &[(u32, KeyState)]) {
        let mut bytes = Vec::with_capacity(8 * writes.len());
        for (i, (slot, state)) in writes.iter().enumerate() {
            let flag = if i + 1 == writes.len() {
                LAST_IN_BATCH
            } else {
                0
            };
            bytes.extend_from_slice(&(slot | flag).to_le_bytes());
            bytes.extend_from_slice(&state.0.to_le_bytes());
        }
        self.file
            .write_all_at(&bytes, 8 * self.records)
            .unwrap_or_else(|e| panic!("{}", io_context("write", &self.path, e)));
        self.records += writes.len() as u64;
    }

    /// Records appended so far.
    pub fn len(&self) -> u64 {
        self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_the_key_names_cannot_express_are_refused() {
        let ok = Shape {
            keys: 10,
            groups: 2,
            group_size: 3,
        };
        assert!(ok.check().is_ok());
        for bad in [
            Shape { keys: 0, ..ok },
            Shape {
                keys: 100_000_000,
                ..ok
            },
            Shape {
                keys: u32::MAX,
                groups: u32::MAX,
                ..ok
            },
            Shape {
                groups: 1_000_000,
                ..ok
            },
            Shape {
                group_size: 0,
                ..ok
            },
            Shape {
                group_size: 100,
                ..ok
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }

    fn scratch_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("strata-expected-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    const SHAPE: Shape = Shape {
        keys: 3,
        groups: 1,
        group_size: 2,
    };

    #[test]
    fn a_file_half_written_by_a_killed_create_is_never_the_state() {
        let dir = scratch_dir("create");
        let path = dir.join("state");
        // What a kill inside `create` can leave: a partial temporary file.
        std::fs::write(dir.join("state.tmp"), b"STRESS").unwrap();
        let state = ExpectedState::open_or_create(&path, SHAPE).unwrap();
        assert_eq!(
            state.get(0),
            Slot {
                acked: KeyState::INITIAL,
                pending: None
            }
        );
        assert!(
            !dir.join("state.tmp").exists(),
            "the rename consumed the temporary file"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn remove_all_leaves_no_file_of_the_state_behind() {
        let dir = scratch_dir("remove");
        let path = dir.join("state");
        let state = ExpectedState::open_or_create(&path, SHAPE).unwrap();
        drop(state.start_history().unwrap());
        for leftover in ["state.tmp", "state.base.tmp", "state.history.tmp"] {
            std::fs::write(dir.join(leftover), b"x").unwrap();
        }
        drop(state);
        remove_all(&path);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn verify_refuses_a_missing_file() {
        let dir = scratch_dir("missing");
        let err = ExpectedState::open_existing(&dir.join("state"), SHAPE).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
        assert!(!dir.join("state").exists(), "nothing made up");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_history_starts_whole_or_not_at_all() {
        let dir = scratch_dir("history");
        let state = ExpectedState::open_or_create(&dir.join("state"), SHAPE).unwrap();
        state.set(
            1,
            Slot {
                acked: KeyState(7),
                pending: None,
            },
        );
        // A kill after the empty history was created and before the base
        // was renamed into place: no history, the slots stand.
        std::fs::write(state.history_path(), b"").unwrap();
        std::fs::write(dir.join("state.base.tmp"), b"\x01").unwrap();
        assert!(!state.has_history());
        assert_eq!(state.read_history().unwrap(), None);
        // A start that fails after the empty history (here: it cannot be
        // created) leaves no history: the base comes last.
        std::fs::remove_file(state.history_path()).unwrap();
        std::fs::create_dir(state.history_path()).unwrap();
        assert!(state.start_history().is_err());
        assert!(!state.has_history(), "a base without its history");
        std::fs::remove_dir(state.history_path()).unwrap();
        // A complete start.
        let mut history = state.start_history().unwrap();
        history.append_batch(&[(1, KeyState(8))]);
        let (base, records) = state.read_history().unwrap().unwrap();
        assert_eq!(base[1], KeyState(7));
        assert_eq!(records, [(1, KeyState(8), true)]);
        // A second start would drop that history: refused until verify
        // folds it in and clears it.
        let err = state.start_history().unwrap_err();
        assert!(err.contains("run `verify` first"), "{err}");
        state.clear_history().unwrap();
        assert!(state.start_history().is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_history_record_outside_the_key_space_is_an_error() {
        let dir = std::env::temp_dir().join(format!("strata-expected-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let shape = Shape {
            keys: 3,
            groups: 1,
            group_size: 2,
        };
        let state = ExpectedState::open_or_create(&path, shape).unwrap();
        drop(state.start_history().unwrap());
        let mut record = 99u32.to_le_bytes().to_vec();
        record.extend_from_slice(&0u32.to_le_bytes());
        std::fs::write(state.history_path(), &record).unwrap();
        let err = state.read_history().unwrap_err();
        assert!(err.contains("slot 99"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
