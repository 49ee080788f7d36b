//! Readahead for sequential scans (RocksDB's `FilePrefetchBuffer`): once a
//! table iterator has visited data blocks back to back, it reads the next
//! [`READAHEAD_BYTES`] in one call and serves the blocks that follow from
//! that buffer. Each block is still checked and decompressed on its own
//! ([`decode_data_block`]), so nothing about its integrity changes; only
//! the number of reads (system calls) drops.
//!
//! A scan over a file read with direct I/O also asks for the window after
//! the one it is reading, in the background ([`read_in_background`]), and
//! goes on decompressing and merging while the device reads it: the
//! page cache's own readahead is not there to do that. The next window
//! begins where the current one ends; the block cut by that end is joined
//! from the two. A compaction's reads stay in its own thread (no user
//! waits on them).

use std::borrow::Cow;
use std::sync::Arc;

use crate::env::prefetch::{read_in_background, PendingRead};
use crate::env::RandomAccessFile;
use crate::error::Result;

use super::format::{decode_data_block, read_data_block, BlockHandle, FetchedBlock};

/// Bytes one readahead reads: 256 KiB, as RocksDB's default maximum.
pub(crate) const READAHEAD_BYTES: u64 = 256 << 10;

/// Back-to-back block reads after which reads go ahead.
const SEQUENTIAL_READS_MIN: u32 = 2;

/// When the window after the current one is read in the background.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Background {
    /// Never (a compaction's reads).
    Never,
    /// For files read with direct I/O (a user's scans).
    #[default]
    Direct,
    /// Always (tests of the background path on files in memory).
    #[cfg(test)]
    Always,
}

/// The window after the current one, being read in the background.
#[derive(Debug)]
struct NextWindow {
    /// Always the current buffer's end.
    start: u64,
    len: u64,
    read: PendingRead,
}

/// One iterator's readahead buffer over one table file. At most
/// [`READAHEAD_BYTES`] (or one block, if larger) are held, and as much
/// again while the next window is read in the background.
#[derive(Debug, Default)]
pub(crate) struct Readahead {
    /// Bytes per read ahead when set (a compaction's
    /// `compaction_readahead_size`, from the first read on); 0: the
    /// adaptive default ([`READAHEAD_BYTES`] after a few sequential reads).
    fixed: u64,
    background: Background,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
    /// End of the last block visited: read, served from the buffer or
    /// found in the block cache.
    last_end: u64,
    sequential_reads: u32,
    next: Option<NextWindow>,
    /// Windows taken from background reads, and blocks joined from two.
    #[cfg(test)]
    pub(crate) taken: usize,
    #[cfg(test)]
    pub(crate) joined: usize,
}

impl Readahead {
    /// Reads ahead `bytes` at a time from the first read on (0: the
    /// adaptive default).
    pub(crate) fn fixed(bytes: u64) -> Readahead {
        Readahead {
            fixed: bytes,
            background: Background::Never,
            ..Readahead::default()
        }
    }

    /// The adaptive default, reading the next window in the background
    /// over any file (the tests' files in memory have no direct I/O).
    #[cfg(test)]
    pub(crate) fn background_always() -> Readahead {
        Readahead {
            background: Background::Always,
            ..Readahead::default()
        }
    }

    /// Frees the buffer (an iterator that ran off its table's end). A
    /// compaction keeps every input's iterator until the merge ends, so
    /// without this each finished input would hold its last window.
    pub(crate) fn release(&mut self) {
        let empty = Readahead {
            fixed: self.fixed,
            background: self.background,
            ..Readahead::default()
        };
        #[cfg(test)]
        let empty = Readahead {
            taken: self.taken,
            joined: self.joined,
            ..empty
        };
        *self = empty;
    }

