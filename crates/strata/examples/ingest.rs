//! Loads N sorted keys into a fresh database two ways and times them: one
//! file written by `SstFileWriter` and ingested, against batches of puts
//! with the log off followed by a flush (the fastest write path).
//!
//! ```text
//! cargo run --release --example ingest -- [--num=N] [--value_size=B] [--dir=PATH]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use strata_kv::{Options, SstFileWriter, WriteBatch, WriteOptions, DB};

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let mut num: u64 = 1_000_000;
    let mut value_size = 100usize;
    let mut dir = PathBuf::from(if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    });
    for arg in std::env::args().skip(1) {
        let (name, value) = arg
            .split_once('=')
            .ok_or_else(|| format!("expected --name=value, got {arg}"))?;
        match name {
            "--num" => num = value.parse()?,
            "--value_size" => value_size = value.parse()?,
            "--dir" => dir = PathBuf::from(value),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let root = dir.join(format!("strata-ingest-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let key = |i: u64| format!("{i:016}");
    let value = vec![b'v'; value_size];

    // Ingestion: write the file, then add it.
    let start = Instant::now();
    let file = root.join("load.sst");
    let mut w = SstFileWriter::create(&opts);
    w.open(&file)?;
    for i in 0..num {
        w.put(key(i), &value)?;
    }
    w.finish()?;
    let written = start.elapsed();
    let db = DB::open(&opts, root.join("ingested"))?;
    let t = Instant::now();
    db.ingest_external_file(vec![&file])?;
    let ingested = t.elapsed();
    let total = start.elapsed();
    assert_eq!(db.get(key(num / 2))?.as_deref(), Some(&value[..]));
    drop(db);

    // Puts: batches of 1,000, no log, then a flush.
    let db = DB::open(&opts, root.join("puts"))?;
    let mut wo = WriteOptions::default();
    wo.disable_wal(true);
    let start = Instant::now();
    let mut batch = WriteBatch::default();
    for i in 0..num {
        batch.put(key(i), &value);
        if batch.len() == 1000 {
            db.write_opt(std::mem::take(&mut batch), &wo)?;
        }
    }
    if !batch.is_empty() {
        db.write_opt(batch, &wo)?;
    }
    db.flush()?;
    let puts = start.elapsed();
    drop(db);

    let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / num as f64;
    println!(
        "{num} keys of {} + {value_size} bytes: SstFileWriter {:.3} s + ingest {:.3} s = {:.3} micros/key; \
         puts without a log and a flush {:.3} micros/key",
        key(0).len(),
        written.as_secs_f64(),
        ingested.as_secs_f64(),
        per(total),
        per(puts)
    );
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
