//! db_bench's two random number generators, reproduced so that the same
//! `--seed` gives the same keys and values as RocksDB's tool:
//!
//! - [`Random`]: the Park-Miller "minimal standard" generator of
//!   `util/random.h` (seed 301 makes the value data);
//! - [`Random64`]: `std::mt19937_64`, which db_bench's per-thread
//!   `Random64` wraps (seeded with `seed + thread number`), picking keys.

/// Park-Miller: `seed = seed * 16807 mod (2^31 - 1)`.
#[derive(Debug, Clone)]
pub struct Random {
    seed: u32,
}

const M31: u32 = 2_147_483_647;

impl Random {
    /// A generator; a seed of 0 or `2^31 - 1` (mod `2^31`) becomes 1, as in
    /// RocksDB, since the sequence would otherwise be constant.
    pub fn new(seed: u32) -> Random {
        let s = seed & M31;
        Random {
            seed: if s == 0 || s == M31 { 1 } else { s },
        }
    }

    /// The next value, in `[1, 2^31 - 2]` (RocksDB's `Random::Next`).
    pub fn next_u32(&mut self) -> u32 {
        let product = u64::from(self.seed) * 16807;
        // (product % M) computed with ((x << 31) % M) == x.
        let mut s = ((product >> 31) + (product & u64::from(M31))) as u32;
        if s > M31 {
            s -= M31;
        }
        self.seed = s;
        s
    }

    /// Uniform in `[0, n)`; `n` must be positive.
    pub fn uniform(&mut self, n: u32) -> u32 {
        assert!(n > 0, "uniform(0)");
        self.next_u32() % n
    }
}

const MT_N: usize = 312;
const MT_M: usize = 156;
const MT_MATRIX_A: u64 = 0xB502_6F5A_A966_19E9;
const MT_UPPER: u64 = 0xFFFF_FFFF_8000_0000;
const MT_LOWER: u64 = 0x7FFF_FFFF;

/// The 64-bit Mersenne Twister, bit for bit `std::mt19937_64`.
#[derive(Clone)]
pub struct Random64 {
    state: Box<[u64; MT_N]>,
    index: usize,
}

impl std::fmt::Debug for Random64 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Random64")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Random64 {
    /// A generator seeded as `std::mt19937_64(seed)`.
    pub fn new(seed: u64) -> Random64 {
        let mut state = Box::new([0u64; MT_N]);
        state[0] = seed;
        for i in 1..MT_N {
            let prev = state[i - 1];
            state[i] = 6_364_136_223_846_793_005u64
                .wrapping_mul(prev ^ (prev >> 62))
                .wrapping_add(i as u64);
        }
        Random64 { state, index: MT_N }
    }

    fn twist(&mut self) {
        let mt = &mut self.state;
        for i in 0..MT_N {
            let x = (mt[i] & MT_UPPER) | (mt[(i + 1) % MT_N] & MT_LOWER);
            let mag = if x & 1 == 1 { MT_MATRIX_A } else { 0 };
            mt[i] = mt[(i + MT_M) % MT_N] ^ (x >> 1) ^ mag;
        }
        self.index = 0;
    }

    /// The next 64 random bits (RocksDB's `Random64::Next`).
    pub fn next_u64(&mut self) -> u64 {
        if self.index >= MT_N {
            self.twist();
        }
        let mut x = self.state[self.index];
        self.index += 1;
        x ^= (x >> 29) & 0x5555_5555_5555_5555;
        x ^= (x << 17) & 0x71D6_7FFF_EDA6_0000;
        x ^= (x << 37) & 0xFFF7_EEE0_0000_0000;
        x ^= x >> 43;
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_64_matches_the_cpp_standard() {
        // [rand.predef]: the 10000th invocation of a default-constructed
        // mt19937_64 (seed 5489) produces 9981545732273789042.
        let mut r = Random64::new(5489);
        let mut v = 0;
        for _ in 0..10_000 {
            v = r.next_u64();
        }
        assert_eq!(v, 9_981_545_732_273_789_042);
        // First outputs, from g++'s std::mt19937_64.
        assert_eq!(Random64::new(5489).next_u64(), 14_514_284_786_278_117_030);
        let mut r = Random64::new(42);
        assert_eq!(r.next_u64(), 13_930_160_852_258_120_406);
        assert_eq!(r.next_u64(), 11_788_048_577_503_494_824);
    }

    #[test]
    fn park_miller_sequence() {
        // seed * 16807 mod (2^31 - 1), step by step.
        let mut r = Random::new(301);
        assert_eq!(r.next_u32(), 301 * 16807);
        assert_eq!(
            u64::from(r.next_u32()),
            (301u64 * 16807 * 16807) % 2_147_483_647
        );
        // Zero would stay zero forever: it is replaced by 1.
        assert_eq!(Random::new(0).next_u32(), 16807);
    }
}
