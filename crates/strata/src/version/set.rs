//! The version set: the current version, the counters the database
//! persists (next file number, last sequence, log number), and the manifest
//! that records every change (`docs/format/manifest.md`).
//!
//! The manifest is a record log (the write-ahead log format) whose records
//! are encoded [`VersionEdit`]s; replaying them from an empty version gives
//! the current state. CURRENT names the manifest to replay. Every manifest
//! Strata writes starts with a snapshot edit holding the full state, so a
//! recovery or a roll to a new manifest (when the current one grows past
//! [`MANIFEST_ROLL_BYTES`], or after a failed write) leaves the old manifest
//! unreferenced; deleting it is the obsolete-file collector's job.
//!
//! Thread safety: no internal locking. The database serializes every call
//! (LevelDB holds the DB mutex); versions handed out by
//! [`current`](VersionSet::current) are immutable and may be read anywhere.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::manifest_tail::{check_torn_tail, record_end};
use super::{Version, VersionBuilder, VersionEdit};
use crate::db::filename::{
    current_file_name, manifest_file_name, parse_file_name, set_current_file, FileType,
};
use crate::env::{read_file_to_vec, FileSystem};
use crate::error::{Error, Result};
use crate::key::{InternalKeyComparator, MAX_SEQUENCE_NUMBER};
use crate::wal::{LogReader, LogWriter, WalRecoveryMode};

/// Size past which the next edit starts a new manifest (with a snapshot of
/// the state) instead of appending, so replay time stays bounded.
pub const MANIFEST_ROLL_BYTES: u64 = 64 << 20;

/// Largest CURRENT file read; a manifest name is about 16 bytes.
const CURRENT_SIZE_BYTES_MAX: u64 = 4096;

/// File numbers on record must be below this, so handing out the next ones
/// cannot overflow; a larger one is corruption.
const FILE_NUMBER_LIMIT: u64 = 1 << 63;

/// The current version, the persisted counters, and the open manifest.
#[derive(Debug)]
pub struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    icmp: InternalKeyComparator,
    current: Arc<Version>,
    /// `None` in a read-only open: no edit can be recorded.
    manifest: Option<LogWriter>,
    manifest_file_number: u64,
    /// A write or sync of the manifest failed, so its tail is unknown: the
    /// next edit goes to a new manifest.
    manifest_failed: bool,
    manifest_roll_bytes: u64,
    next_file_number: u64,
    last_sequence: u64,
    log_number: u64,
    /// The merge operator name on record (empty for none; `None` in a
    /// database that never recorded one).
    merge_operator: Option<String>,
}

/// The state a manifest replay arrives at.
struct Replayed {
    version: Version,
    log_number: u64,
    next_file_number: u64,
    last_sequence: u64,
    merge_operator: Option<String>,
}

impl VersionSet {
    /// Creates the manifest of a new, empty database in `dir` (created if
    /// missing): `MANIFEST-000001` holding the comparator name, log number
    /// 0, next file number 2 and last sequence 0, synced, then named by
    /// CURRENT. Fails with `InvalidArgument` if CURRENT already exists.
    pub fn create_new(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        icmp: InternalKeyComparator,
    ) -> Result<VersionSet> {
        let current = current_file_name(dir);
        if fs.exists(&current) {
            return Err(Error::invalid_argument(format!(
                "{} exists: a database is already there",
                current.display()
            )));
        }
        fs.create_dir_all(dir)?;
        let manifest_file_number = 1;
        let next_file_number = 2;
        let mut edit = VersionEdit::new();
        edit.set_comparator_name(icmp.user_comparator().name());
        edit.set_log_number(0);
        edit.set_next_file_number(next_file_number);
        edit.set_last_sequence(0);
        let manifest = write_new_manifest(fs.as_ref(), dir, manifest_file_number, &[&edit])?;
        Ok(VersionSet {
            dir: dir.to_owned(),
            fs,
            icmp,
            current: Arc::new(Version::empty()),
            manifest: Some(manifest),
            manifest_file_number,
            manifest_failed: false,
            manifest_roll_bytes: MANIFEST_ROLL_BYTES,
            next_file_number,
            last_sequence: 0,
            log_number: 0,
            merge_operator: None,
        })
    }

