//! Versions: which table files make up the database, level by level, and
//! the manifest that records every change to that set.
//!
//! - [`FileMetaData`]: one table file (number, size, key and sequence range).
//! - [`VersionEdit`]: a change (files added and deleted, counters), encoded
//!   as one manifest record (`docs/format/manifest.md`).
//! - [`Version`]: an immutable snapshot of the files in each level.
//! - [`VersionBuilder`]: applies edits to a version, rejecting edits that
//!   do not fit it.
//! - [`VersionSet`]: the current version, the file-number and sequence
//!   counters, and the manifest writer; recovers from the manifest CURRENT
//!   names and logs every later change.
//!
//! Level invariants: level 0 files are ordered newest first (largest
//! sequence number descending) and may overlap; in every other level files
//! are ordered by smallest key and their key ranges are disjoint.
//!
//! Thread safety: a `Version` is immutable and shared through `Arc`; the
//! `VersionSet` has no internal locking, the database serializes access to
//! it (in LevelDB, under the DB mutex).

mod builder;
mod edit;
mod file_meta;
mod file_search;
mod format;
mod manifest_tail;
mod set;
// The module is named after the type it holds, as LevelDB's version_set.cc
// holds VersionSet; renaming either would only obscure the mapping.
#[allow(clippy::module_inception)]
mod version;

pub use builder::VersionBuilder;
pub use edit::{NewFile, VersionEdit};
pub use file_meta::FileMetaData;
pub use set::{add_live_files, VersionSet};
pub(crate) use set::{missing_families, read_current, write_checkpoint_manifest};
pub use set::{DEFAULT_COLUMN_FAMILY_ID, DEFAULT_COLUMN_FAMILY_NAME};
pub(crate) use version::LevelRangeDels;
pub use version::Version;

/// Number of levels in the tree: level 0 (flushed memtables) to level 6.
pub const NUM_LEVELS: usize = 7;

#[cfg(test)]
mod tests;
