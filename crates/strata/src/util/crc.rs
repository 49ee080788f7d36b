//! CRC32C checksums, masked as LevelDB masks them.
//!
//! A CRC stored next to the data it covers is masked so that computing the
//! CRC of a string that contains embedded CRCs does not degenerate.

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends `crc` (of some prefix) with `data`.
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// The value stored on disk for CRC `crc`.
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_vectors() {
        // RFC 3720 test vectors.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn extend_and_mask() {
        assert_eq!(
            crc32c_extend(crc32c(b"hello "), b"world"),
            crc32c(b"hello world")
        );
        let c = crc32c(b"foo");
        assert_ne!(mask(c), c);
        assert_ne!(mask(mask(c)), c);
        assert_eq!(unmask(mask(c)), c);
    }
}