    /// Recovers the state of the database in `dir`: reads CURRENT, replays
    /// the manifest it names, checks the comparator, then writes the state
    /// as a snapshot to a new manifest and points CURRENT at it.
    ///
    /// A torn last record (an edit whose write never completed, so never
    /// acknowledged: a truncated record or zero fill at the end) is
    /// dropped; any other damage, a bad checksum in the last block
    /// included, is `Corruption`. Errors:
    /// `NotFound` if CURRENT is missing; `Corruption` naming the file if
    /// CURRENT or the manifest is malformed or CURRENT names a missing
    /// manifest; `InvalidArgument` naming both comparators if the database
    /// was created with a different one.
    pub fn recover(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        icmp: InternalKeyComparator,
    ) -> Result<VersionSet> {
        let old_manifest = read_current(fs.as_ref(), dir)?;
        let replayed = replay(fs.as_ref(), dir, old_manifest, &icmp)?;
        let manifest_file_number = replayed.next_file_number;
        let next_file_number = manifest_file_number + 1;
        let snapshot = snapshot_edit(
            icmp.user_comparator().name(),
            replayed.merge_operator.as_deref(),
            &replayed.version,
            replayed.log_number,
            next_file_number,
            replayed.last_sequence,
        );
        let manifest = write_new_manifest(fs.as_ref(), dir, manifest_file_number, &[&snapshot])?;
        Ok(VersionSet {
            dir: dir.to_owned(),
            fs,
            icmp,
            current: Arc::new(replayed.version),
            manifest: Some(manifest),
            manifest_file_number,
            manifest_failed: false,
            manifest_roll_bytes: MANIFEST_ROLL_BYTES,
            next_file_number,
            last_sequence: replayed.last_sequence,
            log_number: replayed.log_number,
            merge_operator: replayed.merge_operator.clone(),
        })
    }

    /// Replays the manifest CURRENT names, writing nothing: the set of a
    /// read-only open, which can record no edit.
    pub fn recover_read_only(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        icmp: InternalKeyComparator,
    ) -> Result<VersionSet> {
        let manifest_file_number = read_current(fs.as_ref(), dir)?;
        let replayed = replay(fs.as_ref(), dir, manifest_file_number, &icmp)?;
        Ok(VersionSet {
            dir: dir.to_owned(),
            fs,
            icmp,
            current: Arc::new(replayed.version),
            manifest: None,
            manifest_file_number,
            manifest_failed: false,
            manifest_roll_bytes: MANIFEST_ROLL_BYTES,
            next_file_number: replayed.next_file_number,
            last_sequence: replayed.last_sequence,
            log_number: replayed.log_number,
            merge_operator: replayed.merge_operator.clone(),
        })
    }

    /// Records `edit` in the manifest and installs the version it makes.
    ///
    /// Fills in the edit's next file number and last sequence from the set,
    /// and its log number if unset. The edit must fit the current version
    /// (see [`VersionBuilder`]), else `Corruption` and nothing is written.
    /// The edit is appended as one record and the manifest synced before
    /// the new version is installed. If the write or sync fails, the error
    /// is returned and the version is not installed; whether the record
    /// reached the disk is then unknown until the database is reopened, so
    /// the caller should stop writing (RocksDB's background error) and must
    /// not delete any file the edit adds or removes. The next call starts a
    /// new manifest, so no record ever follows a failed one.
    pub fn log_and_apply(&mut self, edit: &mut VersionEdit) -> Result<()> {
        if let Some(name) = edit.comparator_name() {
            assert_eq!(name, self.icmp.user_comparator().name());
        }
        match edit.log_number() {
            Some(n) => assert!(
                n >= self.log_number && n < self.next_file_number,
                "log number {n} outside [{}, {})",
                self.log_number,
                self.next_file_number
            ),
            None => edit.set_log_number(self.log_number),
        }
        let Some(manifest_size) = self.manifest.as_ref().map(|m| m.file_size()) else {
            return Err(Error::NotSupported(
                "the database is open read-only: no version edit can be recorded".into(),
            ));
        };
        let roll = self.manifest_failed || manifest_size >= self.manifest_roll_bytes;
        let new_manifest = roll.then(|| self.new_file_number());
        edit.set_next_file_number(self.next_file_number);
        edit.set_last_sequence(self.last_sequence);
        for (_, f) in edit.new_files() {
            assert!(
                f.number < self.next_file_number,
                "file {} not allocated",
                f.number
            );
        }

        let manifest_number = new_manifest.unwrap_or(self.manifest_file_number);
        let manifest_name = manifest_file_name(&self.dir, manifest_number);
        let mut builder = VersionBuilder::new(self.icmp.clone(), &self.current);
        builder.apply(edit, &manifest_name.display().to_string(), manifest_size)?;
        let version = builder.build();

        let written = match new_manifest {
            Some(number) => self.switch_manifest(number, edit),
            None => self.append_to_manifest(edit),
        };
        if let Err(e) = written {
            self.manifest_failed = true;
            return Err(e);
        }
        self.current = Arc::new(version);
        self.log_number = edit.log_number().unwrap_or(self.log_number);
        if let Some(name) = edit.merge_operator_name() {
            self.merge_operator = Some(name.to_owned());
        }
        Ok(())
    }

