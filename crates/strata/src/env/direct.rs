//! Direct I/O on the real file system (`O_DIRECT`, Linux): reads and
//! writes that go around the page cache, for databases larger than memory
//! (RocksDB's `use_direct_reads` and `use_direct_io_for_flush_and_compaction`).
//!
//! `O_DIRECT` wants the file offset, the length and the memory address of
//! every transfer aligned to the device's logical block size:
//! - a read covers the aligned blocks around the bytes asked for, into a
//!   per-thread buffer aligned to [`ALIGN`], and copies those bytes out.
//!   Its offset and length are aligned to what the file system reports
//!   for the file (`statx`'s `STATX_DIOALIGN`, Linux 6.1 and later; often
//!   512 bytes), as RocksDB aligns them to the device's logical sector
//!   size; [`ALIGN`] where nothing is reported. A 2 KiB compressed block
//!   then costs a 2.5 KiB read, not a 4 or 8 KiB one;
//! - a write gathers appends in an aligned window and writes whole blocks
//!   of [`ALIGN`] (4 KiB, a multiple of every common block size); a sync
//!   writes the last partial block padded with zeros, then cuts the file
//!   back to its true length (`ftruncate`) and syncs. The partial block
//!   stays in the window and is written again, whole, when more follows.
//!
//! Several reads may also go to the kernel at once ([`read_direct_batch`],
//! through a per-thread io_uring), into windows of a per-thread buffer.
//!
//! Aligned buffers are windows into ordinary vectors. `unsafe` is confined
//! to the `statx` call that asks for the alignment and to the io_uring
//! submissions, whose windows outlive every read in flight.

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

/// `n` rounded down to a multiple of `align`, a power of two.
fn round_down(n: u64, align: usize) -> u64 {
    n & !(align as u64 - 1)
}

/// `n` rounded up to a multiple of `align`.
fn round_up(n: usize, align: usize) -> usize {
    n.div_ceil(align) * align
}

/// The aligned read that covers `len` bytes at `offset`: its file offset,
/// the bytes before `offset` in it, and its length.
fn aligned_read(offset: u64, len: usize, align: usize) -> (u64, usize, usize) {
    let start = round_down(offset, align);
    let skip = (offset - start) as usize;
    (start, skip, round_up(skip + len, align))
}

