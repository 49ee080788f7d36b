//! `Options::set_ratelimiter`: flushes and compactions write no faster
//! than the rate (a lower bound only: a slow machine only takes longer).

mod common;

use std::time::{Duration, Instant};

use common::TempDir;
use strata_kv::{DBCompressionType, Options, DB};

#[test]
fn a_flush_writes_no_faster_than_the_rate() {
    let dir = TempDir::new("rate_limiter");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_compression_type(DBCompressionType::None);
    // 2 MB/s, refilled every 10 ms.
    opts.set_ratelimiter(2_000_000, 10_000, 10);
    let db = DB::open(&opts, &dir.0).unwrap();
    let mut x: u64 = 7;
    for i in 0..10_000u32 {
        let value: Vec<u8> = (0..100)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                (x >> 56) as u8
            })
            .collect();
        db.put(format!("k{i:06}"), value).unwrap();
    }
    let start = Instant::now();
    db.flush().unwrap();
    let took = start.elapsed();
    let bytes: usize = db.live_files().unwrap().iter().map(|f| f.size).sum();
    assert!(bytes > 1_000_000, "{bytes} bytes");
    // All but the first period's 20,000 bytes wait for the rate.
    let least = Duration::from_secs_f64((bytes - 20_000) as f64 / 2_000_000.0);
    assert!(took >= least.mul_f64(0.95), "{bytes} bytes in {took:?}");
    // A rate of 0 removes the limit; the data is all there either way.
    opts.set_ratelimiter(0, 0, 0);
    drop(db);
    let db = DB::open(&opts, &dir.0).unwrap();
    assert_eq!(db.get("k000042").unwrap().map(|v| v.len()), Some(100));
}