    fn append_to_manifest(&mut self, edit: &VersionEdit) -> Result<()> {
        let mut record = Vec::new();
        edit.encode(&mut record);
        let manifest = self.manifest.as_mut().expect("checked by log_and_apply");
        manifest.add_record(&record)?;
        manifest.sync()
    }

    /// Writes a snapshot of the current state and then `edit` to manifest
    /// `number`, and points CURRENT at it.
    fn switch_manifest(&mut self, number: u64, edit: &VersionEdit) -> Result<()> {
        let snapshot = snapshot_edit(
            self.icmp.user_comparator().name(),
            self.merge_operator.as_deref(),
            &self.current,
            self.log_number,
            self.next_file_number,
            self.last_sequence,
        );
        let writer = write_new_manifest(self.fs.as_ref(), &self.dir, number, &[&snapshot, edit])?;
        self.manifest = Some(writer);
        self.manifest_file_number = number;
        self.manifest_failed = false;
        Ok(())
    }

    /// True after a manifest write failed and before a new manifest was
    /// written in full: the failed edit may or may not be on disk.
    pub fn manifest_failed(&self) -> bool {
        self.manifest_failed
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.current.clone()
    }

    /// Hands out a new file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Makes sure `number` is never handed out (a file found on disk, e.g.
    /// a log replayed at recovery).
    pub fn mark_file_number_used(&mut self, number: u64) {
        if self.next_file_number <= number {
            self.next_file_number = number + 1;
        }
    }

    /// The next file number [`new_file_number`](Self::new_file_number)
    /// will hand out.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    /// The merge operator name on record: empty for none, `None` if the
    /// database never recorded one.
    pub(crate) fn merge_operator(&self) -> Option<&str> {
        self.merge_operator.as_deref()
    }

    /// The last sequence number used by a write.
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// Advances the last sequence number (it never goes back). Persisted by
    /// the next [`log_and_apply`](Self::log_and_apply).
    pub fn set_last_sequence(&mut self, seq: u64) {
        assert!(
            seq >= self.last_sequence && seq <= MAX_SEQUENCE_NUMBER,
            "last sequence {seq} moves back from {} or exceeds 56 bits",
            self.last_sequence
        );
        self.last_sequence = seq;
    }

    /// The oldest write-ahead log still needed at recovery.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The number of the manifest being written.
    pub fn manifest_file_number(&self) -> u64 {
        self.manifest_file_number
    }

    /// Table numbers in the current version. The caller adds those of
    /// older versions still in use (see [`add_live_files`]).
    pub fn live_files(&self) -> HashSet<u64> {
        let mut live = HashSet::new();
        add_live_files(&self.current, &mut live);
        live
    }

    /// Makes the manifest roll after `bytes` (tests reach it cheaply).
    #[cfg(test)]
    pub(super) fn set_manifest_roll_bytes(&mut self, bytes: u64) {
        self.manifest_roll_bytes = bytes;
    }
}

/// Adds the table numbers of every file in `version` to `live`.
pub fn add_live_files(version: &Version, live: &mut HashSet<u64>) {
    live.extend(version.all_files().map(|f| f.number));
}

/// Writes, in another directory `dir`, manifest `number` holding `edit`
/// (a [`snapshot_edit`]) and a CURRENT naming it: the manifest of a
/// checkpoint. Synced.
pub(crate) fn write_checkpoint_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    edit: &VersionEdit,
) -> Result<()> {
    write_new_manifest(fs, dir, number, &[edit]).map(drop)
}

/// An edit that rebuilds the whole state from an empty version.
pub(crate) fn snapshot_edit(
    comparator_name: &str,
    merge_operator: Option<&str>,
    version: &Version,
    log_number: u64,
    next_file_number: u64,
    last_sequence: u64,
) -> VersionEdit {
    let mut edit = VersionEdit::new();
    edit.set_comparator_name(comparator_name);
    if let Some(name) = merge_operator {
        edit.set_merge_operator_name(name);
    }
    edit.set_log_number(log_number);
    edit.set_next_file_number(next_file_number);
    edit.set_last_sequence(last_sequence);
    for level in 0..super::NUM_LEVELS {
        for f in version.files(level) {
            edit.add_new_file(level, f.to_new_file());
        }
    }
    edit
}

/// Writes `edits` to a new manifest `number`, syncs it, and points CURRENT
/// at it. On failure the manifest file stays behind: CURRENT may already
/// name it (a failed directory sync), so only the obsolete-file collector,
/// which knows the live manifest, may delete it.
fn write_new_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    edits: &[&VersionEdit],
) -> Result<LogWriter> {
    let path = manifest_file_name(dir, number);
    let mut writer = LogWriter::new(fs.create(&path)?);
    let mut record = Vec::new();
    for edit in edits {
        record.clear();
        edit.encode(&mut record);
        writer.add_record(&record)?;
    }
    writer.sync()?;
    set_current_file(fs, dir, number)?;
    Ok(writer)
}

