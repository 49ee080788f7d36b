//! W5 (MVCC scans): `fillmvcc` writes `--num / --versions_per_key` rows of
//! `--versions_per_key` versions each, and `mvccscan` visits the newest
//! version of every row once, stepping from row to row as
//! `--scan_method` says. Ours: db_bench has neither.
//!
//! Key: the row as 8 big-endian bytes, then the version as 8 big-endian
//! bytes bit-inverted, so that the newest version of a row sorts first
//! (the layout of `../shared/bench/w5_rocksdb.cc` and the Pebble program).
//! Rows and versions count from 0 and 1; the newest version is V.

use super::ops::{Shared, ThreadState};
use crate::engine::{Batch, EngineIterator};
use crate::error::{Error, Result};
use crate::stats::OpKind;
use crate::values::ValueGenerator;

/// Bytes of the row part of a key: the prefix the prefix steps use.
pub const ROW_BYTES: usize = 8;

/// How `mvccscan` goes from one row to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanMethod {
    /// `next` until the row changes (the baseline every engine has).
    Next,
    /// Strata's `next_prefix`.
    NextPrefix,
    /// Strata's `prev_prefix`, from the last row back to the first.
    PrevPrefix,
    /// A seek to the next row's first possible key (RocksDB's best).
    SeekSuccessor,
}

impl ScanMethod {
    /// Parses `--scan_method`.
    pub fn parse(name: &str) -> Result<ScanMethod> {
        Ok(match name {
            "next" => ScanMethod::Next,
            "next_prefix" => ScanMethod::NextPrefix,
            "prev_prefix" => ScanMethod::PrevPrefix,
            "seek_successor" => ScanMethod::SeekSuccessor,
            other => {
                return Err(Error::Usage(format!(
                    "unknown --scan_method={other}: expected next, next_prefix, prev_prefix or seek_successor"
                )))
            }
        })
    }

    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            ScanMethod::Next => "next",
            ScanMethod::NextPrefix => "next_prefix",
            ScanMethod::PrevPrefix => "prev_prefix",
            ScanMethod::SeekSuccessor => "seek_successor",
        }
    }

    /// True for the steps only Strata has.
    pub fn needs_prefix_steps(self) -> bool {
        matches!(self, ScanMethod::NextPrefix | ScanMethod::PrevPrefix)
    }
}

/// Rows `fillmvcc` writes and `mvccscan` expects.
pub fn rows(num: u64, versions: u64) -> u64 {
    (num / versions).max(1)
}

fn put_key(key: &mut [u8; 16], row: u64, version: u64) {
    key[..8].copy_from_slice(&row.to_be_bytes());
    key[8..].copy_from_slice(&(!version).to_be_bytes());
}

/// `fillmvcc`: every row in order, its versions newest first (so the keys
/// arrive in key order), in batches of `--batch_size`.
pub fn fill(sh: &Shared<'_>, th: &mut ThreadState) -> Result<()> {
    let p = sh.params;
    let versions = p.versions_per_key;
    let rows = rows(p.num, versions);
    let mut values = ValueGenerator::new(p.value_size, p.compression_ratio);
    let mut batch = Batch::default();
    let mut key = [0u8; 16];
    let mut bytes = 0u64;
    for row in 0..rows {
        for version in (1..=versions).rev() {
            put_key(&mut key, row, version);
            let value = values.generate();
            batch.put(&key, value);
            bytes += (key.len() + value.len()) as u64;
            if batch.len() as u64 >= p.batch_size {
                sh.engine.write(&batch, p.write_mode)?;
                th.stats.finished_ops(batch.len() as u64, OpKind::Write);
                batch.clear();
            }
        }
    }
    if !batch.is_empty() {
        sh.engine.write(&batch, p.write_mode)?;
        th.stats.finished_ops(batch.len() as u64, OpKind::Write);
    }
    th.stats.add_bytes(bytes);
    th.stats
        .add_message(&format!("({rows} rows of {versions} versions)"));
    Ok(())
}

/// What a scan saw: rows, and a checksum of the values it returned.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Seen {
    rows: u64,
    checksum: u64,
    bytes: u64,
}

