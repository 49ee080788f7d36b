//! The data block hash index: one-byte buckets after the restart array that
//! send a point lookup straight to the restart interval holding its user key
//! (RocksDB's `DataBlockHashIndex`). Layout in
//! `docs/format/block_hash_index.md`:
//!
//! ```text
//! hash_index  := bucket[num_buckets] (u8 each) | num_buckets (u16 LE, >= 1)
//! bucket      := 0..=252 restart interval | 254 collision | 255 empty
//! bucket of k := (xxh3_64(user key of k) as u32) % num_buckets
//! num_buckets := clamp(floor(distinct user keys / util_ratio), 1, 65535) | 1
//! ```
//!
//! A bucket names the restart interval holding the first entry of every
//! user key hashed to it; two keys whose first entries lie in different
//! intervals make it a collision. The builder writes the index only for
//! blocks of at most [`RESTARTS_MAX`] restart points, and only for user
//! comparators under which byte-different keys are never equal, so that a
//! hash of the bytes can stand in for equality.
//!
//! The builder belongs to one block builder; a [`HashIndex`] is a `Copy`
//! view of a validated block and may be read from any thread.

/// Bucket value: no user key of the block hashes here.
pub const BUCKET_EMPTY: u8 = 255;
/// Bucket value: user keys whose first entries lie in different restart
/// intervals hash here; the lookup falls back to binary search.
pub const BUCKET_COLLISION: u8 = 254;
/// Most restart points a block with a hash index may have: bucket values
/// 0..=252 name intervals, 253 is unused, 254 and 255 are markers.
pub const RESTARTS_MAX: u32 = 253;
/// Bytes of the bucket count stored after the buckets.
pub const NUM_BUCKETS_BYTES: usize = 2;
/// Most buckets a block holds (the count is a u16).
pub const NUM_BUCKETS_MAX: usize = u16::MAX as usize;

/// The hash of a user key: xxh3_64 with seed 0. It is the bloom filter's
/// hash too ([`crate::sst::filter::filter_hash`]), so a get hashes its key
/// once for the filter and every data block it reads.
pub fn user_key_hash(user_key: &[u8]) -> u64 {
    // One function, so the two can never drift apart: the get path hands
    // the filter's hash to the block lookup.
    crate::sst::filter::filter_hash(user_key)
}

/// The bucket of `hash` in a table of `num_buckets` (>= 1) buckets.
fn bucket_of(hash: u64, num_buckets: u16) -> usize {
    debug_assert!(num_buckets >= 1);
    (hash as u32 % u32::from(num_buckets.max(1))) as usize
}

/// Buckets for a block of `num_keys` distinct user keys: `num_keys /
/// util_ratio` rounded down (in f64), at least 1, at most 65535, and odd
/// as in RocksDB.
pub fn num_buckets_for(num_keys: usize, util_ratio: f64) -> u16 {
    debug_assert!(util_ratio.is_finite() && util_ratio > 0.0);
    // `as usize` saturates, and maps NaN to 0.
    let n = (num_keys as f64 / util_ratio) as usize;
    (n.clamp(1, NUM_BUCKETS_MAX) | 1) as u16
}

/// Collects the first restart interval of each user key of a block.
#[derive(Debug)]
pub struct HashIndexBuilder {
    util_ratio: f64,
    /// (low 32 bits of the hash, restart interval) per distinct user key.
    /// Only keys in intervals below [`RESTARTS_MAX`] are kept: a block with
    /// more restart points gets no index.
    entries: Vec<(u32, u8)>,
    /// Distinct user keys added, including those not kept.
    num_keys: usize,
}

impl HashIndexBuilder {
    /// A builder aiming at `util_ratio` user keys per bucket (> 0; the
    /// table options validate it).
    pub fn new(util_ratio: f64) -> HashIndexBuilder {
        assert!(
            util_ratio.is_finite() && util_ratio > 0.0,
            "util_ratio {util_ratio}"
        );
        HashIndexBuilder {
            util_ratio,
            entries: Vec::new(),
            num_keys: 0,
        }
    }

    /// Forgets every key, keeping the allocation.
    pub fn reset(&mut self) {
        self.entries.clear();
        self.num_keys = 0;
    }

    /// Records that the user key with `hash` first appears in restart
    /// interval `restart_index`. Call once per distinct user key, in order.
    pub fn add(&mut self, hash: u64, restart_index: usize) {
        self.num_keys += 1;
        if let Ok(index) = u8::try_from(restart_index) {
            if u32::from(index) < RESTARTS_MAX {
                self.entries.push((hash as u32, index));
            }
        }
    }

    /// Bytes the index adds to a block of `num_restarts` restart points: 0
    /// when such a block gets no index.
    pub fn encoded_size(&self, num_restarts: usize) -> usize {
        if num_restarts > RESTARTS_MAX as usize {
            return 0;
        }
        usize::from(num_buckets_for(self.num_keys, self.util_ratio)) + NUM_BUCKETS_BYTES
    }

    /// Appends the buckets and their count to `dst`. The block must have
    /// at most [`RESTARTS_MAX`] restart points.
    pub fn finish(&self, dst: &mut Vec<u8>) {
        debug_assert_eq!(self.entries.len(), self.num_keys, "block over the limit");
        let num_buckets = num_buckets_for(self.num_keys, self.util_ratio);
        let start = dst.len();
        dst.resize(start + usize::from(num_buckets), BUCKET_EMPTY);
        let buckets = &mut dst[start..];
        for &(hash, index) in &self.entries {
            let bucket = &mut buckets[bucket_of(u64::from(hash), num_buckets)];
            if *bucket == BUCKET_EMPTY {
                *bucket = index;
            } else if *bucket != index {
                *bucket = BUCKET_COLLISION;
            }
        }
        dst.extend_from_slice(&num_buckets.to_le_bytes());
    }
}