/// Reads CURRENT: the number of the manifest it names.
pub(crate) fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<u64> {
    let path = current_file_name(dir);
    let name = path.display().to_string();
    let size = match fs.file_size(&path) {
        Ok(size) => size,
        Err(e) if e.is_not_found() => {
            return Err(Error::NotFound(format!(
                "{name}: missing, so {} holds no database",
                dir.display()
            )))
        }
        Err(e) => return Err(e),
    };
    let malformed = |found: &[u8]| {
        let shown = &found[..found.len().min(64)];
        let what = format!(
            "expected \"MANIFEST-NNNNNN\\n\", found {:?} ({} bytes)",
            String::from_utf8_lossy(shown),
            found.len()
        );
        Error::corruption(name.clone(), 0, what)
    };
    if size > CURRENT_SIZE_BYTES_MAX {
        return Err(malformed(b""));
    }
    let bytes = read_file_to_vec(fs, &path)?;
    let manifest = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| text.strip_suffix('\n'))
        .and_then(parse_file_name);
    match manifest {
        Some((FileType::Manifest, number)) => Ok(number),
        _ => Err(malformed(&bytes)),
    }
}

/// What a replay has seen of the counters.
#[derive(Default)]
struct Counters {
    comparator: bool,
    merge_operator: Option<String>,
    log_number: Option<u64>,
    next_file_number: Option<u64>,
    last_sequence: Option<u64>,
}

/// Replays manifest `number` from an empty version.
fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    icmp: &InternalKeyComparator,
) -> Result<Replayed> {
    let path = manifest_file_name(dir, number);
    let name = path.display().to_string();
    let file = fs.open_sequential(&path).map_err(|e| {
        if !e.is_not_found() {
            return e;
        }
        let current = current_file_name(dir).display().to_string();
        Error::corruption(current, 0, format!("names {name}, which does not exist"))
    })?;
    let mode = WalRecoveryMode::TolerateCorruptedTailRecords;
    let mut reader = LogReader::new(file, name.clone(), mode);
    let mut builder = VersionBuilder::new(icmp.clone(), &Version::empty());
    let mut seen = Counters::default();
    let ours = icmp.user_comparator().name();
    let mut record = Vec::new();
    // The last record replayed and its offset, to find where the tail is.
    let mut last_record = Vec::new();
    let mut last_offset = None;
    // One pass per record; the reader consumes the file, so this ends.
    while reader.read_record(&mut record)? {
        let offset = reader.last_record_offset();
        let edit = VersionEdit::decode(&record, &name, offset)?;
        if let Some(theirs) = edit.comparator_name() {
            if theirs != ours {
                return Err(Error::invalid_argument(format!(
                    "{name}: the database uses comparator {theirs:?}, but was opened with {ours:?}"
                )));
            }
            seen.comparator = true;
        }
        builder.apply(&edit, &name, offset)?;
        if let Some(m) = edit.merge_operator_name() {
            seen.merge_operator = Some(m.to_owned());
        }
        seen.log_number = edit.log_number().or(seen.log_number);
        seen.next_file_number = edit.next_file_number().or(seen.next_file_number);
        seen.last_sequence = edit.last_sequence().or(seen.last_sequence);
        std::mem::swap(&mut record, &mut last_record);
        last_offset = Some(offset);
    }
    if reader.dropped_bytes() > 0 {
        let tail = match last_offset {
            Some(offset) => record_end(offset, &last_record)?,
            None => 0,
        };
        check_torn_tail(fs, &path, &name, tail)?;
    }
    seen.finish(builder.build(), &name, number)
}

impl Counters {
    /// Checks that the replay saw every counter and returns the state.
    /// `manifest_number` is the replayed manifest's own number.
    fn finish(self, version: Version, name: &str, manifest_number: u64) -> Result<Replayed> {
        let missing = |field: &str| Error::corruption(name, 0, format!("no {field} entry"));
        if !self.comparator {
            return Err(missing("comparator"));
        }
        let log_number = self.log_number.ok_or_else(|| missing("log number"))?;
        let next = self.next_file_number;
        let next = next.ok_or_else(|| missing("next file number"))?;
        let last_sequence = self.last_sequence.ok_or_else(|| missing("last sequence"))?;
        // Never hand out a number a file on record already has.
        let used = version.all_files().map(|f| f.number);
        let highest = used.chain([manifest_number, log_number]).max().unwrap_or(0);
        if highest.max(next) >= FILE_NUMBER_LIMIT {
            let what = format!("file number {} is not below 2^63", highest.max(next));
            return Err(Error::corruption(name, 0, what));
        }
        Ok(Replayed {
            version,
            log_number,
            next_file_number: next.max(highest + 1),
            last_sequence,
            merge_operator: self.merge_operator,
        })
    }
}
