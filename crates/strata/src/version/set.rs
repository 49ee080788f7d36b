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

use std::collections::{BTreeMap, HashSet};
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

/// One column family's part of the version set: its name, comparator,
/// current version, and the persisted values that are its own.
#[derive(Debug)]
pub struct CfVersions {
    pub(crate) name: String,
    icmp: InternalKeyComparator,
    current: Arc<Version>,
    /// The oldest write-ahead log that may hold writes of this family not
    /// yet in its tables.
    log_number: u64,
    /// The merge operator name on record (empty for none; `None` in a
    /// family that never recorded one).
    merge_operator: Option<String>,
}

/// The id of the default column family, which always exists.
pub const DEFAULT_COLUMN_FAMILY_ID: u32 = 0;

/// The name of the default column family.
pub const DEFAULT_COLUMN_FAMILY_NAME: &str = "default";

/// The column families on record and their current versions, the
/// persisted counters, and the open manifest.
#[derive(Debug)]
pub struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    /// Live column families by id; the default (0) is always there.
    cfs: BTreeMap<u32, CfVersions>,
    /// The largest column family id ever handed out.
    max_column_family: u32,
    /// Families on record that this (read-only) open left out.
    unopened: Vec<String>,
    /// `None` in a read-only open: no edit can be recorded.
    manifest: Option<LogWriter>,
    manifest_file_number: u64,
    /// A write or sync of the manifest failed, so its tail is unknown: the
    /// next edit goes to a new manifest.
    manifest_failed: bool,
    manifest_roll_bytes: u64,
    next_file_number: u64,
    last_sequence: u64,
}

/// The state a manifest replay arrives at.
struct Replayed {
    cfs: BTreeMap<u32, CfVersions>,
    /// Every live family on record, opened or not.
    names: Vec<(u32, String)>,
    max_column_family: u32,
    next_file_number: u64,
    last_sequence: u64,
}

