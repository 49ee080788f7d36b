//! The engines a benchmark runs against, behind one trait, so that key
//! generation, timing and reporting are shared and a ratio between two
//! engines measures the engines only.
//!
//! - `strata` ([`strata_engine::StrataEngine`]): this project's engine;
//! - `rocksdb` (with the `rocksdb` cargo feature): RocksDB through the
//!   `rocksdb` crate, configured from the same flags the same way;
//! - [`model::ModelEngine`]: an in-memory `BTreeMap`, the reference of the
//!   differential test (not offered on the command line).
//!
//! Every engine is `Send + Sync`: benchmark threads share one `&dyn Engine`.

pub mod config;
pub mod merge_ops;
pub mod model;
#[cfg(feature = "rocksdb")]
pub mod rocksdb_engine;
pub mod strata_engine;

use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};

pub use config::{CacheType, Compression, EngineConfig, TableFormat, WriteMode};

/// Levels whose file counts `levelstats` and the comparison scripts report.
pub const NUM_LEVELS: usize = 7;

/// One update of a [`Batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEntry<'a> {
    /// Set key to value.
    Put(&'a [u8], &'a [u8]),
    /// Remove key.
    Delete(&'a [u8]),
    /// Remove every key in `[from, to)`.
    DeleteRange(&'a [u8], &'a [u8]),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Put,
    Delete,
    DeleteRange,
}

#[derive(Debug, Clone, Copy)]
struct BatchOp {
    kind: OpKind,
    key_end: usize,
    value_end: usize,
}

/// Updates applied atomically, in one reusable buffer (no allocation per
/// entry once warmed up). Each engine copies it into its own batch type.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    data: Vec<u8>,
    ops: Vec<BatchOp>,
}

impl Batch {
    /// Removes every entry, keeping the buffers.
    pub fn clear(&mut self) {
        self.data.clear();
        self.ops.clear();
    }

    /// Adds a put.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.data.extend_from_slice(key);
        let key_end = self.data.len();
        self.data.extend_from_slice(value);
        self.ops.push(BatchOp {
            kind: OpKind::Put,
            key_end,
            value_end: self.data.len(),
        });
    }

    /// Adds a range deletion of `[from, to)`.
    pub fn delete_range(&mut self, from: &[u8], to: &[u8]) {
        self.data.extend_from_slice(from);
        let key_end = self.data.len();
        self.data.extend_from_slice(to);
        self.ops.push(BatchOp {
            kind: OpKind::DeleteRange,
            key_end,
            value_end: self.data.len(),
        });
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) {
        self.data.extend_from_slice(key);
        let end = self.data.len();
        self.ops.push(BatchOp {
            kind: OpKind::Delete,
            key_end: end,
            value_end: end,
        });
    }

    /// Entries in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The key and value when the batch is one put and nothing else.
    pub fn single_put(&self) -> Option<(&[u8], &[u8])> {
        match self.ops.as_slice() {
            [op] if op.kind == OpKind::Put => Some((
                &self.data[..op.key_end],
                &self.data[op.key_end..op.value_end],
            )),
            _ => None,
        }
    }

    /// Bytes of keys and values.
    pub fn data_bytes(&self) -> usize {
        self.data.len()
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = BatchEntry<'_>> + '_ {
        let mut start = 0;
        self.ops.iter().map(move |op| {
            let key = &self.data[start..op.key_end];
            let value = &self.data[op.key_end..op.value_end];
            start = op.value_end;
            match op.kind {
                OpKind::Put => BatchEntry::Put(key, value),
                OpKind::Delete => BatchEntry::Delete(key),
                OpKind::DeleteRange => BatchEntry::DeleteRange(key, value),
            }
        })
    }
}

/// A cursor over an engine, as RocksDB's raw iterator. `key` and `value`
/// are only called while `valid`.
pub trait EngineIterator {
    /// Positions at the first key.
    fn seek_to_first(&mut self);
    /// Positions at the last key.
    fn seek_to_last(&mut self);
    /// Positions at the first key >= `key`.
    fn seek(&mut self, key: &[u8]);
    /// Moves to the next key.
    fn next(&mut self);
    /// Moves to the previous key.
    fn prev(&mut self);
    /// True while positioned at an entry.
    fn valid(&self) -> bool;
    /// The current key.
    fn key(&self) -> &[u8];
    /// The current value.
    fn value(&self) -> &[u8];
    /// The first error met.
    fn status(&self) -> Result<()>;

