//! Direct I/O on the real file system (`O_DIRECT`, Linux): reads and
//! writes that go around the page cache, for databases larger than memory
//! (RocksDB's `use_direct_reads` and `use_direct_io_for_flush_and_compaction`).
//!
//! `O_DIRECT` wants the file offset, the length and the memory address of
//! every transfer aligned to the device's logical block size. Both files
//! here use [`ALIGN`] (4 KiB, a multiple of every common block size):
//! - a read covers the aligned blocks around the bytes asked for, into a
//!   per-thread aligned buffer, and copies those bytes out;
//! - a write gathers appends in an aligned window and writes whole blocks;
//!   a sync writes the last partial block padded with zeros, then cuts the
//!   file back to its true length (`ftruncate`) and syncs. The partial block
//!   stays in the window and is written again, whole, when more follows.
//!
//! No `unsafe`: aligned buffers are windows into ordinary vectors.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{display, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// Alignment of offsets, lengths and buffers.
pub(crate) const ALIGN: usize = 4096;

/// Largest read buffer a thread keeps between reads.
const READ_BUFFER_KEPT_BYTES: usize = 4 << 20;

/// Bytes a direct writer gathers before writing them.
const WINDOW_BYTES: usize = 1 << 20;

#[cfg(target_os = "linux")]
const O_DIRECT: i32 = libc::O_DIRECT;

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", display(path)), e)
}