/// Where a block's buckets lie; checked against the block's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashIndex {
    /// Offset of the first bucket in the block.
    buckets_offset: usize,
    num_buckets: u16,
}

impl HashIndex {
    /// Decodes the index that ends at byte `end` of `data` (where the
    /// footer starts). Returns it and its first byte's offset, or what is
    /// wrong with it.
    pub fn decode(data: &[u8], end: usize) -> Result<(HashIndex, usize), String> {
        let count_at = end.checked_sub(NUM_BUCKETS_BYTES);
        let Some(bytes) = count_at.and_then(|at| data.get(at..end)) else {
            return Err(format!(
                "block of {} bytes has no room for a hash index bucket count",
                data.len()
            ));
        };
        let num_buckets = u16::from_le_bytes([bytes[0], bytes[1]]);
        let count_at = end - NUM_BUCKETS_BYTES;
        if num_buckets == 0 {
            return Err("hash index has 0 buckets".into());
        }
        let Some(buckets_offset) = count_at.checked_sub(usize::from(num_buckets)) else {
            return Err(format!(
                "hash index of {num_buckets} buckets does not fit in the {count_at} bytes before its count"
            ));
        };
        let index = HashIndex {
            buckets_offset,
            num_buckets,
        };
        Ok((index, buckets_offset))
    }

    /// The offset in the block of the bucket `hash` falls in.
    #[inline]
    pub fn bucket_offset(&self, hash: u64) -> usize {
        self.buckets_offset + bucket_of(hash, self.num_buckets)
    }

    /// The buckets, from the block's bytes `data`.
    pub fn buckets<'a>(&self, data: &'a [u8]) -> &'a [u8] {
        let end = self.buckets_offset + usize::from(self.num_buckets);
        data.get(self.buckets_offset..end).unwrap_or_default()
    }

    /// The bucket `hash` falls in, and its offset in the block.
    pub fn lookup(&self, data: &[u8], hash: u64) -> (u8, usize) {
        let at = self.bucket_offset(hash);
        // Always in range for a decoded index; a miss would only send the
        // lookup to binary search.
        (data.get(at).copied().unwrap_or(BUCKET_COLLISION), at)
    }

    #[cfg(test)]
    /// Number of buckets.
    pub fn num_buckets(&self) -> u16 {
        self.num_buckets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_count_formula() {
        assert_eq!(num_buckets_for(0, 0.75), 1);
        assert_eq!(num_buckets_for(1, 1.0), 1);
        assert_eq!(num_buckets_for(3, 0.75), 5, "4 made odd");
        assert_eq!(num_buckets_for(100, 0.75), 133);
        assert_eq!(num_buckets_for(100, 1.0), 101);
        assert_eq!(num_buckets_for(100, 8.0), 13);
        assert_eq!(num_buckets_for(1000, 1e-9), 65535);
        assert_eq!(num_buckets_for(5, 1e300), 1);
    }

    #[test]
    fn hash_is_the_filter_hash() {
        for key in [&b""[..], b"a", b"some longer user key"] {
            assert_eq!(user_key_hash(key), crate::sst::filter::filter_hash(key));
        }
    }

    /// Builds an index over (hash, interval) pairs and decodes it back.
    fn build(keys: &[(u64, usize)], ratio: f64) -> (Vec<u8>, HashIndex) {
        let mut b = HashIndexBuilder::new(ratio);
        for &(h, i) in keys {
            b.add(h, i);
        }
        let mut bytes = vec![0xAA; 3]; // stands for the restart array
        b.finish(&mut bytes);
        assert_eq!(bytes.len(), 3 + b.encoded_size(1));
        let (index, start) = HashIndex::decode(&bytes, bytes.len()).unwrap();
        assert_eq!(start, 3);
        (bytes, index)
    }

    #[test]
    fn round_trip_marks_empty_and_collision() {
        // 3 keys at ratio 1.0: 3 buckets. Hashes 0 and 3 share bucket 0.
        let (bytes, index) = build(&[(0, 0), (3, 1), (4, 2)], 1.0);
        assert_eq!(index.num_buckets(), 3);
        assert_eq!(index.lookup(&bytes, 0).0, BUCKET_COLLISION);
        assert_eq!(index.lookup(&bytes, 1).0, 2);
        assert_eq!(index.lookup(&bytes, 2).0, BUCKET_EMPTY);
        assert_eq!(index.lookup(&bytes, 5).0, BUCKET_EMPTY);
        // Two keys in the same interval and bucket are no collision.
        let (bytes, index) = build(&[(0, 7), (3, 7), (4, 8)], 1.0);
        assert_eq!(index.lookup(&bytes, 6).0, 7);
        // Only the low 32 bits count.
        assert_eq!(index.lookup(&bytes, (1 << 32) | 1).0, 8);
    }

    #[test]
    fn intervals_past_the_limit_disable_the_index() {
        let mut b = HashIndexBuilder::new(0.75);
        b.add(1, 252);
        assert_eq!(b.encoded_size(253), 1 + NUM_BUCKETS_BYTES);
        b.add(2, 253);
        assert_eq!(b.encoded_size(254), 0);
    }

    #[test]
    fn decode_rejects_bad_sizes() {
        for (bytes, end) in [
            (vec![], 0),
            (vec![1], 1),
            (vec![0, 0], 2),
            (vec![5, 3, 0], 3),
            (vec![1, 0, 0, 0], 2),
        ] {
            assert!(HashIndex::decode(&bytes, end).is_err(), "{bytes:?} {end}");
        }
        let (index, start) = HashIndex::decode(&[9, 1, 0], 3).unwrap();
        assert_eq!((index.num_buckets(), start), (1, 0));
    }
}
