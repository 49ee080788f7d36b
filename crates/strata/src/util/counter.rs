//! A counter many threads add to without sharing a cache line: each thread
//! adds to one of a few padded shards, and a read sums them. For statistics
//! on hot paths (point reads), where one shared atomic would bounce between
//! cores.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SHARDS: usize = 16;

#[repr(align(64))]
#[derive(Debug, Default)]
struct Shard(AtomicU64);

/// A sharded, monotonic `u64` counter; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct ShardedCounter {
    shards: [Shard; SHARDS],
}

/// Hands each thread its shard, round robin.
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_SHARD: usize = NEXT_SHARD.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

impl ShardedCounter {
    /// Adds `n`.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        let i = MY_SHARD.with(|s| *s);
        self.shards[i].0.fetch_add(n, Ordering::Relaxed);
    }

    /// The total so far (a sum of shards read one after another, so only
    /// approximate while other threads add).
    pub(crate) fn sum(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_add_up() {
        let c = ShardedCounter::default();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        c.add(1);
                    }
                });
            }
        });
        c.add(5);
        assert_eq!(c.sum(), 80_005);
    }
}
