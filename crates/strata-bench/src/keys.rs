//! Keys as db_bench makes them (`GenerateKeyFromInt` and `KeyGenerator` in
//! RocksDB's `tools/db_bench_tool.cc`).
//!
//! A key is made from an integer `v` and is exactly `key_size` bytes:
//!
//! ```text
//! keys_per_prefix = 0:  | v, big-endian, low min(key_size, 8) bytes | '0' padding |
//! keys_per_prefix > 0:  | prefix, big-endian, low min(prefix_size, 8) bytes | '0' * (prefix_size - 8) |
//!                       | v, big-endian, low min(rest, 8) bytes | '0' padding |
//!   where prefix = v % (num / keys_per_prefix)
//! ```
//!
//! The padding is the ASCII digit `'0'` (0x30), not a zero byte. With
//! `--key_size=8` consecutive integers are consecutive 8-byte big-endian
//! keys; with `--keys_per_prefix=K --prefix_size=8` writing `v = 0..num` in
//! order makes `num / K` interleaved ascending streams, one per prefix.

use crate::error::{Error, Result};
use crate::random::Random64;

/// The shape of the keys of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFormat {
    key_size: usize,
    prefix_size: usize,
    keys_per_prefix: u64,
    /// Added to every key number (`--key_offset`).
    offset: u64,
}

/// Bytes of the integer written into a key (and into a prefix).
const INT_BYTES: usize = 8;
/// What db_bench pads keys and long prefixes with.
const PAD: u8 = b'0';

impl KeyFormat {
    /// A key format; fails as db_bench does when the prefix does not fit.
    pub fn new(key_size: usize, prefix_size: usize, keys_per_prefix: u64) -> Result<KeyFormat> {
        if key_size == 0 {
            return Err(Error::Usage("--key_size must be positive".into()));
        }
        if keys_per_prefix > 0 && prefix_size > key_size {
            return Err(Error::Usage(format!(
                "prefix size {prefix_size} is larger than key size {key_size}"
            )));
        }
        Ok(KeyFormat {
            key_size,
            prefix_size,
            keys_per_prefix,
            offset: 0,
        })
    }

    /// The same format with `offset` added to every key number.
    pub fn with_offset(&self, offset: u64) -> KeyFormat {
        KeyFormat { offset, ..*self }
    }

    /// Bytes of every key.
    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// The same format with keys of `key_size` bytes (readmissing uses one
    /// byte more, so that every key it looks for is absent).
    pub fn with_key_size(&self, key_size: usize) -> KeyFormat {
        KeyFormat { key_size, ..*self }
    }

    /// A zeroed buffer of the right size for [`KeyFormat::fill`].
    pub fn buffer(&self) -> Vec<u8> {
        vec![0; self.key_size]
    }

    /// Writes the key for `v` into `key` (exactly `key_size` bytes).
    /// `num_keys` is `--num`: it sets the number of prefixes.
    pub fn fill(&self, v: u64, num_keys: u64, key: &mut [u8]) {
        assert_eq!(key.len(), self.key_size, "key buffer of the wrong size");
        let v = v.wrapping_add(self.offset);
        let mut pos = 0;
        // keys_per_prefix = 0: no prefix. The runner checks num >=
        // keys_per_prefix, so there is at least one prefix.
        if let Some(num_prefix) = num_keys.checked_div(self.keys_per_prefix) {
            let prefix = v % num_prefix.max(1);
            let n = self.prefix_size.min(INT_BYTES);
            put_low_bytes_be(prefix, &mut key[..n]);
            if self.prefix_size > INT_BYTES {
                key[INT_BYTES..self.prefix_size].fill(PAD);
            }
            pos = self.prefix_size;
        }
        let n = (self.key_size - pos).min(INT_BYTES);
        put_low_bytes_be(v, &mut key[pos..pos + n]);
        key[pos + n..].fill(PAD);
    }

    /// The key for `v`, allocated.
    pub fn key(&self, v: u64, num_keys: u64) -> Vec<u8> {
        let mut k = self.buffer();
        self.fill(v, num_keys, &mut k);
        k
    }
}

