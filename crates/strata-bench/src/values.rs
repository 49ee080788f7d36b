//! Values as db_bench makes them (`RandomGenerator` in
//! `tools/db_bench_tool.cc` and `test::CompressibleString`).
//!
//! At least 1 MiB (and at least one value) of data is built once from
//! 100-byte pieces: each piece is `max(1, int(100 * compression_ratio))`
//! printable random characters `' ' + Uniform(95)` from the Park-Miller
//! generator seeded with 301, repeated to 100 bytes. A compressor therefore
//! shrinks it to about `compression_ratio` of its size. Values are
//! consecutive windows of this data, wrapping to the start.

use crate::random::Random;

/// Bytes of one compressible piece.
const PIECE_BYTES: usize = 100;
/// Minimum bytes of data: larger than a compressor's window (32 KiB).
const DATA_BYTES_MIN: usize = 1 << 20;
/// db_bench's seed for the value data.
const VALUE_SEED: u32 = 301;

/// Produces values of a fixed size.
#[derive(Debug, Clone)]
pub struct ValueGenerator {
    data: Vec<u8>,
    pos: usize,
    value_size: usize,
}

impl ValueGenerator {
    /// Values of `value_size` bytes compressible to `compression_ratio`.
    pub fn new(value_size: usize, compression_ratio: f64) -> ValueGenerator {
        let mut rnd = Random::new(VALUE_SEED);
        let target = DATA_BYTES_MIN.max(value_size);
        let mut data = Vec::with_capacity(target + PIECE_BYTES);
        let mut piece = Vec::with_capacity(PIECE_BYTES);
        while data.len() < target {
            compressible_string(&mut rnd, compression_ratio, PIECE_BYTES, &mut piece);
            data.extend_from_slice(&piece);
        }
        ValueGenerator {
            data,
            pos: 0,
            value_size,
        }
    }

    /// The next value.
    pub fn generate(&mut self) -> &[u8] {
        let len = self.value_size;
        debug_assert!(len <= self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}

/// `len` bytes made of `int(len * fraction)` random printable bytes
/// repeated (`test::CompressibleString`).
fn compressible_string(rnd: &mut Random, fraction: f64, len: usize, dst: &mut Vec<u8>) {
    let raw = ((len as f64 * fraction) as usize).max(1);
    let raw_data: Vec<u8> = (0..raw).map(|_| b' ' + rnd.uniform(95) as u8).collect();
    dst.clear();
    while dst.len() < len {
        dst.extend_from_slice(&raw_data);
    }
    dst.truncate(len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_repeat_a_random_prefix() {
        let mut g = ValueGenerator::new(100, 0.25);
        let v = g.generate().to_vec();
        // 25 random bytes, repeated four times.
        assert_eq!(&v[..25], &v[25..50]);
        assert_eq!(&v[..25], &v[75..100]);
        assert!(v.iter().all(|b| (b' '..=b'~').contains(b)));
        // The first byte: ' ' + (301 * 16807 mod (2^31-1)) % 95.
        assert_eq!(v[0], b' ' + ((301u64 * 16807) % 95) as u8);
        // The next value is the next window of the data.
        let w = g.generate().to_vec();
        assert_ne!(v, w);
    }

    #[test]
    fn byte_exact_against_rocksdb_db_bench() {
        // Values RocksDB's db_bench 7.8.3 wrote for keys 0 and 1 with
        // `--value_size=20` (default --compression_ratio=0.5), and for key 0
        // with `--value_size=30 --compression_ratio=0.25` (read back with
        // `ldb scan --hex`).
        let mut g = ValueGenerator::new(20, 0.5);
        assert_eq!(
            hex(g.generate()),
            "5E7B56687A22212F25774D5A3B276120462F5245"
        );
        assert_eq!(
            hex(g.generate()),
            "5A4A34547740254E587879323F2E417256435A32"
        );
        let mut g = ValueGenerator::new(30, 0.25);
        assert_eq!(
            hex(g.generate()),
            "5E7B56687A22212F25774D5A3B276120462F52455A4A3454775E7B56687A"
        );
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02X}")).collect()
    }

    #[test]
    fn windows_wrap_around() {
        let mut g = ValueGenerator::new(1000, 0.5);
        let first = g.generate().to_vec();
        let n = g.data.len() / 1000;
        for _ in 1..n {
            g.generate();
        }
        assert_eq!(g.generate(), &first[..]);
    }

    #[test]
    fn ratio_one_is_all_random() {
        let mut g = ValueGenerator::new(100, 1.0);
        let v = g.generate();
        assert_ne!(&v[..50], &v[50..]);
    }
}