/// The default family alone, with `icmp`.
fn default_only(icmp: InternalKeyComparator, log_number: u64) -> BTreeMap<u32, CfVersions> {
    BTreeMap::from([(
        DEFAULT_COLUMN_FAMILY_ID,
        CfVersions {
            name: DEFAULT_COLUMN_FAMILY_NAME.to_owned(),
            icmp,
            current: Arc::new(Version::empty()),
            log_number,
            merge_operator: None,
        },
    )])
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
            cfs: default_only(icmp, 0),
            max_column_family: 0,
            unopened: Vec::new(),
            manifest: Some(manifest),
            manifest_file_number,
            manifest_failed: false,
            manifest_roll_bytes: MANIFEST_ROLL_BYTES,
            next_file_number,
            last_sequence: 0,
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
    #[cfg(test)]
    pub fn recover(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        icmp: InternalKeyComparator,
    ) -> Result<VersionSet> {
        let opened = [(DEFAULT_COLUMN_FAMILY_NAME.to_owned(), icmp)];
        Self::recover_cfs(fs, dir, &opened, false)
    }

    /// [`recover`](Self::recover) for the column families `opened` (name
    /// and comparator; the default family among them). Every family on
    /// record must be opened (`InvalidArgument` naming those that are
    /// not, as RocksDB); families opened but not on record are left out,
    /// for the caller to create, and are `InvalidArgument` without
    /// `create_missing` (checked before anything is written).
    pub(crate) fn recover_cfs(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opened: &[(String, InternalKeyComparator)],
        create_missing: bool,
    ) -> Result<VersionSet> {
        let old_manifest = read_current(fs.as_ref(), dir)?;
        let replayed = replay(fs.as_ref(), dir, old_manifest, opened, true)?;
        let missing: Vec<&str> = opened
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| !replayed.names.iter().any(|(_, r)| r == n))
            .collect();
        if !missing.is_empty() && !create_missing {
            return Err(missing_families(&missing));
        }
        let manifest_file_number = replayed.next_file_number;
        let next_file_number = manifest_file_number + 1;
        let mut set = VersionSet {
            dir: dir.to_owned(),
            fs,
            cfs: replayed.cfs,
            max_column_family: replayed.max_column_family,
            unopened: Vec::new(),
            manifest: None,
            manifest_file_number,
            manifest_failed: false,
            manifest_roll_bytes: MANIFEST_ROLL_BYTES,
            next_file_number,
            last_sequence: replayed.last_sequence,
        };
        let snapshot = set.snapshot_edits();
        let refs: Vec<&VersionEdit> = snapshot.iter().collect();
        let manifest = write_new_manifest(set.fs.as_ref(), dir, manifest_file_number, &refs)?;
        set.manifest = Some(manifest);
        Ok(set)
    }

    /// Replays the manifest CURRENT names, writing nothing: the set of a
    /// read-only open, which can record no edit. Families on record but
    /// not in `opened` are left out (a read-only open may open a subset,
    /// as RocksDB's).
    pub(crate) fn recover_read_only(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        opened: &[(String, InternalKeyComparator)],
    ) -> Result<VersionSet> {
        let manifest_file_number = read_current(fs.as_ref(), dir)?;
        let replayed = replay(fs.as_ref(), dir, manifest_file_number, opened, false)?;
        let unopened = replayed
            .names
            .iter()
            .filter(|(id, _)| !replayed.cfs.contains_key(id))
            .map(|(_, n)| n.clone())
            .collect();
        Ok(VersionSet {
            dir: dir.to_owned(),
            fs,
            cfs: replayed.cfs,
            max_column_family: replayed.max_column_family,
            unopened,
            manifest: None,
            manifest_file_number,
            manifest_failed: false,
            manifest_roll_bytes: MANIFEST_ROLL_BYTES,
            next_file_number: replayed.next_file_number,
            last_sequence: replayed.last_sequence,
        })
    }

    /// The names of the live column families of the database in `dir`,
    /// default first (`rocksdb::DB::list_cf`), read from its manifest.
    pub(crate) fn list_column_families(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<String>> {
        let number = read_current(fs, dir)?;
        let replayed = replay(fs, dir, number, &[], false)?;
        let mut names: Vec<(u32, String)> = replayed.names;
        names.sort();
        Ok(names.into_iter().map(|(_, n)| n).collect())
    }

    /// Records `edit` in the manifest and installs the version it makes
    /// for the edit's column family.
    ///
    /// Fills in the edit's next file number and last sequence from the set,
    /// and its log number (the family's) if unset. The edit must fit the
    /// family's current version (see [`VersionBuilder`]), else `Corruption`
    /// and nothing is written; an edit for a family not on record is
    /// `InvalidArgument`. The edit is appended as one record and the
    /// manifest synced before the new version is installed. If the write or
    /// sync fails, the error is returned and the version is not installed;
    /// whether the record reached the disk is then unknown until the
    /// database is reopened, so the caller should stop writing (RocksDB's
    /// background error) and must not delete any file the edit adds or
    /// removes. The next call starts a new manifest, so no record ever
    /// follows a failed one. An edit that drops its family removes it from
    /// the set once recorded.
    pub fn log_and_apply(&mut self, edit: &mut VersionEdit) -> Result<()> {
        self.log_and_apply_with(edit, None)
    }

    /// Records the creation of column family `name` with comparator `icmp`
    /// and returns its id. Its log number is `log_number` (the log that
    /// receives writes now: it can hold no write of the family before).
    pub(crate) fn create_column_family(
        &mut self,
        name: &str,
        icmp: InternalKeyComparator,
        merge_operator: Option<&str>,
        log_number: u64,
    ) -> Result<u32> {
        if self.cfs.values().any(|cf| cf.name == name) {
            return Err(Error::invalid_argument(format!(
                "column family {name:?} already exists"
            )));
        }
        let id = self.max_column_family + 1;
        let mut edit = VersionEdit::new();
        edit.set_column_family(id);
        edit.add_column_family(name);
        edit.set_comparator_name(icmp.user_comparator().name());
        edit.set_max_column_family(id);
        edit.set_log_number(log_number);
        if let Some(op) = merge_operator {
            edit.set_merge_operator_name(op);
        }
        self.log_and_apply_with(&mut edit, Some(icmp))?;
        Ok(id)
    }

    /// Records new log numbers for several families at once: one record
    /// per family, one sync for all (each edit moves no file, so each is
    /// valid alone, and a crash between them loses nothing: a family whose
    /// record did not land replays logs it did not need). Errors as
    /// [`log_and_apply`](Self::log_and_apply).
    pub(crate) fn record_log_numbers(&mut self, numbers: &[(u32, u64)]) -> Result<()> {
        let Some(manifest_size) = self.manifest.as_ref().map(|m| m.file_size()) else {
            return Err(Error::NotSupported(
                "the database is open read-only: no version edit can be recorded".into(),
            ));
        };
        if numbers.len() < 2 || self.manifest_failed || manifest_size >= self.manifest_roll_bytes {
            for &(id, log) in numbers {
                let mut edit = VersionEdit::new();
                edit.set_column_family(id);
                edit.set_log_number(log);
                self.log_and_apply(&mut edit)?;
            }
            return Ok(());
        }
        let (next_file_number, last_sequence) = (self.next_file_number, self.last_sequence);
        let mut record = Vec::new();
        let mut written = Ok(());
        for &(id, log) in numbers {
            let cf = self.cfs.get(&id).expect("a live family");
            assert!(
                log >= cf.log_number && log < next_file_number,
                "log number {log} outside [{}, {next_file_number})",
                cf.log_number,
            );
            let mut edit = VersionEdit::new();
            edit.set_column_family(id);
            edit.set_log_number(log);
            edit.set_next_file_number(next_file_number);
            edit.set_last_sequence(last_sequence);
            record.clear();
            edit.encode(&mut record);
            let manifest = self.manifest.as_mut().expect("checked above");
            written = manifest.add_record(&record);
            if written.is_err() {
                break;
            }
        }
        let manifest = self.manifest.as_mut().expect("checked above");
        if let Err(e) = written.and_then(|()| manifest.sync()) {
            self.manifest_failed = true;
            return Err(e);
        }
        for &(id, log) in numbers {
            self.cfs.get_mut(&id).expect("a live family").log_number = log;
        }
        Ok(())
    }

    fn log_and_apply_with(
        &mut self,
        edit: &mut VersionEdit,
        new_cf: Option<InternalKeyComparator>,
    ) -> Result<()> {
        let id = edit.column_family();
        let Some(manifest_size) = self.manifest.as_ref().map(|m| m.file_size()) else {
            return Err(Error::NotSupported(
                "the database is open read-only: no version edit can be recorded".into(),
            ));
        };
        let adding = edit.column_family_add().is_some();
        assert_eq!(
            adding,
            new_cf.is_some(),
            "a family is added only with its comparator"
        );
        if let Some(icmp) = new_cf {
            assert!(
                !self.cfs.contains_key(&id),
                "column family {id} added twice"
            );
            let name = edit.column_family_add().expect("checked above").to_owned();
            self.cfs.insert(
                id,
                CfVersions {
                    name,
                    icmp,
                    current: Arc::new(Version::empty()),
                    log_number: 0,
                    merge_operator: None,
                },
            );
        }
        let result = self.write_edit(edit, manifest_size);
        if result.is_err() && adding {
            self.cfs.remove(&id);
        }
        if result.is_ok() {
            if let Some(m) = edit.max_column_family() {
                self.max_column_family = self.max_column_family.max(m);
            }
            if edit.is_column_family_drop() {
                self.cfs.remove(&id);
            }
        }
        result
    }

    /// Checks `edit` against its family, writes it and installs its version.
    fn write_edit(&mut self, edit: &mut VersionEdit, manifest_size: u64) -> Result<()> {
        let id = edit.column_family();
        let next_file_number = self.next_file_number;
        let Some(cf) = self.cfs.get(&id) else {
            return Err(Error::invalid_argument(format!(
                "column family {id} is not in the database (dropped?)"
            )));
        };
        if let Some(name) = edit.comparator_name() {
            assert_eq!(name, cf.icmp.user_comparator().name());
        }
        match edit.log_number() {
            Some(n) => assert!(
                n >= cf.log_number && n < next_file_number,
                "log number {n} outside [{}, {next_file_number})",
                cf.log_number,
            ),
            None => edit.set_log_number(cf.log_number),
        }
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
        let cf = &self.cfs[&id];
        // An edit that moves no file keeps the version (and the readers'
        // views of it) as it is.
        let version = if edit.new_files().is_empty() && edit.deleted_files().is_empty() {
            None
        } else {
            let mut builder = VersionBuilder::new(cf.icmp.clone(), &cf.current);
            builder.apply(edit, &manifest_name.display().to_string(), manifest_size)?;
            Some(builder.build())
        };

        let written = match new_manifest {
            Some(number) => self.switch_manifest(number, edit),
            None => self.append_to_manifest(edit),
        };
        if let Err(e) = written {
            self.manifest_failed = true;
            return Err(e);
        }
        let cf = self.cfs.get_mut(&id).expect("checked above");
        if let Some(version) = version {
            cf.current = Arc::new(version);
        }
        cf.log_number = edit.log_number().unwrap_or(cf.log_number);
        if let Some(name) = edit.merge_operator_name() {
            cf.merge_operator = Some(name.to_owned());
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
    /// `number`, and points CURRENT at it. (A family `edit` adds is in the
    /// set already: the snapshot leaves it out, and `edit` adds it.)
    fn switch_manifest(&mut self, number: u64, edit: &VersionEdit) -> Result<()> {
        let adding = edit.column_family_add().map(|_| edit.column_family());
        let snapshot: Vec<VersionEdit> = self
            .snapshot_edits()
            .into_iter()
            .filter(|e| Some(e.column_family()) != adding)
            .collect();
        let mut edits: Vec<&VersionEdit> = snapshot.iter().collect();
        edits.push(edit);
        let writer = write_new_manifest(self.fs.as_ref(), &self.dir, number, &edits)?;
        self.manifest = Some(writer);
        self.manifest_file_number = number;
        self.manifest_failed = false;
        Ok(())
    }

    /// Edits that rebuild the whole state from an empty version: the
    /// default family's with the counters, then one per other family,
    /// each creating it (name, comparator, log number, merge operator)
    /// with its files.
    pub(crate) fn snapshot_edits(&self) -> Vec<VersionEdit> {
        let mut edits = Vec::new();
        for (&id, cf) in &self.cfs {
            let mut edit = VersionEdit::new();
            edit.set_column_family(id);
            if id != DEFAULT_COLUMN_FAMILY_ID {
                edit.add_column_family(cf.name.clone());
            } else {
                edit.set_next_file_number(self.next_file_number);
                edit.set_last_sequence(self.last_sequence);
                edit.set_max_column_family(self.max_column_family);
            }
            edit.set_comparator_name(cf.icmp.user_comparator().name());
            if let Some(name) = &cf.merge_operator {
                edit.set_merge_operator_name(name.clone());
            }
            edit.set_log_number(cf.log_number);
            for level in 0..super::NUM_LEVELS {
                for f in cf.current.files(level) {
                    edit.add_new_file(level, f.to_new_file());
                }
            }
            edits.push(edit);
        }
        edits
    }

    /// True after a manifest write failed and before a new manifest was
    /// written in full: the failed edit may or may not be on disk.
    pub fn manifest_failed(&self) -> bool {
        self.manifest_failed
    }

    /// The current version of the default column family.
    #[cfg(test)]
    pub fn current(&self) -> Arc<Version> {
        self.current_cf(DEFAULT_COLUMN_FAMILY_ID)
    }

    /// The current version of column family `id`; an empty version for a
    /// family not on record (dropped).
    pub(crate) fn current_cf(&self, id: u32) -> Arc<Version> {
        match self.cfs.get(&id) {
            Some(cf) => cf.current.clone(),
            None => Arc::new(Version::empty()),
        }
    }

    /// Families on record that a read-only open left out.
    pub(crate) fn unopened_column_families(&self) -> &[String] {
        &self.unopened
    }

    /// The level-0 depth of family `id`'s current version (0 for a family
    /// not on record), without taking a reference to the version: the
    /// write path asks it at every write.
    pub(crate) fn level0_depth(&self, id: u32) -> usize {
        self.cfs.get(&id).map_or(0, |cf| cf.current.level0_depth())
    }

    /// The live column families, by id.
    pub(crate) fn column_families(&self) -> &BTreeMap<u32, CfVersions> {
        &self.cfs
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

    /// The merge operator name on record for family `id`: empty for none,
    /// `None` if the family never recorded one.
    pub(crate) fn merge_operator(&self, id: u32) -> Option<&str> {
        self.cfs.get(&id)?.merge_operator.as_deref()
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

    /// The log number of the default column family.
    #[cfg(test)]
    pub fn log_number(&self) -> u64 {
        self.cf_log_number(DEFAULT_COLUMN_FAMILY_ID)
    }

    /// The oldest write-ahead log column family `id` may still need (0 for
    /// a family not on record).
    pub(crate) fn cf_log_number(&self, id: u32) -> u64 {
        self.cfs.get(&id).map_or(0, |cf| cf.log_number)
    }

    /// The oldest write-ahead log still needed at recovery: the smallest
    /// log number of the live families.
    pub fn min_log_number(&self) -> u64 {
        self.cfs.values().map(|cf| cf.log_number).min().unwrap_or(0)
    }

    /// The number of the manifest being written.
    pub fn manifest_file_number(&self) -> u64 {
        self.manifest_file_number
    }

    /// Table numbers in the current versions of every family. The caller
    /// adds those of older versions still in use (see [`add_live_files`]).
    pub fn live_files(&self) -> HashSet<u64> {
        let mut live = HashSet::new();
        for cf in self.cfs.values() {
            add_live_files(&cf.current, &mut live);
        }
        live
    }

    /// Makes the manifest roll after `bytes` (tests reach it cheaply).
    #[cfg(test)]
    pub(super) fn set_manifest_roll_bytes(&mut self, bytes: u64) {
        self.manifest_roll_bytes = bytes;
    }
}

/// The error of an open naming families the database does not have.
pub(crate) fn missing_families(names: &[&str]) -> Error {
    Error::invalid_argument(format!(
        "column families not found: {} (set create_missing_column_families to create them)",
        names.join(", ")
    ))
}

/// Adds the table numbers of every file in `version` to `live`.
pub fn add_live_files(version: &Version, live: &mut HashSet<u64>) {
    live.extend(version.all_files().map(|f| f.number));
}

/// Writes, in another directory `dir`, manifest `number` holding `edits`
/// (a [`VersionSet::snapshot_edits`]) and a CURRENT naming it: the
/// manifest of a checkpoint. Synced.
pub(crate) fn write_checkpoint_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    edits: &[VersionEdit],
) -> Result<()> {
    let refs: Vec<&VersionEdit> = edits.iter().collect();
    write_new_manifest(fs, dir, number, &refs).map(drop)
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

/// What a replay has seen of one column family.
struct ReplayCf {
    name: String,
    /// `None` for a family on record that the open does not open: its
    /// edits are checked for structure only.
    builder: Option<(InternalKeyComparator, VersionBuilder)>,
    log_number: Option<u64>,
    merge_operator: Option<String>,
}

/// What a replay has seen of the database's counters.
#[derive(Default)]
struct Counters {
    comparator: bool,
    next_file_number: Option<u64>,
    last_sequence: Option<u64>,
    max_column_family: u32,
}

/// Replays manifest `number` from an empty version, building the families
/// in `opened`. With `require_all`, a live family not in `opened` is
/// `InvalidArgument`; without, it is left out.
fn replay(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    opened: &[(String, InternalKeyComparator)],
    require_all: bool,
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
    let builder_for = |cf_name: &str| {
        opened.iter().find(|(n, _)| n == cf_name).map(|(_, icmp)| {
            let builder = VersionBuilder::new(icmp.clone(), &Version::empty());
            (icmp.clone(), builder)
        })
    };
    let mut cfs: BTreeMap<u32, ReplayCf> = BTreeMap::from([(
        DEFAULT_COLUMN_FAMILY_ID,
        ReplayCf {
            name: DEFAULT_COLUMN_FAMILY_NAME.to_owned(),
            builder: builder_for(DEFAULT_COLUMN_FAMILY_NAME),
            log_number: None,
            merge_operator: None,
        },
    )]);
    let mut seen = Counters::default();
    let mut record = Vec::new();
    // The last record replayed and its offset, to find where the tail is.
    let mut last_record = Vec::new();
    let mut last_offset = None;
    // One pass per record; the reader consumes the file, so this ends.
    while reader.read_record(&mut record)? {
        let offset = reader.last_record_offset();
        let edit = VersionEdit::decode(&record, &name, offset)?;
        let corrupt = |what: String| Error::corruption(&name, offset, what);
        let id = edit.column_family();
        if let Some(cf_name) = edit.column_family_add() {
            if cfs.contains_key(&id) {
                return Err(corrupt(format!(
                    "edit adds column family {id}, which exists"
                )));
            }
            if cfs.values().any(|cf| cf.name == cf_name) {
                return Err(corrupt(format!(
                    "edit adds a second column family named {cf_name:?}"
                )));
            }
            cfs.insert(
                id,
                ReplayCf {
                    name: cf_name.to_owned(),
                    builder: builder_for(cf_name),
                    log_number: None,
                    merge_operator: None,
                },
            );
            seen.max_column_family = seen.max_column_family.max(id);
        }
        let Some(cf) = cfs.get_mut(&id) else {
            return Err(corrupt(format!(
                "edit names column family {id}, which is not live"
            )));
        };
        if let Some(theirs) = edit.comparator_name() {
            if let Some((icmp, _)) = &cf.builder {
                let ours = icmp.user_comparator().name();
                if theirs != ours {
                    let which = if id == DEFAULT_COLUMN_FAMILY_ID {
                        "the database".to_owned()
                    } else {
                        format!("column family {:?}", cf.name)
                    };
                    return Err(Error::invalid_argument(format!(
                        "{name}: {which} uses comparator {theirs:?}, but was opened with {ours:?}"
                    )));
                }
            }
            if id == DEFAULT_COLUMN_FAMILY_ID {
                seen.comparator = true;
            }
        }
        if let Some((_, builder)) = &mut cf.builder {
            builder.apply(&edit, &name, offset)?;
        }
        if let Some(m) = edit.merge_operator_name() {
            cf.merge_operator = Some(m.to_owned());
        }
        cf.log_number = edit.log_number().or(cf.log_number);
        if edit.is_column_family_drop() {
            if id == DEFAULT_COLUMN_FAMILY_ID {
                return Err(corrupt("edit drops the default column family".into()));
            }
            cfs.remove(&id);
        }
        seen.next_file_number = edit.next_file_number().or(seen.next_file_number);
        seen.last_sequence = edit.last_sequence().or(seen.last_sequence);
        if let Some(m) = edit.max_column_family() {
            seen.max_column_family = seen.max_column_family.max(m);
        }
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
    seen.finish(cfs, &name, number, require_all)
}

impl Counters {
    /// Checks that the replay saw every counter and returns the state.
    /// `manifest_number` is the replayed manifest's own number.
    fn finish(
        self,
        cfs: BTreeMap<u32, ReplayCf>,
        name: &str,
        manifest_number: u64,
        require_all: bool,
    ) -> Result<Replayed> {
        let missing = |field: &str| Error::corruption(name, 0, format!("no {field} entry"));
        if !self.comparator {
            return Err(missing("comparator"));
        }
        let next = self.next_file_number;
        let next = next.ok_or_else(|| missing("next file number"))?;
        let last_sequence = self.last_sequence.ok_or_else(|| missing("last sequence"))?;
        let unopened: Vec<&str> = cfs
            .values()
            .filter(|cf| cf.builder.is_none())
            .map(|cf| cf.name.as_str())
            .collect();
        if require_all && !unopened.is_empty() {
            return Err(Error::invalid_argument(format!(
                "column families not opened: {} (every column family on record must be opened; DB::list_cf names them)",
                unopened.join(", ")
            )));
        }
        let names = cfs.iter().map(|(&id, cf)| (id, cf.name.clone())).collect();
        let mut built = BTreeMap::new();
        let mut highest = manifest_number;
        for (id, cf) in cfs {
            let log_number = cf.log_number.ok_or_else(|| missing("log number"))?;
            highest = highest.max(log_number);
            let Some((icmp, builder)) = cf.builder else {
                continue;
            };
            let version = builder.build();
            // Never hand out a number a file on record already has.
            if let Some(max) = version.all_files().map(|f| f.number).max() {
                highest = highest.max(max);
            }
            built.insert(
                id,
                CfVersions {
                    name: cf.name,
                    icmp,
                    current: Arc::new(version),
                    log_number,
                    merge_operator: cf.merge_operator,
                },
            );
        }
        if highest.max(next) >= FILE_NUMBER_LIMIT {
            let what = format!("file number {} is not below 2^63", highest.max(next));
            return Err(Error::corruption(name, 0, what));
        }
        Ok(Replayed {
            cfs: built,
            names,
            max_column_family: self.max_column_family,
            next_file_number: next.max(highest + 1),
            last_sequence,
        })
    }
}