    /// Moves to the first entry of the next distinct prefix (Strata's
    /// `next_prefix`); engines without it fail.
    fn next_prefix(&mut self) -> Result<()> {
        Err(Error::Unsupported(
            "next_prefix: the engine has no prefix steps".into(),
        ))
    }

    /// Moves to the first entry of the previous distinct prefix (Strata's
    /// `prev_prefix`); engines without it fail.
    fn prev_prefix(&mut self) -> Result<()> {
        Err(Error::Unsupported(
            "prev_prefix: the engine has no prefix steps".into(),
        ))
    }
}

/// A key-value engine under benchmark.
pub trait Engine: Send + Sync {
    /// The engine's name (`strata`, `rocksdb`, `model`).
    fn name(&self) -> &'static str;

    /// Called first in every benchmark thread, before the clock starts, for
    /// the engine's per-thread settings (db_bench's `ThreadBody` sets
    /// RocksDB's perf level there).
    fn thread_start(&self) {}

    /// Applies `batch` atomically.
    fn write(&self, batch: &Batch, mode: WriteMode) -> Result<()>;

    /// Sets one key (a batch of one).
    fn put(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()> {
        let mut b = Batch::default();
        b.put(key, value);
        self.write(&b, mode)
    }

    /// Removes one key (a batch of one).
    fn delete(&self, key: &[u8], mode: WriteMode) -> Result<()> {
        let mut b = Batch::default();
        b.delete(key);
        self.write(&b, mode)
    }

    /// Merges `value` into `key` with the `--merge_operator` the engine
    /// was opened with.
    fn merge(&self, key: &[u8], value: &[u8], mode: WriteMode) -> Result<()>;

    /// Looks `key` up; when found, calls `found` with the value (pinned,
    /// not copied, where the engine can) and returns true.
    fn get(&self, key: &[u8], found: &mut dyn FnMut(&[u8])) -> Result<bool>;

    /// Looks every key up in one MultiGet; calls `found(i, value)` for each
    /// key `i` found. Returns how many were found. `batched`: the engine's
    /// batched call with pinned values (db_bench's `--multiread_batched`,
    /// RocksDB's `MultiGet` over a column family); otherwise its vector call
    /// that copies each value out. The keys are the caller's own buffers,
    /// so a batch builds no list of slices (db_bench's keys are kept
    /// across batches too).
    fn multi_get(
        &self,
        keys: &[Vec<u8>],
        batched: bool,
        found: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<usize>;

    /// A cursor over the current state.
    fn iterator(&self) -> Result<Box<dyn EngineIterator + '_>>;

    /// True when its iterators have `next_prefix` and `prev_prefix`.
    fn has_prefix_steps(&self) -> bool {
        false
    }

    /// Writes the entries `next` yields (ascending keys) to table files of
    /// about `file_bytes` each in the new directory `dir`, with the
    /// engine's own table-file writer, then ingests them all, moved
    /// (`ingest_external_file`). Returns the time of each phase.
    fn write_and_ingest(
        &self,
        dir: &Path,
        file_bytes: u64,
        next: &mut dyn FnMut(&mut Vec<u8>, &mut Vec<u8>) -> bool,
    ) -> Result<(Duration, Duration)>;

    /// Makes a checkpoint of the database in `dir`, which must not exist.
    fn checkpoint(&self, dir: &Path) -> Result<()>;

    /// Writes the memtable to tables and waits for it.
    fn flush(&self) -> Result<()>;

    /// Compacts the whole key range down the levels.
    fn compact_all(&self) -> Result<()>;

    /// Waits until no flush or compaction is pending or running.
    fn wait_for_compaction(&self) -> Result<()>;

    /// A property by its engine-neutral name (`stats`, `levelstats`,
    /// `sstables`, `num-files-at-level<N>`, `total-sst-files-size`, ...):
    /// the engine adds its own prefix. `None`: the engine has no such
    /// property.
    fn property(&self, name: &str) -> Result<Option<String>>;

    /// Table files per level, L0 to L6.
    fn level_file_counts(&self) -> Result<Vec<u64>> {
        (0..NUM_LEVELS)
            .map(|level| {
                let v = self.property(&format!("num-files-at-level{level}"))?;
                Ok(v.and_then(|s| s.trim().parse().ok()).unwrap_or(0))
            })
            .collect()
    }
}

/// Calls `found(i, value)` for every key `i` a MultiGet found; returns how
/// many were found, or the first error (converted by `err`).
pub(crate) fn report_found<V: AsRef<[u8]>, E>(
    results: Vec<std::result::Result<Option<V>, E>>,
    err: impl Fn(E) -> Error,
    found: &mut dyn FnMut(usize, &[u8]),
) -> Result<usize> {
    let mut n = 0;
    for (i, r) in results.into_iter().enumerate() {
        if let Some(v) = r.map_err(&err)? {
            found(i, v.as_ref());
            n += 1;
        }
    }
    Ok(n)
}

/// Engine names `--engine` accepts in this build.
pub fn engine_names() -> &'static [&'static str] {
    if cfg!(feature = "rocksdb") {
        &["strata", "rocksdb"]
    } else {
        &["strata"]
    }
}

/// Checks that engine `name` exists in this build and can honour `cfg`.
pub fn check(name: &str, cfg: &EngineConfig) -> Result<()> {
    match name {
        "strata" => strata_engine::check(cfg),
        // The rocksdb crate has no setter for RocksDB's partitioner.
        #[cfg(feature = "rocksdb")]
        "rocksdb" if cfg.sst_partitioner_fixed_prefix > 0 => Err(Error::Usage(
            "--sst_partitioner_fixed_prefix is Strata's: the rocksdb crate cannot set \
             RocksDB's partitioner"
                .into(),
        )),
        #[cfg(feature = "rocksdb")]
        "rocksdb" if !cfg.options_file.is_empty() => Err(Error::Usage(
            "--options_file is Strata's TOML options file; the harness does not read RocksDB \
             OPTIONS files"
                .into(),
        )),
        #[cfg(feature = "rocksdb")]
        "rocksdb" if cfg.table_format == config::TableFormat::Packed => Err(Error::Usage(
            "--table_format=packed is Strata's packed table; RocksDB's in-memory format is \
             --table_format=plain"
                .into(),
        )),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(()),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => Err(Error::Usage(
            "--engine=rocksdb needs a build with the `rocksdb` feature: \
             cargo build --release -p strata-bench --features rocksdb"
                .into(),
        )),
        other => Err(Error::Usage(format!(
            "unknown engine {other:?}: expected one of {}",
            engine_names().join(", ")
        ))),
    }
}

/// A line naming the engine and its version, for the run's header.
pub fn version_line(name: &str) -> String {
    match name {
        #[cfg(feature = "rocksdb")]
        "rocksdb" => rocksdb_engine::version_line(),
        _ => strata_engine::version_line(),
    }
}

/// Opens engine `name` at `path`; `create` makes a new database (the
/// directory must not hold one), otherwise it must exist.
pub fn open(name: &str, cfg: &EngineConfig, path: &Path, create: bool) -> Result<Box<dyn Engine>> {
    check(name, cfg)?;
    match name {
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocksdb_engine::RocksDbEngine::open(
            cfg, path, create,
        )?)),
        _ => Ok(Box::new(strata_engine::StrataEngine::open(
            cfg, path, create,
        )?)),
    }
}

