//! The write-ahead log: a sequence of records (one write batch each), split
//! into checksummed fragments packed into 32 KiB blocks. The byte layout is
//! specified in `docs/format/wal.md`:
//!
//! ```text
//! log      := block* (the last block may be partial)
//! block    := fragment* trailer        (BLOCK_SIZE = 32768 bytes)
//! fragment := masked_crc (u32 LE) | length (u16 LE) | type (u8) | payload[length]
//! crc      := mask(crc32c(type byte ++ payload))
//! type     := Zero=0 (padding) | Full=1 | First=2 | Middle=3 | Last=4
//!           | PredecessorLog=5 (at offset 0: the older log's number and size)
//! trailer  := 0..=6 zero bytes, when fewer than HEADER_SIZE bytes remain
//! ```
//!
//! [`LogWriter`] appends records; [`LogReader`] returns them in order, and
//! what it does with a corrupt or torn log is chosen by [`WalRecoveryMode`].
//!
//! Thread safety: a writer or reader has one owner at a time (`Send`, not
//! shared).

mod format;
mod reader;
mod recovery_mode;
mod writer;

pub(crate) use format::PredecessorLog;
pub use format::{BLOCK_SIZE, HEADER_SIZE};
pub use reader::LogReader;
pub use recovery_mode::WalRecoveryMode;
pub use writer::LogWriter;

#[cfg(test)]
mod tests;
