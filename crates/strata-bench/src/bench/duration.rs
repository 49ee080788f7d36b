//! When a benchmark loop stops (db_bench's `Duration`): after `max_ops`
//! operations, or, with a time limit, after `max_seconds` (checked about
//! every 1000 operations, so the clock is not read per operation).

use std::time::Instant;

/// Operations between clock reads (db_bench's `--ops_between_duration_checks`).
const OPS_BETWEEN_CHECKS: u64 = 1000;

/// A loop bound by operations or by time.
#[derive(Debug)]
pub struct Duration {
    max_seconds: u64,
    max_ops: u64,
    ops: u64,
    start: Instant,
}

impl Duration {
    /// `max_seconds` > 0 bounds by time (and ignores `max_ops`).
    pub fn new(max_seconds: u64, max_ops: u64) -> Duration {
        Duration {
            max_seconds,
            max_ops,
            ops: 0,
            start: Instant::now(),
        }
    }

    /// Counts `increment` (at least 1) more operations; true when the loop
    /// must stop before doing them. Without a time limit, a batch that would
    /// go past `max_ops` is not done, as in db_bench.
    pub fn done(&mut self, increment: u64) -> bool {
        let increment = increment.max(1);
        self.ops += increment;
        if self.max_seconds > 0 {
            if self.ops / OPS_BETWEEN_CHECKS != (self.ops - increment) / OPS_BETWEEN_CHECKS {
                return self.start.elapsed().as_secs() >= self.max_seconds;
            }
            return false;
        }
        self.ops > self.max_ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_ops() {
        let mut d = Duration::new(0, 3);
        let runs = (0..10).take_while(|_| !d.done(1)).count();
        assert_eq!(runs, 3);
        // Batches of 10 with 105 ops: 10 batches, 100 ops, as db_bench.
        let mut d = Duration::new(0, 105);
        let runs = (0..100).take_while(|_| !d.done(10)).count();
        assert_eq!(runs, 10);
    }

    #[test]
    fn by_time() {
        let mut d = Duration::new(1, 1);
        d.start -= std::time::Duration::from_secs(2);
        // The clock is read when the count crosses a multiple of 1000.
        assert!(!d.done(999));
        assert!(d.done(1));
    }
}
