//! Checks and helpers shared by the integration tests.

// Each test file includes this module and uses only some of it.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use strata_kv::env::FileSystem;
use strata_kv::{IteratorMode, DB};

/// The value of integer property `name`.
pub fn prop(db: &DB, name: &str) -> u64 {
    db.property_value(name)
        .unwrap()
        .unwrap_or_else(|| panic!("no property {name}"))
        .parse()
        .unwrap()
}

/// The number of table files in each of `db`'s seven levels.
pub fn files_per_level(db: &DB) -> Vec<u64> {
    (0..7)
        .map(|l| prop(db, &format!("strata.num-files-at-level{l}")))
        .collect()
}

/// Every key-value pair of `db`, in order.
pub fn contents(db: &DB) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iterator(IteratorMode::Start)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect()
}

/// Every key and value `snapshot` sees, in order.
pub fn contents_at(db: &DB, snapshot: &strata_kv::Snapshot<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut ro = strata_kv::ReadOptions::default();
    ro.set_snapshot(snapshot);
    db.iterator_opt(IteratorMode::Start, ro)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect()
}

/// Names of the files in `dir` that end with `suffix`, sorted.
pub fn files_ending(fs: &dyn FileSystem, dir: &str, suffix: &str) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list(Path::new(dir))
        .unwrap_or_else(|e| panic!("list {dir}: {e}"))
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .collect();
    names.sort();
    names
}

/// At an idle point (no flush or compaction running, no reader holding
/// an old version), the table files on disk are exactly those of the
/// current version, and there is one manifest and no temporary file.
/// Returns the number of tables.
pub fn assert_files_are_live(fs: &dyn FileSystem, dir: &str, db: &DB, what: &str) -> usize {
    let on_disk: BTreeSet<String> = files_ending(fs, dir, ".sst")
        .into_iter()
        .map(|n| format!("/{n}"))
        .collect();
    let live: BTreeSet<String> = db
        .live_files()
        .unwrap_or_else(|e| panic!("{what}: live_files: {e}"))
        .into_iter()
        .map(|f| f.name)
        .collect();
    let leaked: Vec<_> = on_disk.difference(&live).collect();
    let missing: Vec<_> = live.difference(&on_disk).collect();
    assert!(
        leaked.is_empty() && missing.is_empty(),
        "{what}: tables on disk but not live: {leaked:?}; live but not on disk: {missing:?}"
    );
    let names = files_ending(fs, dir, "");
    let manifests = names.iter().filter(|n| n.starts_with("MANIFEST-")).count();
    assert_eq!(manifests, 1, "{what}: manifests on disk: {names:?}");
    let temps = files_ending(fs, dir, ".dbtmp");
    assert!(temps.is_empty(), "{what}: temporary files left: {temps:?}");
    live.len()
}

/// A fresh directory for one test on the real file system (under
/// `/dev/shm` where there is one), removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("strata-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A merge operator: the operands appended to the value below them
/// (concatenation, so associative: partial merges may use it too).
pub fn append(
    _key: &[u8],
    base: Option<&[u8]>,
    operands: &strata_kv::MergeOperands,
) -> Option<Vec<u8>> {
    let mut out = base.map(<[u8]>::to_vec).unwrap_or_default();
    for op in operands {
        out.extend_from_slice(op);
    }
    Some(out)
}
