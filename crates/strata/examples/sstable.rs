//! Writes a table file of N sequential keys, reads it back with point
//! lookups and a full scan, and reports the timings.
//!
//! ```text
//! cargo run --release --example sstable -- [--num=N] [--value_size=B]
//!     [--compression=none|snappy|lz4|zstd] [--dir=PATH]
//!     [--use_data_block_hash_index=0|1|both] [--data_block_hash_table_util_ratio=R]
//!     [--block_restart_interval=N] [--block_size=B] [--cache_size=BYTES]
//!     [--reads=N]
//! ```
//!
//! `--cache_size` > 0 reads data blocks through a block cache of that many
//! bytes (warmed by one pass before timing), which isolates the in-block
//! search from file reads, checksums and decompression.
//! `--use_data_block_hash_index=both` (`--data_block_index_type` is the
//! same flag) writes one table per index type and alternates rounds of
//! lookups between them, so that both see the same machine load; each
//! line then also gives on-CPU time, steadier than wall time on a shared
//! machine.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use strata_kv::cache::BlockCache;
use strata_kv::env::{FileSystem, PosixFileSystem};
use strata_kv::iter::InternalIterator;
use strata_kv::key::{BytewiseComparator, InternalKey, ValueKind, MAX_SEQUENCE_NUMBER};
use strata_kv::sst::{filter_hash, DataBlockIndexType, TableBuilder, TableOptions, TableReader};

type BoxError = Box<dyn std::error::Error>;

/// Rounds of lookups per table when comparing index types.
const ROUNDS: u64 = 10;

fn main() -> Result<(), BoxError> {
    let mut num: u64 = 1_000_000;
    let mut value_size = 100usize;
    let mut opts = TableOptions::default();
    let mut index_types = vec![DataBlockIndexType::BinarySearch];
    let mut cache_size = 0usize;
    let mut reads: u64 = 200_000;
    let mut dir = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    for arg in std::env::args().skip(1) {
        let (name, value) = arg
            .split_once('=')
            .ok_or_else(|| format!("expected --name=value, got {arg}"))?;
        match name {
            "--num" => num = value.parse()?,
            "--value_size" => value_size = value.parse()?,
            "--compression" => opts.compression = value.parse()?,
            "--dir" => dir = PathBuf::from(value),
            // db_bench's name, and RocksDB's option number.
            "--use_data_block_hash_index" | "--data_block_index_type" => {
                use DataBlockIndexType::{BinaryAndHash, BinarySearch};
                index_types = match value {
                    "0" | "false" => vec![BinarySearch],
                    "1" | "true" => vec![BinaryAndHash],
                    "both" => vec![BinarySearch, BinaryAndHash],
                    _ => return Err(format!("{name} takes 0, 1 or both, got {value}").into()),
                }
            }
            "--data_block_hash_table_util_ratio" => {
                opts.data_block_hash_table_util_ratio = value.parse()?
            }
            "--block_restart_interval" => opts.block_restart_interval = value.parse()?,
            "--block_size" => opts.block_size = value.parse()?,
            "--cache_size" => cache_size = value.parse()?,
            "--reads" => reads = value.parse()?,
            _ => return Err(format!("unknown flag {name}").into()),
        }
    }
    let fs = PosixFileSystem::new();
    let value: Vec<u8> = (0..value_size).map(|i| (i % 251) as u8 ^ b'a').collect();
    let mut tables = Vec::new();
    for &index_type in &index_types {
        let path = dir.join(format!(
            "strata-example-{}-{}.sst",
            std::process::id(),
            index_type as u8
        ));
        let opts = TableOptions {
            data_block_index_type: index_type,
            ..opts.clone()
        };
        write_table(&fs, &path, opts, num, &value)?;
        let cache = (cache_size > 0).then(|| Arc::new(BlockCache::new(cache_size, None)));
        let table = Arc::new(TableReader::open_with_cache(
            fs.open_random_access(&path)?,
            path.display().to_string(),
            Arc::new(BytewiseComparator),
            cache.clone(),
        )?);
        if cache.is_some() {
            read_random(&table, num, reads, 0, &value)?;
        }
        tables.push((index_type, path, table));
    }

    // (wall seconds, cpu nanoseconds or None) per table.
    let mut spent: Vec<(f64, Option<u64>)> = vec![(0.0, Some(0)); tables.len()];
    let rounds = if tables.len() > 1 { ROUNDS } else { 1 };
    let per_round = reads / rounds;
    for round in 0..rounds {
        for i in 0..tables.len() {
            // Alternate which table goes first.
            let i = if round % 2 == 0 {
                i
            } else {
                tables.len() - 1 - i
            };
            let start = Instant::now();
            let cpu_start = thread_cpu_ns();
            let found = read_random(&tables[i].2, num, per_round, round, &value)?;
            spent[i].0 += start.elapsed().as_secs_f64();
            spent[i].1 = match (spent[i].1, cpu_start, thread_cpu_ns()) {
                (Some(sum), Some(a), Some(b)) => Some(sum + (b - a)),
                _ => None,
            };
            if found != per_round {
                return Err("table did not return every entry".into());
            }
        }
    }
    let lookups = (per_round * rounds).max(1) as f64;
    for ((index_type, _, _), (wall_s, cpu_ns)) in tables.iter().zip(&spent) {
        let cpu = cpu_ns.map_or(String::new(), |ns| {
            format!("{:.3} cpu micros/op, ", ns as f64 / 1e3 / lookups)
        });
        println!(
            "readrandom : {:.3} micros/op ({cpu}{} lookups, all found; {})",
            wall_s * 1e6 / lookups,
            per_round * rounds,
            index_type.name()
        );
    }
    for (_, path, table) in &tables {
        read_seq(table, num)?;
        fs.remove(path)?;
    }
    Ok(())
}

