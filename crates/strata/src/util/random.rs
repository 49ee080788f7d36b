//! A cheap pseudo-random sequence for sampling decisions (skiplist tower
//! heights, read sampling): xorshift64*, seeded per thread. Not for
//! anything that needs unpredictability.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The next number of the xorshift64* sequence in `state` (a state that
/// is not zero never becomes zero).
pub(crate) fn next_random(state: &mut u64) -> u32 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
}

/// A seed for a sequence, different for every thread and every call.
pub(crate) fn thread_seed() -> u64 {
    static THREADS: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|state| {
        let mut x = state.get();
        if x == 0 {
            // Odd multiples of the golden ratio: distinct and never zero.
            let n = THREADS.fetch_add(1, Ordering::Relaxed);
            x = (2 * n + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        }
        next_random(&mut x);
        state.set(x);
        x
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ_and_sequences_are_spread() {
        let (a, b) = (thread_seed(), thread_seed());
        assert_ne!(a, b);
        assert_ne!(a, 0);
        let mut state = a;
        let mut below_half = 0;
        for _ in 0..10_000 {
            if next_random(&mut state) < u32::MAX / 2 {
                below_half += 1;
            }
        }
        assert!((4_500..5_500).contains(&below_half), "{below_half}");
    }
}