/// The low `out.len()` (<= 8) bytes of `v`, most significant first.
fn put_low_bytes_be(v: u64, out: &mut [u8]) {
    let n = out.len();
    debug_assert!(n <= INT_BYTES);
    out.copy_from_slice(&v.to_be_bytes()[INT_BYTES - n..]);
}

/// The order in which a write benchmark visits key numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOrder {
    /// 0, 1, 2, ... (fillseq); `descending` gives num-1, ..., 0 (ours:
    /// `--seq_descending`).
    Sequential {
        /// Count down instead of up.
        descending: bool,
    },
    /// Uniform random with repeats (fillrandom, overwrite, fillsync).
    Random,
    /// A random permutation of 0..num (filluniquerandom).
    UniqueRandom,
}

/// Yields key numbers in a [`WriteOrder`], as db_bench's `KeyGenerator`.
#[derive(Debug)]
pub struct KeySequence {
    order: WriteOrder,
    num: u64,
    next: u64,
    permutation: Vec<u64>,
}

impl KeySequence {
    /// A sequence over `0..num`. `seed` shuffles the unique-random order
    /// (db_bench shuffles with `std::shuffle`, whose draws are not
    /// specified by the C++ standard; ours is a Fisher-Yates shuffle over
    /// mt19937_64, so the permutation differs from db_bench's, not its kind).
    pub fn new(order: WriteOrder, num: u64, seed: u64) -> KeySequence {
        let mut permutation = Vec::new();
        if order == WriteOrder::UniqueRandom {
            permutation = (0..num).collect();
            let mut rng = Random64::new(seed);
            for i in (1..permutation.len()).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                permutation.swap(i, j);
            }
        }
        KeySequence {
            order,
            num,
            next: 0,
            permutation,
        }
    }

    /// The next key number; `rand` is the thread's generator (used by the
    /// random order only, one draw per key, as db_bench).
    pub fn next(&mut self, rand: &mut Random64) -> u64 {
        let i = self.next;
        self.next += 1;
        match self.order {
            WriteOrder::Sequential { descending: false } => i,
            WriteOrder::Sequential { descending: true } => {
                self.num.saturating_sub(1).saturating_sub(i)
            }
            WriteOrder::Random => rand.next_u64() % self.num.max(1),
            WriteOrder::UniqueRandom => {
                // db_bench asserts next < num; the write loop stops at num.
                let idx = (i % self.num.max(1)) as usize;
                self.permutation.get(idx).copied().unwrap_or(i)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fillseq_keys_are_padded_big_endian_integers() {
        let f = KeyFormat::new(8, 0, 0).unwrap();
        assert_eq!(f.key(0, 1000), [0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(f.key(1, 1000), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(f.key(0x0102_0304_0506_0708, 1000), [1, 2, 3, 4, 5, 6, 7, 8]);
        // 16 bytes: the integer, then eight ASCII '0's (0x30).
        let f = KeyFormat::new(16, 0, 0).unwrap();
        let mut want = vec![0, 0, 0, 0, 0, 0, 0x01, 0x00];
        want.extend_from_slice(b"00000000");
        assert_eq!(f.key(256, 1000), want);
        // Shorter than 8: the low bytes of the integer.
        let f = KeyFormat::new(3, 0, 0).unwrap();
        assert_eq!(f.key(0x0A0B_0C0D, 1000), [0x0B, 0x0C, 0x0D]);
        // prefix_size without keys_per_prefix changes nothing.
        let f = KeyFormat::new(8, 4, 0).unwrap();
        assert_eq!(f.key(5, 1000), [0, 0, 0, 0, 0, 0, 0, 5]);
    }

    #[test]
    fn keys_per_prefix_makes_interleaved_streams() {
        // num 100, 25 keys per prefix: 4 prefixes, prefix = v % 4.
        let f = KeyFormat::new(16, 8, 25).unwrap();
        assert_eq!(
            f.key(0, 100),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            f.key(7, 100),
            [0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 7]
        );
        assert_eq!(
            f.key(258, 100),
            [0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2]
        );
        // A 10-byte prefix: 8 bytes of the prefix number, then "00"; the key
        // number gets the remaining 6 bytes, its low 6 bytes.
        let f = KeyFormat::new(16, 10, 50).unwrap();
        let mut want = vec![0, 0, 0, 0, 0, 0, 0, 1, b'0', b'0'];
        want.extend_from_slice(&[0, 0, 0, 0, 0, 3]);
        assert_eq!(f.key(3, 100), want);
        // A 4-byte prefix and an 8-byte key: 4 bytes each, the low ones.
        // 10 prefixes; 0x1_0000_0013 = 4294967315, whose prefix is 5.
        let f = KeyFormat::new(8, 4, 10).unwrap();
        assert_eq!(f.key(0x1_0000_0013, 100), [0, 0, 0, 5, 0, 0, 0, 0x13]);
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn byte_exact_against_rocksdb_db_bench() {
        // `db_bench --benchmarks=fillseq --num=8 --keys_per_prefix=2
        // --prefix_size=10 --key_size=20` (RocksDB 7.8.3), then `ldb scan
        // --hex`: these are the keys it wrote for v = 0 and v = 4..7.
        let f = KeyFormat::new(20, 10, 2).unwrap();
        for (v, want) in [
            (0, "0000000000000000303000000000000000003030"),
            (4, "0000000000000000303000000000000000043030"),
            (5, "0000000000000001303000000000000000053030"),
            (6, "0000000000000002303000000000000000063030"),
            (7, "0000000000000003303000000000000000073030"),
        ] {
            assert_eq!(f.key(v, 8), hex(want), "v={v}");
        }
        // `--key_size=16` without prefixes.
        let f = KeyFormat::new(16, 0, 0).unwrap();
        assert_eq!(f.key(3, 4), hex("00000000000000033030303030303030"));
    }

    #[test]
    fn random_order_draws_as_db_bench() {
        // `db_bench --benchmarks=fillrandom --num=1000 --seed=5` (RocksDB
        // 7.8.3) wrote 631 distinct keys, the smallest 2, 3, 4 and the
        // largest 998, 999. Its first thread's generator is seeded with
        // seed + 1, and each batch draws once (the database) before its key.
        let mut rand = Random64::new(5 + 1);
        let mut s = KeySequence::new(WriteOrder::Random, 1000, 5);
        let mut keys = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            rand.next_u64();
            keys.insert(s.next(&mut rand));
        }
        assert_eq!(keys.len(), 631);
        let all: Vec<u64> = keys.into_iter().collect();
        assert_eq!(all[..3], [2, 3, 4]);
        assert_eq!(all[all.len() - 2..], [998, 999]);
    }

    #[test]
    fn prefix_longer_than_key_is_rejected() {
        assert!(KeyFormat::new(8, 9, 1).is_err());
        assert!(KeyFormat::new(8, 9, 0).is_ok());
    }

    #[test]
    fn sequences() {
        let mut r = Random64::new(1);
        let mut s = KeySequence::new(WriteOrder::Sequential { descending: false }, 5, 0);
        assert_eq!(
            (0..5).map(|_| s.next(&mut r)).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        let mut s = KeySequence::new(WriteOrder::Sequential { descending: true }, 5, 0);
        assert_eq!(
            (0..5).map(|_| s.next(&mut r)).collect::<Vec<_>>(),
            [4, 3, 2, 1, 0]
        );
        let mut s = KeySequence::new(WriteOrder::UniqueRandom, 1000, 7);
        let mut seen: Vec<u64> = (0..1000).map(|_| s.next(&mut r)).collect();
        assert_ne!(seen[..10], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
        // Random: the thread generator modulo num, one draw per key.
        let mut s = KeySequence::new(WriteOrder::Random, 1000, 0);
        let (mut a, mut b) = (Random64::new(9), Random64::new(9));
        for _ in 0..100 {
            assert_eq!(s.next(&mut a), b.next_u64() % 1000);
        }
    }
}