fn write_table(
    fs: &PosixFileSystem,
    path: &Path,
    opts: TableOptions,
    num: u64,
    value: &[u8],
) -> Result<(), BoxError> {
    let start = Instant::now();
    let compression = opts.compression;
    let mut builder = TableBuilder::new(opts, fs.create(path)?, path.display().to_string())?;
    for i in 0..num {
        let key = InternalKey::new(format!("{i:016}").as_bytes(), 1, ValueKind::Value);
        builder.add(key.encoded(), value)?;
    }
    let props = builder.finish()?;
    builder.sync()?;
    let write_s = start.elapsed().as_secs_f64();
    println!(
        "write      : {num} entries, {} data blocks ({} with a hash index), {:.1} MiB file ({compression}, {} bytes of data blocks), {:.3} micros/op, {:.1} MB/s",
        props.num_data_blocks,
        props.num_data_blocks_with_hash_index,
        fs.file_size(path)? as f64 / 1048576.0,
        props.data_size,
        write_s * 1e6 / num.max(1) as f64,
        (props.raw_key_size + props.raw_value_size) as f64 / write_s / 1e6
    );
    Ok(())
}

/// Looks up `lookups` keys drawn by an xorshift sequence started from
/// `seed`; returns how many were found (checking each value).
fn read_random(
    table: &TableReader,
    num: u64,
    lookups: u64,
    seed: u64,
    value: &[u8],
) -> Result<u64, BoxError> {
    use std::fmt::Write as _;
    let mut found = 0u64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ seed.wrapping_mul(0xff51_afd7_ed55_8ccd);
    let mut user = String::with_capacity(16);
    for _ in 0..lookups {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        user.clear();
        write!(user, "{:016}", x % num.max(1))?;
        let lookup = InternalKey::new(user.as_bytes(), MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
        if let Some(e) = table.get(lookup.encoded(), filter_hash(user.as_bytes()))? {
            assert_eq!(&e.value[..], value, "wrong value for {user}");
            found += 1;
        }
    }
    Ok(found)
}

fn read_seq(table: &Arc<TableReader>, num: u64) -> Result<(), BoxError> {
    let start = Instant::now();
    let mut it = table.iter();
    it.seek_to_first();
    let mut n = 0u64;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status()?;
    let scan_s = start.elapsed().as_secs_f64();
    println!(
        "readseq    : {:.3} micros/op ({n} entries)",
        scan_s * 1e6 / n.max(1) as f64
    );
    if n != num {
        return Err("scan did not return every entry".into());
    }
    Ok(())
}

/// Nanoseconds this thread has run on a CPU (Linux schedstat), if known.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}
