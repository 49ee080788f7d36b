//! Leveled compaction.
//!
//! - `picker.rs`: level targets (static or dynamic), scores, choosing the
//!   inputs, conflicts with running compactions, trivial moves.
//! - `job.rs`: running a compaction: the merge, dropping hidden versions and
//!   deletions, cutting output files, installing the result; manual
//!   `compact_range`.
//! - `cutting.rs`: where outputs end besides their size: stream-aware
//!   gap boundaries and the user's SST partitioner.
//! - `stats.rs`: per-level statistics and their RocksDB-style table.
//!
//! Several compactions may run at once (up to `max_background_jobs` minus
//! the flush threads, as RocksDB divides them) when their inputs are
//! disjoint and their output key ranges do not overlap at the output level.
//! At most one compaction takes L0 at a time.

pub(crate) mod cutting;
mod job;
mod picker;
pub(crate) mod stats;

pub(crate) use picker::level_targets;
