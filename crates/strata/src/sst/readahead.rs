//! Readahead for sequential scans (RocksDB's `FilePrefetchBuffer`): once a
//! table iterator has read data blocks back to back from the file, it
//! reads the next [`READAHEAD_BYTES`] in one call and serves the blocks
//! that follow from that buffer. Each block is still checked and
//! decompressed on its own ([`decode_data_block`]), so nothing about its
//! integrity changes; only the number of reads (system calls) drops.

use std::sync::Arc;

use crate::env::RandomAccessFile;
use crate::error::Result;

use super::format::{decode_data_block, read_data_block, BlockHandle, FetchedBlock};

/// Bytes one readahead reads: 256 KiB, as RocksDB's default maximum.
pub(crate) const READAHEAD_BYTES: u64 = 256 << 10;

/// Back-to-back block reads from the file after which reads go ahead.
const SEQUENTIAL_READS_MIN: u32 = 2;

/// One iterator's readahead buffer over one table file. At most
/// [`READAHEAD_BYTES`] (or one block, if larger) are held.
#[derive(Debug, Default)]
pub(crate) struct Readahead {
    /// Bytes per read ahead when set (a compaction's
    /// `compaction_readahead_size`, from the first read on); 0: the
    /// adaptive default ([`READAHEAD_BYTES`] after a few sequential reads).
    fixed: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
    /// End of the last block read from the file (not from the buffer).
    last_end: u64,
    sequential_reads: u32,
}

impl Readahead {
    /// Reads ahead `bytes` at a time from the first read on (0: the
    /// adaptive default).
    pub(crate) fn fixed(bytes: u64) -> Readahead {
        Readahead {
            fixed: bytes,
            ..Readahead::default()
        }
    }

    /// Frees the buffer (an iterator that ran off its table's end). A
    /// compaction keeps every input's iterator until the merge ends, so
    /// without this each finished input would hold its last window.
    pub(crate) fn release(&mut self) {
        *self = Readahead::fixed(self.fixed);
    }

    /// Bytes the buffer holds (its capacity).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.buf.capacity()
    }

    /// The checked, decompressed block at `handle`: from the buffer when
    /// it holds it, else read (ahead, when reads have been sequential);
    /// with its stored bytes too if `keep` ([`read_data_block`]).
    pub(crate) fn read(
        &mut self,
        file: &dyn RandomAccessFile,
        name: &Arc<str>,
        handle: BlockHandle,
        keep: bool,
    ) -> Result<FetchedBlock> {
        let end = handle.end_with_trailer();
        let held = self.start + self.buf.len() as u64;
        if handle.offset >= self.start && end <= held && !self.buf.is_empty() {
            let from = (handle.offset - self.start) as usize;
            let to = (end - self.start) as usize;
            return decode_data_block(&self.buf[from..to], name, handle, keep);
        }
        if handle.offset == self.last_end {
            self.sequential_reads += 1;
        } else {
            self.sequential_reads = 0;
        }
        self.last_end = end;
        let file_size = file.size();
        let (ahead, sequential_min) = match self.fixed {
            0 => (READAHEAD_BYTES, SEQUENTIAL_READS_MIN),
            n => (n, 0),
        };
        if self.sequential_reads < sequential_min
            || end > file_size
            || handle.size > crate::limits::BLOCK_SIZE_BYTES_MAX as u64
        {
            // (A block past the end of the file or over the size limit:
            // read_data_block reports it.)
            return read_data_block(file, name, handle, keep);
        }
        let len = ahead
            .max(end - handle.offset)
            .min(file_size - handle.offset);
        // Resized, not cleared: the read overwrites every byte, so only a
        // growing buffer is zero-filled (once), not every refill.
        self.buf.resize(len as usize, 0);
        self.start = handle.offset;
        if let Err(e) = file.read_exact_at(handle.offset, &mut self.buf) {
            self.buf.clear();
            return Err(e);
        }
        let to = (end - self.start) as usize;
        decode_data_block(&self.buf[..to], name, handle, keep)
    }
}
