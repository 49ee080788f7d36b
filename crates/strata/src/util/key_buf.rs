//! A small buffer for keys copied in pieces: the key a block iterator
//! rebuilds from delta-encoded entries, the prefix a prefix step holds.
//!
//! A forward scan rebuilds every key that is not at a restart point: the
//! previous key's first `shared` bytes, then the entry's own bytes. Those
//! are short copies (a few to a few dozen bytes), and a general copy pays a
//! call and a length dispatch for each. Here a copy that fits moves whole
//! [`CHUNK`]-byte pieces (one or two vector moves for a usual key), reading
//! past the bytes it needs when the source has them and writing into spare
//! room at the end of the inline array; the length then says how much of
//! that is the key.

/// Bytes of a key kept inside the buffer; longer keys live on the heap.
/// 64 covers a 56-byte user key and its 8-byte trailer.
pub(crate) const INLINE: usize = 64;

/// Bytes a fast append moves at a time (a short append moves half).
const CHUNK: usize = 32;

/// A key rebuilt from shared bytes and deltas.
///
/// Invariant: when `len <= INLINE` the key is `inline[..len]`; otherwise it
/// is `heap` (and `heap.len() == len`).
pub(crate) struct KeyBuf {
    inline: [u8; INLINE + CHUNK],
    len: usize,
    heap: Vec<u8>,
}

impl std::fmt::Debug for KeyBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("KeyBuf")
            .field(&self.as_slice().escape_ascii().to_string())
            .finish()
    }
}

impl Default for KeyBuf {
    fn default() -> Self {
        KeyBuf {
            inline: [0; INLINE + CHUNK],
            len: 0,
            heap: Vec::new(),
        }
    }
}

impl KeyBuf {
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        if self.len <= INLINE {
            &self.inline[..self.len]
        } else {
            debug_assert_eq!(self.heap.len(), self.len);
            &self.heap
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `n` bytes. Panics if `n` exceeds the length.
    #[inline]
    pub(crate) fn truncate(&mut self, n: usize) {
        assert!(n <= self.len, "KeyBuf::truncate past the end");
        if self.len > INLINE {
            if n <= INLINE {
                self.inline[..n].copy_from_slice(&self.heap[..n]);
            } else {
                self.heap.truncate(n);
            }
        }
        self.len = n;
    }

    /// Appends `src[start..start + n]`. Panics if `src` lacks those bytes.
    #[inline(always)]
    pub(crate) fn append(&mut self, src: &[u8], start: usize, n: usize) {
        let end = self.len + n;
        // Whole chunks when they stay inside both arrays: the last one may
        // read bytes of `src` past the range and write spare room past
        // `end`, which the length leaves out.
        if end <= INLINE && n <= CHUNK / 2 && start + CHUNK / 2 <= src.len() {
            let d = self.len;
            self.inline[d..d + CHUNK / 2].copy_from_slice(&src[start..start + CHUNK / 2]);
            self.len = end;
        } else if end <= INLINE && start + n.next_multiple_of(CHUNK) <= src.len() {
            let (mut d, mut s) = (self.len, start);
            // Bounded by `n`: each turn moves a chunk.
            while d < end {
                self.inline[d..d + CHUNK].copy_from_slice(&src[s..s + CHUNK]);
                d += CHUNK;
                s += CHUNK;
            }
            self.len = end;
        } else {
            self.append_exact(&src[start..start + n]);
        }
    }

    /// Replaces the key with `bytes`.
    pub(crate) fn set(&mut self, bytes: &[u8]) {
        self.clear();
        self.append_exact(bytes);
    }

    #[inline(never)]
    fn append_exact(&mut self, bytes: &[u8]) {
        let end = self.len + bytes.len();
        if end <= INLINE {
            self.inline[self.len..end].copy_from_slice(bytes);
        } else {
            if self.len <= INLINE {
                self.heap.clear();
                self.heap.extend_from_slice(&self.inline[..self.len]);
            }
            self.heap.extend_from_slice(bytes);
        }
        self.len = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Random truncates, appends (from sources with and without slack after
    /// the range) and sets agree with a plain `Vec`, across the inline and
    /// heap forms in both directions.
    #[test]
    fn matches_a_vec() {
        let mut rng = StdRng::seed_from_u64(7);
        let src: Vec<u8> = (0..400).map(|_| rng.gen()).collect();
        for _ in 0..200 {
            let mut buf = KeyBuf::default();
            let mut model: Vec<u8> = Vec::new();
            for _ in 0..100 {
                match rng.gen_range(0..4) {
                    0 => {
                        let n = rng.gen_range(0..=model.len());
                        buf.truncate(n);
                        model.truncate(n);
                    }
                    1 | 2 => {
                        let n = rng.gen_range(0..90);
                        let start = rng.gen_range(0..=src.len() - n);
                        // Sometimes a source that ends exactly at the range.
                        let s = if rng.gen_bool(0.3) {
                            &src[..start + n]
                        } else {
                            &src[..]
                        };
                        buf.append(s, start, n);
                        model.extend_from_slice(&s[start..start + n]);
                    }
                    _ => {
                        let n = rng.gen_range(0..100);
                        let start = rng.gen_range(0..=src.len() - n);
                        buf.set(&src[start..start + n]);
                        model.clear();
                        model.extend_from_slice(&src[start..start + n]);
                    }
                }
                assert_eq!(buf.as_slice(), &model[..]);
                assert_eq!(buf.len(), model.len());
            }
        }
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn truncate_past_the_end_panics() {
        let mut buf = KeyBuf::default();
        buf.set(b"abc");
        buf.truncate(4);
    }
}
