//! Small pieces shared by every format: integer coding, checksums and
//! prefetch hints.

pub mod coding;
pub mod crc;
pub mod prefetch;
