//! Checks shared by the integration tests.

use std::collections::BTreeSet;
use std::path::Path;

use strata::env::FileSystem;
use strata::DB;

/// At an idle point (no flush or compaction running, no reader holding
/// an old version), the table files on disk are exactly those of the
/// current version, and there is one manifest and no temporary file.
/// Returns the number of tables.
pub fn assert_files_are_live(fs: &dyn FileSystem, dir: &str, db: &DB, what: &str) -> usize {
    let names = fs
        .list(Path::new(dir))
        .unwrap_or_else(|e| panic!("{what}: list {dir}: {e}"));
    let on_disk: BTreeSet<String> = names
        .iter()
        .filter(|n| n.ends_with(".sst"))
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
    let manifests = names.iter().filter(|n| n.starts_with("MANIFEST-")).count();
    assert_eq!(manifests, 1, "{what}: manifests on disk: {names:?}");
    assert!(
        !names.iter().any(|n| n.ends_with(".dbtmp")),
        "{what}: temporary file left: {names:?}"
    );
    live.len()
}