/// Checks that the iterator is at the newest version of its row, and
/// counts it.
fn visit(it: &dyn EngineIterator, versions: u64, seen: &mut Seen) -> Result<()> {
    let key = it.key();
    let newest = key.len() == 16
        && key[8..]
            .try_into()
            .map(u64::from_be_bytes)
            .is_ok_and(|v| !v == versions);
    if !newest {
        return Err(Error::Usage(format!(
            "mvccscan: at {:?}, not the newest version ({versions}) of a row: \
             was the database filled by fillmvcc with --versions_per_key={versions}?",
            key.escape_ascii().to_string()
        )));
    }
    let value = it.value();
    // The value's first 8 bytes, read as one word when it has them (as
    // Pebble's W5 program does), so the check costs no copy call.
    let head = match value.first_chunk::<8>() {
        Some(h) => u64::from_le_bytes(*h),
        None => {
            let mut head = [0u8; 8];
            head[..value.len()].copy_from_slice(value);
            u64::from_le_bytes(head)
        }
    };
    seen.rows += 1;
    // A sum: the same whichever way the scan goes.
    seen.checksum = seen.checksum.wrapping_add(head);
    seen.bytes += (key.len() + value.len()) as u64;
    Ok(())
}

fn row_of(key: &[u8]) -> Option<u64> {
    key.get(..ROW_BYTES)?
        .try_into()
        .ok()
        .map(u64::from_be_bytes)
}

/// `mvccscan`: one scan over every row; one operation per row returned.
pub fn scan(sh: &Shared<'_>, th: &mut ThreadState, method: ScanMethod) -> Result<()> {
    let p = sh.params;
    let versions = p.versions_per_key;
    if method.needs_prefix_steps() && !sh.engine.has_prefix_steps() {
        return Err(Error::Unsupported(format!(
            "--scan_method={} with --engine={}: it has no prefix steps (use next or seek_successor)",
            method.name(),
            sh.engine.name()
        )));
    }
    let start = std::time::Instant::now();
    let mut it = sh.engine.iterator()?;
    let mut seen = Seen::default();
    let mut row_key = [0u8; ROW_BYTES];
    match method {
        ScanMethod::Next => {
            it.seek_to_first();
            while it.valid() {
                visit(&*it, versions, &mut seen)?;
                th.stats.finished_ops(1, OpKind::Read);
                let Some(row) = it.key().get(..ROW_BYTES) else {
                    break;
                };
                row_key.copy_from_slice(row);
                it.next();
                // Bounded by the row's versions.
                while it.valid() && it.key().starts_with(&row_key) {
                    it.next();
                }
            }
        }
        ScanMethod::NextPrefix => {
            it.seek_to_first();
            while it.valid() {
                visit(&*it, versions, &mut seen)?;
                th.stats.finished_ops(1, OpKind::Read);
                it.next_prefix()?;
            }
        }
        ScanMethod::PrevPrefix => {
            // From the newest version of the last row, back row by row.
            it.seek_to_last();
            if let Some(row) = it.valid().then(|| row_of(it.key())).flatten() {
                it.seek(&row.to_be_bytes());
            }
            while it.valid() {
                visit(&*it, versions, &mut seen)?;
                th.stats.finished_ops(1, OpKind::Read);
                it.prev_prefix()?;
            }
        }
        ScanMethod::SeekSuccessor => {
            it.seek_to_first();
            while it.valid() {
                visit(&*it, versions, &mut seen)?;
                th.stats.finished_ops(1, OpKind::Read);
                match row_of(it.key()).and_then(|r| r.checked_add(1)) {
                    Some(next) => it.seek(&next.to_be_bytes()),
                    None => break,
                }
            }
        }
    }
    it.status()?;
    let elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    let want = rows(p.num, versions);
    if seen.rows != want {
        return Err(Error::Usage(format!(
            "mvccscan: visited {} rows, want {want} (--num / --versions_per_key): \
             was the database filled by fillmvcc with the same flags?",
            seen.rows
        )));
    }
    th.stats.add_bytes(seen.bytes);
    th.stats.add_message(&format!(
        "(scan {elapsed_ms:.1} ms, {} over {want} rows of {versions} versions, checksum {:016x})",
        method.name(),
        seen.checksum
    ));
    Ok(())
}
