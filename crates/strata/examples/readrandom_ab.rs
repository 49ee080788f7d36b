//! Random point lookups alternated between existing databases in one
//! process, so that each sees the same machine load: the way to compare
//! two builds of the same data (say W2's index types 0 and 1) on a shared
//! machine, where two separate runs differ by more than the effect.
//!
//! ```text
//! cargo run --release --example readrandom_ab -- --num=N [--reads=N]
//!     [--rounds=N] [--cache_size=BYTES] DB...
//! ```
//!
//! Keys are db_bench's for `--key_size=8`: the integers `0..num` as 8-byte
//! big-endian strings, drawn at random (xorshift, a different sequence each
//! round). Every database gets its own block cache of `--cache_size` bytes
//! (default 4 GiB), warmed by one untimed pass of `reads / rounds` lookups;
//! then `--rounds` rounds (default 10) each read `reads / rounds` keys from
//! every database, the order rotating per round. Prints micros/op per
//! database over all rounds, and the median of the per-round figures.

use std::path::PathBuf;
use std::time::Instant;

use strata_kv::{BlockBasedOptions, Cache, Options, DB};

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    let mut num: u64 = 0;
    let mut reads: u64 = 5_000_000;
    let mut rounds: u64 = 10;
    let mut cache_size: usize = 4 << 30;
    let mut paths = Vec::new();
    for arg in std::env::args().skip(1) {
        let Some((name, value)) = arg.split_once('=') else {
            paths.push(PathBuf::from(arg));
            continue;
        };
        match name {
            "--num" => num = value.parse()?,
            "--reads" => reads = value.parse()?,
            "--rounds" => rounds = value.parse()?,
            "--cache_size" => cache_size = value.parse()?,
            _ => return Err(format!("unknown flag {name}").into()),
        }
    }
    if num == 0 || paths.is_empty() || rounds == 0 {
        return Err(
            "usage: readrandom_ab --num=N [--reads=N] [--rounds=N] [--cache_size=BYTES] DB..."
                .into(),
        );
    }
    let per_round = (reads / rounds).max(1);
    let mut dbs = Vec::new();
    for path in &paths {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&Cache::new_lru_cache(cache_size));
        let mut options = Options::default();
        options.create_if_missing(false);
        options.set_max_open_files(-1);
        options.set_block_based_table_factory(&table);
        let db = DB::open(&options, path)?;
        read_random(&db, num, per_round, u64::MAX)?;
        dbs.push(db);
    }
    let mut per_db: Vec<Vec<f64>> = vec![Vec::new(); dbs.len()];
    for round in 0..rounds {
        for i in 0..dbs.len() {
            let i = (i + round as usize) % dbs.len();
            let start = Instant::now();
            read_random(&dbs[i], num, per_round, round)?;
            per_db[i].push(start.elapsed().as_secs_f64() * 1e6 / per_round as f64);
        }
    }
    for (path, mut micros) in paths.iter().zip(per_db) {
        let mean = micros.iter().sum::<f64>() / micros.len() as f64;
        micros.sort_by(f64::total_cmp);
        let median = micros[micros.len() / 2];
        println!(
            "{}: {mean:.3} micros/op (median round {median:.3}, min {:.3}, max {:.3}; {} rounds of {per_round})",
            path.display(),
            micros[0],
            micros[micros.len() - 1],
            micros.len()
        );
    }
    Ok(())
}

/// Looks up `lookups` random keys of `0..num`; fails unless all are found.
fn read_random(db: &DB, num: u64, lookups: u64, seed: u64) -> Result<(), BoxError> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ seed.wrapping_mul(0xff51_afd7_ed55_8ccd);
    for _ in 0..lookups {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = (x % num).to_be_bytes();
        if db.get_pinned(key)?.is_none() {
            return Err(format!("key {} not found", x % num).into());
        }
    }
    Ok(())
}