/// Deletes the database of engine `name` at `path`, if any.
///
/// Refuses (deleting nothing) a directory that holds files but no database
/// of either engine (no `CURRENT` file): a fresh-database step must never
/// empty a directory it was pointed at by mistake.
pub fn destroy(name: &str, cfg: &EngineConfig, path: &Path) -> Result<()> {
    if path.exists() && !path.is_dir() {
        return Err(Error::Usage(format!(
            "--db={} is a file, not a database directory",
            path.display()
        )));
    }
    if let Ok(entries) = std::fs::read_dir(path) {
        let names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if !names.is_empty() && !names.iter().any(|n| n == "CURRENT") {
            let mut shown: Vec<&str> = names.iter().map(String::as_str).collect();
            shown.sort_unstable();
            shown.truncate(3);
            return Err(Error::Usage(format!(
                "--db={} holds files ({}{}) but no database (no CURRENT file): not deleting it for a fresh database",
                path.display(),
                shown.join(", "),
                if names.len() > shown.len() { ", ..." } else { "" }
            )));
        }
    }
    match name {
        #[cfg(feature = "rocksdb")]
        "rocksdb" => rocksdb_engine::destroy(cfg, path),
        _ => strata_engine::destroy(cfg, path),
    }
}

/// Bytes a write batch of `batch` takes in both engines' format (the same
/// layout): a 12-byte header, and per record a tag byte and two varint32
/// lengths of at most 5 bytes each besides the key and value bytes. Sizing
/// the engine's batch with it makes each write one allocation.
pub(crate) fn batch_capacity(batch: &Batch) -> usize {
    12 + batch.data_bytes() + 11 * batch.len()
}

