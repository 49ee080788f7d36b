//! Appends records to a log file (`docs/format/wal.md`).
//!
//! A record is cut into fragments so that no fragment crosses a block
//! boundary; when fewer than [`HEADER_SIZE`] bytes remain in a block, they are
//! filled with zeros and the next fragment starts a new block.

use super::format::{
    encode_header, fragment_crc, type_crcs, FragmentType, PredecessorLog, BLOCK_SIZE, HEADER_SIZE,
    TYPES,
};
use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::limits::LOG_RECORD_SIZE_BYTES_MAX;

/// Writes records to a log file.
///
/// After an append fails the file may end in a partial fragment, so the
/// writer refuses further records and returns that error again: a record
/// written after a hole would be read as corruption in the middle of the log.
#[derive(Debug)]
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Bytes already used in the current block, in `0..=BLOCK_SIZE`.
    block_offset: usize,
    type_crcs: [u32; TYPES],
    failed: Option<Error>,
}

impl LogWriter {
    /// A writer for a new, empty log file.
    pub fn new(file: Box<dyn WritableFile>) -> Self {
        Self::new_at_offset(file, 0)
    }

    /// A writer that appends to an existing log whose valid contents end at
    /// byte `offset` (the file's size when it was opened for appending).
    pub fn new_at_offset(file: Box<dyn WritableFile>, offset: u64) -> Self {
        // The remainder is below BLOCK_SIZE, so it fits in usize.
        let block_offset = (offset % BLOCK_SIZE as u64) as usize;
        LogWriter {
            file,
            block_offset,
            type_crcs: type_crcs(),
            failed: None,
        }
    }

    /// Appends one record. An empty record is allowed. Fails with
    /// `InvalidArgument` if `payload` is longer than
    /// [`LOG_RECORD_SIZE_BYTES_MAX`]. The record is buffered by the file;
    /// call [`sync`](Self::sync) to make it durable.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        if payload.len() > LOG_RECORD_SIZE_BYTES_MAX {
            return Err(Error::invalid_argument(format!(
                "log record of {} bytes exceeds LOG_RECORD_SIZE_BYTES_MAX ({LOG_RECORD_SIZE_BYTES_MAX})",
                payload.len()
            )));
        }
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.append_fragments(payload);
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    /// Writes the [`PredecessorLog`] fragment that starts a log following
    /// another. Fails with `InvalidArgument` anywhere but at the start of
    /// an empty log.
    pub(crate) fn add_predecessor(&mut self, p: PredecessorLog) -> Result<()> {
        if self.file.size() != 0 || self.block_offset != 0 {
            return Err(Error::invalid_argument(
                "a predecessor-log fragment goes only at the start of a log",
            ));
        }
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = self.emit(FragmentType::PredecessorLog, &p.encode());
        if let Err(e) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    fn append_fragments(&mut self, payload: &[u8]) -> Result<()> {
        let mut left = payload;
        let mut first = true;
        // Each pass writes one fragment and either finishes the record or
        // fills the block, so the loop ends after len / (BLOCK_SIZE - 7) + 2
        // passes.
        loop {
            assert!(self.block_offset <= BLOCK_SIZE);
            let block_left = BLOCK_SIZE - self.block_offset;
            if block_left < HEADER_SIZE {
                // Too small for a header: pad with zeros, start a new block.
                const ZEROS: [u8; HEADER_SIZE] = [0; HEADER_SIZE];
                self.file.append(&ZEROS[..block_left])?;
                self.block_offset = 0;
            }
            let avail = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let n = left.len().min(avail);
            let last = n == left.len();
            let t = match (first, last) {
                (true, true) => FragmentType::Full,
                (true, false) => FragmentType::First,
                (false, false) => FragmentType::Middle,
                (false, true) => FragmentType::Last,
            };
            let (fragment, rest) = left.split_at(n);
            self.emit(t, fragment)?;
            left = rest;
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    fn emit(&mut self, t: FragmentType, payload: &[u8]) -> Result<()> {
        assert!(self.block_offset + HEADER_SIZE + payload.len() <= BLOCK_SIZE);
        let crc = fragment_crc(&self.type_crcs, t, payload);
        self.file.append(&encode_header(crc, t, payload.len()))?;
        self.file.append(payload)?;
        self.block_offset += HEADER_SIZE + payload.len();
        Ok(())
    }

    /// Hands buffered records to the operating system (not durable).
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes every record added so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Size of the log file in bytes, including what was there before
    /// [`new_at_offset`](Self::new_at_offset).
    pub fn file_size(&self) -> u64 {
        self.file.size()
    }
}
