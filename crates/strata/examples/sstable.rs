//! Writes a table file of N sequential keys, reads it back with point
//! lookups and a full scan, and reports the timings.
//!
//! ```text
//! cargo run --release --example sstable -- [--num=N] [--value_size=B]
//!     [--compression=none|snappy|lz4|zstd] [--dir=PATH]
//! ```

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use strata::compression::CompressionType;
use strata::env::{FileSystem, PosixFileSystem};
use strata::iter::InternalIterator;
use strata::key::{BytewiseComparator, InternalKey, ValueKind, MAX_SEQUENCE_NUMBER};
use strata::sst::filter::filter_hash;
use strata::sst::{TableBuilder, TableOptions, TableReader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut num: u64 = 1_000_000;
    let mut value_size = 100usize;
    let mut compression = CompressionType::Snappy;
    let mut dir = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for arg in &args {
        let (name, value) = arg
            .split_once('=')
            .ok_or_else(|| format!("expected --name=value, got {arg}"))?;
        match name {
            "--num" => num = value.parse()?,
            "--value_size" => value_size = value.parse()?,
            "--compression" => compression = value.parse()?,
            "--dir" => dir = PathBuf::from(value),
            _ => return Err(format!("unknown flag {name}").into()),
        }
    }
    let fs = PosixFileSystem::new();
    let path = dir.join(format!("strata-example-{}.sst", std::process::id()));
    let opts = TableOptions {
        compression,
        ..TableOptions::default()
    };

    let start = Instant::now();
    let mut builder = TableBuilder::new(opts, fs.create(&path)?, path.display().to_string())?;
    let value: Vec<u8> = (0..value_size).map(|i| (i % 251) as u8 ^ b'a').collect();
    for i in 0..num {
        let key = InternalKey::new(format!("{i:016}").as_bytes(), 1, ValueKind::Value);
        builder.add(key.encoded(), &value)?;
    }
    let props = builder.finish()?;
    builder.sync()?;
    let write_s = start.elapsed().as_secs_f64();
    let file_size = fs.file_size(&path)?;
    println!(
        "write      : {num} entries, {} data blocks, {:.1} MiB file ({compression}), {:.3} micros/op, {:.1} MB/s",
        props.num_data_blocks,
        file_size as f64 / 1048576.0,
        write_s * 1e6 / num as f64,
        (props.raw_key_size + props.raw_value_size) as f64 / write_s / 1e6
    );

    let table = Arc::new(TableReader::open(
        fs.open_random_access(&path)?,
        path.display().to_string(),
        Arc::new(BytewiseComparator),
    )?);
    let lookups = num.min(200_000);
    let start = Instant::now();
    let mut found = 0u64;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..lookups {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let user = format!("{:016}", x % num.max(1));
        let lookup = InternalKey::new(user.as_bytes(), MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
        if let Some(e) = table.get(lookup.encoded(), filter_hash(user.as_bytes()))? {
            assert_eq!(&e.value[..], &value[..], "wrong value for {user}");
            found += 1;
        }
    }
    let read_s = start.elapsed().as_secs_f64();
    println!(
        "readrandom : {:.3} micros/op ({found} of {lookups} found)",
        read_s * 1e6 / lookups.max(1) as f64
    );

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
    fs.remove(&path)?;
    if n != num || found != lookups {
        return Err("table did not return every entry".into());
    }
    Ok(())
}
