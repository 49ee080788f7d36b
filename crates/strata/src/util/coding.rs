//! Little-endian fixed-width integers and LEB128 varints.
//!
//! Decoders take untrusted bytes: they return `None` on truncated or
//! overlong input and never panic; callers turn `None` into a Corruption
//! error that names the file and offset.

/// Longest encoding of a `u32` varint.
pub const VARINT32_BYTES_MAX: usize = 5;
/// Longest encoding of a `u64` varint.
pub const VARINT64_BYTES_MAX: usize = 10;

/// Appends `v` as 4 little-endian bytes.
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads 4 little-endian bytes at the start of `src`.
pub fn decode_fixed32(src: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(src.get(..4)?.try_into().ok()?))
}

/// Reads 8 little-endian bytes at the start of `src`.
pub fn decode_fixed64(src: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(src.get(..8)?.try_into().ok()?))
}

/// Appends `v` as a varint (7 bits per byte, high bit = more follows).
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends `v` as a varint.
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Number of bytes `put_varint64(v)` writes.
pub fn varint_length(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Decodes a varint of at most `max_bytes` bytes; returns the value and the
/// number of bytes used.
fn decode_varint(src: &[u8], max_bytes: usize, max_value: u64) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().take(max_bytes).enumerate() {
        let shift = 7 * i as u32;
        let bits = u64::from(byte & 0x7f);
        // The last allowed byte may not carry bits beyond 64.
        if shift == 63 && bits > 1 {
            return None;
        }
        result |= bits << shift;
        if byte & 0x80 == 0 {
            return (result <= max_value).then_some((result, i + 1));
        }
    }
    None
}

/// Decodes a `u64` varint at the start of `src`: (value, bytes used).
pub fn decode_varint64(src: &[u8]) -> Option<(u64, usize)> {
    decode_varint(src, VARINT64_BYTES_MAX, u64::MAX)
}

/// Decodes a `u32` varint at the start of `src`: (value, bytes used).
pub fn decode_varint32(src: &[u8]) -> Option<(u32, usize)> {
    decode_varint(src, VARINT32_BYTES_MAX, u64::from(u32::MAX)).map(|(v, n)| (v as u32, n))
}

/// A cursor over untrusted bytes: each getter advances past what it read, or
/// returns `None` and leaves the cursor where it was.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }
    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Bytes not yet consumed.
    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }
    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }
    /// Reads a `u64` varint.
    pub fn varint64(&mut self) -> Option<u64> {
        let (v, n) = decode_varint64(self.remaining())?;
        self.pos += n;
        Some(v)
    }
    /// Reads a `u32` varint.
    pub fn varint32(&mut self) -> Option<u32> {
        let (v, n) = decode_varint32(self.remaining())?;
        self.pos += n;
        Some(v)
    }
    /// Reads 4 little-endian bytes.
    #[cfg(test)]
    pub fn fixed32(&mut self) -> Option<u32> {
        let v = decode_fixed32(self.remaining())?;
        self.pos += 4;
        Some(v)
    }
    /// Reads 8 little-endian bytes.
    #[cfg(test)]
    pub fn fixed64(&mut self) -> Option<u64> {
        let v = decode_fixed64(self.remaining())?;
        self.pos += 8;
        Some(v)
    }
    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.buf.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(out)
    }
    /// Reads a varint length, then that many bytes.
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        let n = self.varint64()?;
        match usize::try_from(n).ok().and_then(|n| self.bytes(n)) {
            Some(b) => Some(b),
            None => {
                self.pos = start;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varint_edges() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert_eq!(buf.len(), varint_length(v));
            assert_eq!(decode_varint64(&buf), Some((v, buf.len())));
        }
        // Truncated, overlong and overflowing encodings are rejected.
        assert_eq!(decode_varint64(&[0x80]), None);
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        assert_eq!(
            decode_varint64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]),
            None
        );
        assert_eq!(decode_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
        assert_eq!(
            decode_varint32(&[0xff, 0xff, 0xff, 0xff, 0x0f]),
            Some((u32::MAX, 5))
        );
    }

    #[test]
    fn decoder_does_not_advance_on_failure() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, 100); // claims 100 bytes, has none
        let mut d = Decoder::new(&buf);
        assert_eq!(d.length_prefixed(), None);
        assert_eq!(d.position(), 0);
        assert_eq!(d.fixed32(), None);
    }

    proptest! {
        #[test]
        fn varint_round_trip(v: u64) {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            prop_assert_eq!(decode_varint64(&buf), Some((v, buf.len())));
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            let mut d = Decoder::new(&bytes);
            let _ = d.varint32();
            let _ = d.length_prefixed();
            let _ = d.fixed64();
            let _ = decode_varint64(&bytes);
        }
    }
}