/// Opens `path` with `O_DIRECT`; a file system without it (tmpfs, for
/// one) is `NotSupported`, named.
fn open_direct(path: &Path, opts: &mut OpenOptions, what: &str) -> Result<File> {
    #[cfg(target_os = "linux")]
    {
        opts.custom_flags(O_DIRECT);
        opts.open(path).map_err(|e| {
            if e.raw_os_error() == Some(libc::EINVAL) {
                Error::NotSupported(format!(
                    "{what} {}: the file system does not support direct I/O (O_DIRECT), which use_direct_reads and use_direct_io_for_flush_and_compaction need",
                    display(path)
                ))
            } else {
                io_err(what, path, e)
            }
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = opts;
        Err(Error::NotSupported(format!(
            "{what} {}: direct I/O is implemented on Linux only",
            display(path)
        )))
    }
}

/// A window of `len` bytes aligned to [`ALIGN`] inside `buf` (grown as
/// needed): its start offset in `buf`.
fn aligned_window(buf: &mut Vec<u8>, len: usize) -> usize {
    if buf.len() < len + ALIGN {
        buf.resize(len + ALIGN, 0);
    }
    let start = buf.as_ptr().align_offset(ALIGN);
    debug_assert!(start < ALIGN, "u8 buffers can always be aligned");
    start
}

fn round_down(n: u64) -> u64 {
    n & !(ALIGN as u64 - 1)
}

fn round_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

thread_local! {
    /// Each thread's read buffer: reads are served one at a time per thread.
    static READ_BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A table opened for direct positional reads.
#[derive(Debug)]
pub(crate) struct DirectRandomAccessFile {
    path: PathBuf,
    file: File,
    size: u64,
}

impl DirectRandomAccessFile {
    pub(crate) fn open(path: &Path) -> Result<DirectRandomAccessFile> {
        let file = open_direct(path, OpenOptions::new().read(true), "open")?;
        let size = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
        Ok(DirectRandomAccessFile {
            path: path.to_owned(),
            file,
            size,
        })
    }
}

impl RandomAccessFile for DirectRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let start = round_down(offset);
        let skip = (offset - start) as usize;
        let span = round_up(skip + buf.len());
        READ_BUFFER.with(|cell| {
            let mut raw = cell.borrow_mut();
            let at = aligned_window(&mut raw, span);
            let window = &mut raw[at..at + span];
            // The last block of the file reads short: stop at its end.
            let mut got = 0;
            while got < span {
                match self.file.read_at(&mut window[got..], start + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(io_err(
                            &format!("read {} bytes at offset {offset} of", buf.len()),
                            &self.path,
                            e,
                        ))
                    }
                }
                if got % ALIGN != 0 {
                    break;
                }
            }
            if got < skip + buf.len() {
                return Err(io_err(
                    &format!("read {} bytes at offset {offset} of", buf.len()),
                    &self.path,
                    std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                ));
            }
            buf.copy_from_slice(&window[skip..skip + buf.len()]);
            // A buffer grown by one large read (a filter, a compaction's
            // readahead) is not kept by every thread for good.
            if raw.len() > READ_BUFFER_KEPT_BYTES {
                *raw = Vec::new();
            }
            Ok(())
        })
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn map(&self) -> Result<bytes::Bytes> {
        // Packed tables are mapped, which no direct read can serve: their
        // reads go through the page cache, as RocksDB's mmap reads do.
        let plain = File::open(&self.path).map_err(|e| io_err("open", &self.path, e))?;
        super::posix::map_file(&plain, &self.path, self.size)
    }
}

/// A table written with direct I/O by a flush or compaction.
#[derive(Debug)]
pub(crate) struct DirectWritableFile {
    path: PathBuf,
    file: File,
    raw: Vec<u8>,
    /// Start of the aligned window in `raw`.
    at: usize,
    /// Bytes in the window, from its start.
    len: usize,
    /// File offset of the window's first byte (aligned).
    window_offset: u64,
    size: u64,
    /// Bytes appended since everything was last written out.
    dirty: bool,
}

impl DirectWritableFile {
    pub(crate) fn create(path: &Path) -> Result<DirectWritableFile> {
        let file = open_direct(
            path,
            OpenOptions::new().write(true).create(true).truncate(true),
            "create",
        )?;
        let mut raw = Vec::new();
        let at = aligned_window(&mut raw, WINDOW_BYTES);
        Ok(DirectWritableFile {
            path: path.to_owned(),
            file,
            raw,
            at,
            len: 0,
            window_offset: 0,
            size: 0,
            dirty: false,
        })
    }

    /// Writes the window's first `bytes` (a multiple of [`ALIGN`]).
    fn write_window(&mut self, bytes: usize) -> Result<()> {
        debug_assert_eq!(bytes % ALIGN, 0);
        let window = &self.raw[self.at..self.at + bytes];
        self.file
            .write_all_at(window, self.window_offset)
            .map_err(|e| io_err("write", &self.path, e))
    }

    /// Writes the window's whole blocks and keeps its partial last block
    /// at the window's start.
    fn write_whole_blocks(&mut self) -> Result<()> {
        let whole = self.len / ALIGN * ALIGN;
        if whole == 0 {
            return Ok(());
        }
        self.write_window(whole)?;
        self.raw
            .copy_within(self.at + whole..self.at + self.len, self.at);
        self.window_offset += whole as u64;
        self.len -= whole;
        Ok(())
    }

    /// Writes everything: whole blocks, then the partial one padded with
    /// zeros, and cuts the file to its true size.
    fn write_all(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        self.write_whole_blocks()?;
        if self.len > 0 {
            let padded = round_up(self.len);
            self.raw[self.at + self.len..self.at + padded].fill(0);
            self.write_window(padded)?;
        }
        self.file
            .set_len(self.size)
            .map_err(|e| io_err("truncate", &self.path, e))?;
        self.dirty = false;
        Ok(())
    }
}

impl WritableFile for DirectWritableFile {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        self.size += data.len() as u64;
        self.dirty |= !data.is_empty();
        while !data.is_empty() {
            let n = (WINDOW_BYTES - self.len).min(data.len());
            self.raw[self.at + self.len..self.at + self.len + n].copy_from_slice(&data[..n]);
            self.len += n;
            data = &data[n..];
            if self.len == WINDOW_BYTES {
                self.write_whole_blocks()?;
            }
        }
        Ok(())
    }

    /// Hands every byte to the file (the last block padded, the file cut
    /// back to its length); the partial block stays buffered, to be
    /// rewritten whole when more follows.
    fn flush(&mut self) -> Result<()> {
        self.write_all()
    }

    fn sync(&mut self) -> Result<()> {
        self.write_all()?;
        self.file
            .sync_data()
            .map_err(|e| io_err("sync", &self.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for DirectWritableFile {
    fn drop(&mut self) {
        // Best effort, as the buffered writer: an error here is seen by
        // the next read of the file. Nothing to do after a sync or flush.
        let _ = self.write_all();
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    /// A directory whose file system takes O_DIRECT, if the temporary
    /// directory's does (tmpfs does not).
    fn direct_dir(name: &str) -> Option<PathBuf> {
        let dir = std::env::temp_dir().join(format!("strata-direct-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        match DirectWritableFile::create(&dir.join("probe")) {
            Ok(_) => Some(dir),
            Err(Error::NotSupported(_)) => {
                std::fs::remove_dir_all(&dir).unwrap();
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    /// Random appends (across the window size too), flushes and syncs,
    /// then random reads: the file holds exactly what was appended, at its
    /// true length, whether read directly or through the page cache.
    #[test]
    fn direct_writes_and_reads_match_what_was_appended() {
        let Some(dir) = direct_dir("rw") else {
            eprintln!("the temporary directory takes no O_DIRECT: nothing to test");
            return;
        };
        let mut rng = StdRng::seed_from_u64(3);
        for round in 0..6 {
            let path = dir.join(format!("f{round}"));
            let mut want = Vec::new();
            {
                let mut f = DirectWritableFile::create(&path).unwrap();
                for _ in 0..rng.gen_range(1..60) {
                    let n = match rng.gen_range(0..10) {
                        0 => rng.gen_range(0..3 * WINDOW_BYTES),
                        1..=3 => rng.gen_range(0..3 * ALIGN),
                        _ => rng.gen_range(0..200),
                    };
                    let data: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                    f.append(&data).unwrap();
                    want.extend_from_slice(&data);
                    match rng.gen_range(0..6) {
                        0 => f.sync().unwrap(),
                        1 => f.flush().unwrap(),
                        _ => {}
                    }
                    assert_eq!(f.size(), want.len() as u64);
                }
                if rng.gen_bool(0.5) {
                    f.sync().unwrap();
                }
            }
            assert_eq!(std::fs::read(&path).unwrap(), want, "round {round}");
            let r = DirectRandomAccessFile::open(&path).unwrap();
            assert_eq!(r.size(), want.len() as u64);
            for _ in 0..200 {
                if want.is_empty() {
                    break;
                }
                let off = rng.gen_range(0..want.len());
                let len = rng.gen_range(0..(want.len() - off).min(3 * ALIGN) + 1);
                let mut buf = vec![0u8; len];
                r.read_exact_at(off as u64, &mut buf).unwrap();
                assert_eq!(
                    buf,
                    &want[off..off + len],
                    "round {round}: read {len} at {off}"
                );
            }
            // Past the end is an error, not zeros.
            if want.len() >= 5 {
                let mut buf = vec![0u8; 10];
                let past = r.read_exact_at(want.len() as u64 - 5, &mut buf);
                assert!(past.is_err(), "round {round}: read past the end");
            }
            assert_eq!(r.map().unwrap(), want);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