/// The alignment of file offsets and lengths that direct reads of `file`
/// need, as its file system reports it (`statx`, `STATX_DIOALIGN`): a power
/// of two of at most [`ALIGN`], with a memory alignment that [`ALIGN`]
/// meets. [`ALIGN`] where the kernel or the file system reports nothing
/// (before Linux 6.1), or something this module's buffers could not meet.
fn read_alignment(file: &File) -> usize {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
        // SAFETY: `statx` writes at most one `struct statx` into `stx`,
        // which this frame owns; the empty path with `AT_EMPTY_PATH` names
        // the open descriptor itself, which `file` keeps open.
        let rc = unsafe {
            libc::statx(
                file.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_EMPTY_PATH,
                libc::STATX_DIOALIGN,
                stx.as_mut_ptr(),
            )
        };
        if rc == 0 {
            // SAFETY: zeroed, then filled by a successful `statx`; every
            // field is a plain integer.
            let stx = unsafe { stx.assume_init() };
            let offset = stx.stx_dio_offset_align as usize;
            let memory = stx.stx_dio_mem_align as usize;
            if stx.stx_mask & libc::STATX_DIOALIGN != 0
                && offset.is_power_of_two()
                && offset <= ALIGN
                && memory <= ALIGN
                && (memory == 0 || ALIGN.is_multiple_of(memory))
            {
                return offset;
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
    ALIGN
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
    /// Alignment of each read's offset and length ([`read_alignment`]).
    align: usize,
}

impl DirectRandomAccessFile {
    pub(crate) fn open(path: &Path) -> Result<DirectRandomAccessFile> {
        let file = open_direct(path, OpenOptions::new().read(true), "open")?;
        let size = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
        let align = read_alignment(&file);
        Ok(DirectRandomAccessFile {
            path: path.to_owned(),
            file,
            size,
            align,
        })
    }
}

impl RandomAccessFile for DirectRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let (start, skip, span) = aligned_read(offset, buf.len(), self.align);
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
                if got % self.align != 0 {
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

    fn direct_io(&self) -> Option<super::DirectIo> {
        use std::os::fd::AsRawFd;
        Some(super::DirectIo {
            fd: self.file.as_raw_fd(),
            align: self.align,
        })
    }

    fn map(&self) -> Result<bytes::Bytes> {
        // Packed tables are mapped, which no direct read can serve: their
        // reads go through the page cache, as RocksDB's mmap reads do.
        let plain = File::open(&self.path).map_err(|e| io_err("open", &self.path, e))?;
        super::posix::map_file(&plain, &self.path, self.size)
    }
}

/// One read of a batch ([`read_direct_batch`]): `buf.len()` bytes at
/// `offset` of `file`; `result` says how it went.
pub(crate) struct DirectRead<'a> {
    pub(crate) file: &'a dyn RandomAccessFile,
    pub(crate) offset: u64,
    pub(crate) buf: &'a mut [u8],
    pub(crate) result: Result<()>,
}

/// Reads every request of `reads`. Those of files read with direct I/O
/// ([`RandomAccessFile::direct_io`]) go to the kernel together, up to
/// [`uring::ENTRIES`] at a time, through this thread's io_uring, so that
/// the device works on them at once; the others, a lone one, and all of
/// them where io_uring cannot be set up (before Linux 5.6, or disabled),
/// are read one after another with `read_exact_at`. A read that io_uring
/// fails or cuts short is made again with `read_exact_at`, whose error
/// (naming the file and offset) is the one reported.
pub(crate) fn read_direct_batch(reads: &mut [DirectRead<'_>]) {
    fn alone(r: &mut DirectRead<'_>) {
        r.result = r.file.read_exact_at(r.offset, r.buf);
    }
    #[cfg(target_os = "linux")]
    {
        // The direct ones, with their descriptors; the others read now.
        let mut direct: smallvec::SmallVec<[(usize, super::DirectIo); uring::ENTRIES]> =
            smallvec::SmallVec::new();
        for (i, r) in reads.iter_mut().enumerate() {
            match r.file.direct_io() {
                Some(io) => direct.push((i, io)),
                None => alone(r),
            }
        }
        for chunk in direct.chunks(uring::ENTRIES) {
            if chunk.len() < 2 || uring::read(reads, chunk).is_none() {
                chunk.iter().for_each(|&(i, _)| alone(&mut reads[i]));
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    reads.iter_mut().for_each(alone);
}

#[cfg(target_os = "linux")]
mod uring {
    use std::cell::RefCell;

    use io_uring::{opcode, types, IoUring};

    use super::super::DirectIo;
    use super::{
        aligned_read, aligned_window, round_up, DirectRead, ALIGN, READ_BUFFER_KEPT_BYTES,
    };

    /// Reads one ring takes at a time.
    pub(super) const ENTRIES: usize = 32;

    enum Ring {
        Untried,
        Unavailable,
        Ready(Box<IoUring>),
    }

    thread_local! {
        /// Each thread's ring, made on its first batch.
        static RING: RefCell<Ring> = const { RefCell::new(Ring::Untried) };
        /// Each thread's aligned windows for a batch's reads.
        static WINDOWS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }

    /// Where one read's window lies and what it covers.
    #[derive(Clone, Copy)]
    struct Window {
        /// Offset of the window in the thread's buffer.
        at: usize,
        /// Aligned file offset and length read into it.
        start: u64,
        span: usize,
        /// Bytes of the window before the ones asked for.
        skip: usize,
    }

    /// Reads `reads[i]` for every `(i, io)` of `chunk` (at least two, at
    /// most [`ENTRIES`]; `io` is the file's `direct_io`) through this
    /// thread's ring, each result recorded in its request. `None`: no ring
    /// here, or it failed; the caller reads them itself.
    pub(super) fn read(reads: &mut [DirectRead<'_>], chunk: &[(usize, DirectIo)]) -> Option<()> {
        debug_assert!((2..=ENTRIES).contains(&chunk.len()));
        RING.with(|cell| {
            let mut ring = cell.borrow_mut();
            if matches!(*ring, Ring::Untried) {
                *ring = match IoUring::new(ENTRIES as u32) {
                    Ok(r) => Ring::Ready(Box::new(r)),
                    Err(_) => Ring::Unavailable,
                };
            }
            let Ring::Ready(r) = &mut *ring else {
                return None;
            };
            let done = WINDOWS.with(|w| read_with(r, &mut w.borrow_mut(), reads, chunk));
            if done.is_none() {
                // The ring is in an unknown state: reads may still be in
                // flight into the windows, so neither is ever freed, and
                // this thread reads one block at a time from now on.
                if let Ring::Ready(r) = std::mem::replace(&mut *ring, Ring::Unavailable) {
                    std::mem::forget(r);
                }
                WINDOWS.with(|w| std::mem::forget(std::mem::take(&mut *w.borrow_mut())));
            }
            done
        })
    }

    fn read_with(
        ring: &mut IoUring,
        buf: &mut Vec<u8>,
        reads: &mut [DirectRead<'_>],
        chunk: &[(usize, DirectIo)],
    ) -> Option<()> {
        let mut windows = [Window {
            at: 0,
            start: 0,
            span: 0,
            skip: 0,
        }; ENTRIES];
        let mut total = 0;
        // Everything that can fail is checked here, before any read goes
        // out: a failure after a submission leaks the ring.
        for (w, &(i, io)) in windows.iter_mut().zip(chunk) {
            let (start, skip, span) = aligned_read(reads[i].offset, reads[i].buf.len(), io.align);
            u32::try_from(span).ok()?;
            *w = Window {
                at: total,
                start,
                span,
                skip,
            };
            total += round_up(span, ALIGN);
        }
        let base = aligned_window(buf, total);
        let ptr = buf[base..].as_mut_ptr();
        {
            let mut sq = ring.submission();
            if !sq.is_empty() || sq.capacity() < chunk.len() {
                return None;
            }
            for (k, (w, &(_, io))) in windows.iter().zip(chunk).enumerate() {
                // SAFETY: inside `buf`: `at + span <= total` bytes past `base`.
                let dst = unsafe { ptr.add(w.at) };
                let entry = opcode::Read::new(types::Fd(io.fd), dst, w.span as u32)
                    .offset(w.start)
                    .build()
                    .user_data(k as u64);
                // SAFETY: the window stays allocated and unread until its
                // completion arrives below; if the ring fails instead, the
                // caller leaks the buffer and the ring. The descriptor is
                // the open file's, which `reads` borrows for the call.
                unsafe { sq.push(&entry) }.ok()?;
            }
        }
        let mut results = [i32::MIN; ENTRIES];
        let mut left = chunk.len();
        while left > 0 {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
                    ) => {}
                Err(_) => return None,
            }
            for cqe in ring.completion() {
                let k = cqe.user_data() as usize;
                if k < chunk.len() && results[k] == i32::MIN {
                    results[k] = cqe.result();
                    left -= 1;
                }
            }
        }
        for (k, (w, &(i, _))) in windows.iter().zip(chunk).enumerate() {
            let r = &mut reads[i];
            let got = usize::try_from(results[k]).unwrap_or(0);
            r.result = if results[k] >= 0 && got >= w.skip + r.buf.len() {
                let from = base + w.at + w.skip;
                r.buf.copy_from_slice(&buf[from..from + r.buf.len()]);
                Ok(())
            } else {
                // Failed or short: read again alone, for the error.
                r.file.read_exact_at(r.offset, r.buf)
            };
        }
        if buf.len() > READ_BUFFER_KEPT_BYTES {
            *buf = Vec::new();
        }
        Some(())
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
            let padded = round_up(self.len, ALIGN);
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

    /// A file in memory, read without direct I/O.
    #[derive(Debug)]
    struct InMemory(Vec<u8>);

    impl RandomAccessFile for InMemory {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            let at = offset as usize;
            match self.0.get(at..at + buf.len()) {
                Some(b) => {
                    buf.copy_from_slice(b);
                    Ok(())
                }
                None => Err(Error::invalid_argument("past the end".to_string())),
            }
        }
        fn size(&self) -> u64 {
            self.0.len() as u64
        }
    }

    /// Batches of reads over direct files and one that is not (1 to 40
    /// reads, so over the ring's size too; some past the end): each read
    /// gets exactly its bytes, or an error where it runs past the end, as
    /// `read_exact_at` alone gives. Through io_uring where the kernel has
    /// it, one read after another where not.
    #[test]
    fn batched_reads_match_single_reads() {
        let Some(dir) = direct_dir("batch") else {
            eprintln!("the temporary directory takes no O_DIRECT: nothing to test");
            return;
        };
        let mut rng = StdRng::seed_from_u64(5);
        let mut contents = Vec::new();
        let mut files: Vec<Box<dyn RandomAccessFile>> = Vec::new();
        for i in 0..3 {
            let data: Vec<u8> = (0..rng.gen_range(1..200_000)).map(|_| rng.gen()).collect();
            let path = dir.join(format!("f{i}"));
            let mut f = DirectWritableFile::create(&path).unwrap();
            f.append(&data).unwrap();
            f.sync().unwrap();
            let r = DirectRandomAccessFile::open(&path).unwrap();
            assert!(r.direct_io().is_some());
            files.push(Box::new(r));
            contents.push(data);
        }
        let data: Vec<u8> = (0..50_000).map(|_| rng.gen()).collect();
        files.push(Box::new(InMemory(data.clone())));
        contents.push(data);
        for round in 0..60 {
            let n = rng.gen_range(1..=40);
            let wanted: Vec<(usize, u64, usize)> = (0..n)
                .map(|_| {
                    let f = rng.gen_range(0..files.len());
                    let size = contents[f].len();
                    let off = rng.gen_range(0..size + 100);
                    let len = rng.gen_range(0..3 * ALIGN);
                    (f, off as u64, len)
                })
                .collect();
            let mut bufs: Vec<Vec<u8>> = wanted.iter().map(|w| vec![0xEE; w.2]).collect();
            let mut reads: Vec<DirectRead<'_>> = wanted
                .iter()
                .zip(bufs.iter_mut())
                .map(|(&(f, offset, _), buf)| DirectRead {
                    file: &*files[f],
                    offset,
                    buf,
                    result: Ok(()),
                })
                .collect();
            read_direct_batch(&mut reads);
            for (k, (r, &(f, off, len))) in reads.iter().zip(&wanted).enumerate() {
                let end = off as usize + len;
                if end <= contents[f].len() {
                    r.result.as_ref().unwrap();
                    assert!(
                        r.buf[..] == contents[f][off as usize..end],
                        "round {round} read {k}: {len} bytes at {off} of file {f}"
                    );
                } else {
                    assert!(r.result.is_err(), "round {round} read {k}: past the end");
                }
            }
        }
        drop(files);
        std::fs::remove_dir_all(&dir).unwrap();
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
            let mut r = DirectRandomAccessFile::open(&path).unwrap();
            assert_eq!(r.size(), want.len() as u64);
            assert!(r.align.is_power_of_two() && r.align <= ALIGN, "{}", r.align);
            // Odd rounds read at the file system's alignment, even ones at
            // 4 KiB, which every file system takes.
            if round % 2 == 0 {
                r.align = ALIGN;
            }
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
