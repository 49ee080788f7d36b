//! A rate limiter for background writes (RocksDB's `GenericRateLimiter`,
//! simplified): a token bucket refilled every `refill_period` with
//! `rate × refill_period` bytes, holding at most one period's worth. A
//! write asks for its bytes before it goes to the file and waits for the
//! refills it needs; a write larger than one period's worth is taken in
//! pieces. Flush and compaction outputs go through it (RocksDB's default
//! mode, writes only); the log and the manifest do not.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::WritableFile;
use crate::error::Result;

/// Bytes a background writer may write per second, shared by every
/// flush and compaction of a database.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    /// Bytes added per refill (and the most the bucket holds).
    per_refill: u64,
    refill_period: Duration,
    bucket: Mutex<Bucket>,
    refilled: Condvar,
}

#[derive(Debug)]
struct Bucket {
    available: u64,
    next_refill: Instant,
}

impl RateLimiter {
    /// `rate_bytes_per_sec` bytes per second, refilled every
    /// `refill_period` (both positive).
    pub(crate) fn new(rate_bytes_per_sec: u64, refill_period: Duration) -> RateLimiter {
        let per_refill =
            ((rate_bytes_per_sec as u128 * refill_period.as_micros()) / 1_000_000).max(1) as u64;
        RateLimiter {
            per_refill,
            refill_period,
            bucket: Mutex::new(Bucket {
                available: per_refill,
                next_refill: Instant::now() + refill_period,
            }),
            refilled: Condvar::new(),
        }
    }

    /// Waits until `bytes` may be written, and takes them from the bucket.
    pub(crate) fn request(&self, mut bytes: u64) {
        let mut b = self.bucket.lock();
        while bytes > 0 {
            let now = Instant::now();
            if now >= b.next_refill {
                // Periods that passed unused do not pile up: the bucket
                // holds at most one period's worth.
                let periods = 1 + (now - b.next_refill).as_nanos() / self.refill_period.as_nanos();
                b.available = self.per_refill;
                b.next_refill += self.refill_period * periods.min(u32::MAX as u128) as u32;
                self.refilled.notify_all();
            }
            let take = bytes.min(b.available);
            b.available -= take;
            bytes -= take;
            if bytes > 0 {
                let until = b.next_refill;
                self.refilled.wait_until(&mut b, until);
            }
        }
    }
}

/// A table file whose appends are paced by a [`RateLimiter`].
pub(crate) struct RateLimitedFile {
    inner: Box<dyn WritableFile>,
    limiter: Arc<RateLimiter>,
}

impl RateLimitedFile {
    pub(crate) fn wrap(
        inner: Box<dyn WritableFile>,
        limiter: Arc<RateLimiter>,
    ) -> Box<dyn WritableFile> {
        Box::new(RateLimitedFile { inner, limiter })
    }
}

impl std::fmt::Debug for RateLimitedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitedFile").finish_non_exhaustive()
    }
}

impl WritableFile for RateLimitedFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.limiter.request(data.len() as u64);
        self.inner.append(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The limiter never lets bytes through faster than its rate: three
    /// periods' worth beyond the first take at least three periods.
    #[test]
    fn writes_wait_for_their_refills() {
        let period = Duration::from_millis(20);
        let limiter = RateLimiter::new(1_000_000, period); // 20,000 bytes a period
        let start = Instant::now();
        limiter.request(20_000); // the first period's worth, at once
        limiter.request(60_000);
        let took = start.elapsed();
        assert!(took >= period * 3 - Duration::from_millis(2), "{took:?}");
        // A small write after a long pause goes at once.
        std::thread::sleep(period * 2);
        let start = Instant::now();
        limiter.request(100);
        assert!(start.elapsed() < period, "{:?}", start.elapsed());
    }

    /// Several writers share one bucket.
    #[test]
    fn writers_share_the_rate() {
        let period = Duration::from_millis(10);
        let limiter = Arc::new(RateLimiter::new(1_000_000, period)); // 10,000 a period
        let start = Instant::now();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = limiter.clone();
                std::thread::spawn(move || l.request(20_000))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // 80,000 bytes: the first 10,000 at once, then 7 more periods.
        assert!(
            start.elapsed() >= period * 7 - Duration::from_millis(2),
            "{:?}",
            start.elapsed()
        );
    }
}