/// Writes the entries `next` yields to table files of about `file_bytes`
/// each in the new directory `dir` (`000001.sst`, ...) through an engine's
/// writer (`open` one, `put` into it, its `size` so far, `finish` it), and
/// returns their paths.
pub(crate) fn write_table_files<W>(
    dir: &Path,
    file_bytes: u64,
    next: &mut dyn FnMut(&mut Vec<u8>, &mut Vec<u8>) -> bool,
    open: impl Fn(&Path) -> Result<W>,
    put: impl Fn(&mut W, &[u8], &[u8]) -> Result<()>,
    size: impl Fn(&W) -> u64,
    finish: impl Fn(&mut W) -> Result<()>,
) -> Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    let (mut key, mut value) = (Vec::new(), Vec::new());
    let mut writer: Option<W> = None;
    while next(&mut key, &mut value) {
        let w = match &mut writer {
            Some(w) => w,
            None => {
                let path = dir.join(format!("{:06}.sst", files.len() + 1));
                let w = open(&path)?;
                files.push(path);
                writer.insert(w)
            }
        };
        put(w, &key, &value)?;
        if size(w) >= file_bytes {
            finish(w)?;
            writer = None;
        }
    }
    if let Some(mut w) = writer {
        finish(&mut w)?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_round_trip() {
        let mut b = Batch::default();
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.put(b"", b"");
        let got: Vec<_> = b.iter().collect();
        assert_eq!(
            got,
            [
                BatchEntry::Put(b"k1", b"v1"),
                BatchEntry::Delete(b"k2"),
                BatchEntry::Put(b"", b"")
            ]
        );
        assert_eq!((b.len(), b.data_bytes()), (3, 6));
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn single_put_is_only_a_batch_of_one_put() {
        let mut b = Batch::default();
        assert_eq!(b.single_put(), None);
        b.put(b"key", b"value");
        assert_eq!(b.single_put(), Some((&b"key"[..], &b"value"[..])));
        b.put(b"k2", b"v2");
        assert_eq!(b.single_put(), None);
        b.clear();
        b.delete(b"key");
        assert_eq!(b.single_put(), None);
        b.clear();
        b.delete_range(b"a", b"b");
        assert_eq!(b.single_put(), None);
    }

    #[test]
    fn batch_capacity_bounds_the_engine_batch() {
        let mut b = Batch::default();
        let big = vec![7u8; 70_000]; // lengths that need 3-byte varints
        for (k, v) in [
            (&b"k"[..], &b""[..]),
            (&big[..100], &big[..]),
            (&big[..], &b"v"[..]),
        ] {
            b.put(k, v);
        }
        b.delete(&big[..300]);
        b.delete_range(&big[..200], &big[..400]);
        let mut sb = strata::WriteBatch::default();
        for e in b.iter() {
            match e {
                BatchEntry::Put(k, v) => sb.put(k, v),
                BatchEntry::Delete(k) => sb.delete(k),
                BatchEntry::DeleteRange(from, to) => sb.delete_range(from, to),
            }
        }
        assert!(sb.data().len() <= batch_capacity(&b));
    }
}