    /// Bytes the buffer holds (its capacity), and the window being read
    /// in the background.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.buf.capacity() + self.next.as_ref().map_or(0, |n| n.len as usize)
    }

    /// Records a visit of `handle` outside the buffer, sequential or not:
    /// read here, or found in the block cache (a scan over partly cached
    /// data still reads ahead).
    pub(crate) fn visit(&mut self, handle: BlockHandle) {
        if handle.offset == self.last_end {
            self.sequential_reads = self.sequential_reads.saturating_add(1);
        } else {
            self.sequential_reads = 0;
        }
        self.last_end = handle.end_with_trailer();
    }

    /// The checked, decompressed block at `handle`: from the buffer when
    /// it holds it, else read (ahead, when reads have been sequential);
    /// with its stored bytes too if `keep` ([`read_data_block`]). Reads
    /// ahead stop at `data_end`, where the table's data blocks end (the
    /// file's end where that is not known).
    pub(crate) fn read(
        &mut self,
        file: &Arc<dyn RandomAccessFile>,
        name: &Arc<str>,
        handle: BlockHandle,
        keep: bool,
        data_end: u64,
    ) -> Result<FetchedBlock> {
        let end = handle.end_with_trailer();
        if let Some(at) = self.in_buffer(handle) {
            // Still sequential: the block cut by the window's end, next,
            // is read with a new window, not alone.
            self.last_end = end;
            return decode_data_block(
                &self.buf[at..at + (end - handle.offset) as usize],
                name,
                handle,
                keep,
            );
        }
        let file_size = file.size();
        // Past the data blocks lie the table's own blocks, which a scan
        // never reads through this buffer.
        let limit = match data_end {
            0 => file_size,
            n => n.min(file_size),
        }
        .max(end);
        if let Some(bytes) = self.take_next(file, handle, limit) {
            return decode_data_block(&bytes, name, handle, keep);
        }
        self.visit(handle);
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
            return read_data_block(&**file, name, handle, keep);
        }
        let len = ahead.max(end - handle.offset).min(limit - handle.offset);
        // Resized, not cleared: the read overwrites every byte, so only a
        // growing buffer is zero-filled (once), not every refill.
        self.buf.resize(len as usize, 0);
        self.start = handle.offset;
        if let Err(e) = file.read_exact_at(handle.offset, &mut self.buf) {
            self.buf.clear();
            return Err(e);
        }
        self.read_next(file, Vec::new(), limit);
        let to = (end - self.start) as usize;
        decode_data_block(&self.buf[..to], name, handle, keep)
    }

    /// The block at `handle` from the window read in the background, if it
    /// ends there (and begins there or in the buffer, whose end cuts it):
    /// that window becomes the buffer and the one after it is asked for.
    /// `None`, the window dropped, where the scan jumped away from it or
    /// its read failed (the caller's own read reports the error).
    fn take_next(
        &mut self,
        file: &Arc<dyn RandomAccessFile>,
        handle: BlockHandle,
        limit: u64,
    ) -> Option<Cow<'_, [u8]>> {
        let next = self.next.take()?;
        debug_assert_eq!(next.start, self.start + self.buf.len() as u64);
        let end = handle.end_with_trailer();
        if handle.offset < self.start || end <= next.start || end > next.start + next.len {
            return None;
        }
        let (buf, result) = next.read.wait();
        result.ok()?;
        #[cfg(test)]
        {
            self.taken += 1;
        }
        // The head of a block the buffer's end cuts, before it moves on.
        let head = (handle.offset < next.start)
            .then(|| self.buf[(handle.offset - self.start) as usize..].to_vec());
        let spare = std::mem::replace(&mut self.buf, buf);
        self.start = next.start;
        self.visit(handle);
        self.read_next(file, spare, limit);
        let to = (end - self.start) as usize;
        Some(match head {
            None => Cow::Borrowed(&self.buf[(handle.offset - self.start) as usize..to]),
            Some(mut joined) => {
                #[cfg(test)]
                {
                    self.joined += 1;
                }
                joined.extend_from_slice(&self.buf[..to]);
                Cow::Owned(joined)
            }
        })
    }

    /// Where the buffer holds the block at `handle`.
    fn in_buffer(&self, handle: BlockHandle) -> Option<usize> {
        let held = self.start + self.buf.len() as u64;
        (handle.offset >= self.start && handle.end_with_trailer() <= held && !self.buf.is_empty())
            .then(|| (handle.offset - self.start) as usize)
    }

    /// Starts reading the window after the buffer's in the background
    /// (into `spare`, reused), if this scan reads so and its data go on
    /// before `limit`.
    fn read_next(&mut self, file: &Arc<dyn RandomAccessFile>, mut spare: Vec<u8>, limit: u64) {
        let background = match self.background {
            Background::Never => false,
            Background::Direct => file.direct_io().is_some(),
            #[cfg(test)]
            Background::Always => true,
        };
        let held = self.start + self.buf.len() as u64;
        if !background || held >= limit || self.buf.is_empty() {
            return;
        }
        // Right after the buffer: a block the buffer's end cuts is joined
        // from the two. One default window, even after a buffer widened to
        // hold a large block: a block larger than that is read alone.
        let start = held;
        let len = READAHEAD_BYTES.min(limit - start);
        spare.resize(len as usize, 0);
        self.next = read_in_background(file.clone(), start, spare).map(|read| NextWindow {
            start,
            len,
            read,
        });
    }
}
