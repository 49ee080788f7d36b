//! Small pieces shared by every format: integer coding, checksums and
//! prefetch hints.

pub mod coding;
pub(crate) mod counter;
pub mod crc;
pub(crate) mod heap;
pub(crate) mod key_buf;
pub mod prefetch;
pub(crate) mod random;
