//! The file-system trait through which every file read and write goes.
//!
//! Nothing in Strata touches `std::fs` directly: the database, the log and the
//! tables all hold a [`FileSystem`], so tests can run the engine on
//! [`MemFileSystem`] and the crash tests can put a fault-injecting file system
//! on top of either implementation.
//!
//! Thread safety: a `FileSystem` and a `RandomAccessFile` are shared across
//! threads; a `WritableFile` or `SequentialFile` has one owner at a time.

mod direct;
mod fault;
mod memory;
mod posix;
pub(crate) mod prefetch;
pub(crate) mod rate_limiter;

pub(crate) use direct::{read_direct_batch, DirectRead};
pub use fault::{CrashMode, FaultInjectionFileSystem, FaultRule, FaultStats, FileOp};
pub use memory::MemFileSystem;
pub use posix::PosixFileSystem;

use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};

/// A file being written from start to end.
pub trait WritableFile: Send + Debug {
    /// Appends `data` at the end of the file (possibly buffered).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system (not durable).
    fn flush(&mut self) -> Result<()>;
    /// Makes every byte appended so far durable.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn size(&self) -> u64;
}

/// A file read front to back (logs, the manifest).
pub trait SequentialFile: Send + Debug {
    /// Reads up to `buf.len()` bytes; 0 means end of file.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize>;
}

/// A file read at arbitrary offsets (tables). Shared across threads.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Reads exactly `buf.len()` bytes at `offset`, or fails (short reads are errors).
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Size of the file in bytes when it was opened.
    fn size(&self) -> u64;
    /// The whole file (its first [`RandomAccessFile::size`] bytes) as one
    /// shared buffer. File systems that can map files do (the POSIX one);
    /// the default reads the file into memory through
    /// [`RandomAccessFile::read_exact_at`], so wrappers such as the
    /// fault-injecting file system see the read. Packed tables are read
    /// this way.
    fn map(&self) -> Result<bytes::Bytes> {
        let len = usize::try_from(self.size()).map_err(|_| {
            Error::invalid_argument(format!("a file of {} bytes cannot be mapped", self.size()))
        })?;
        let mut buf = vec![0u8; len];
        self.read_exact_at(0, &mut buf)?;
        Ok(bytes::Bytes::from(buf))
    }
    /// The descriptor behind a file read with direct I/O (`O_DIRECT`) and
    /// the alignment its reads' offsets and lengths need, through which
    /// Strata may issue several reads at once (the blocks a seek needs in
    /// several levels, through io_uring) instead of one
    /// [`read_exact_at`](Self::read_exact_at) after another. `None`, the
    /// default, keeps every read in `read_exact_at`: wrappers (the
    /// fault-injecting file system) return it so that they see each read.
    /// An implementation that returns `Some` promises that the descriptor
    /// stays open as long as the file and reads the file's bytes.
    #[cfg(unix)]
    fn direct_io(&self) -> Option<DirectIo> {
        None
    }
}

/// What [`RandomAccessFile::direct_io`] gives: a file's descriptor, read
/// with `O_DIRECT`, and the alignment (a power of two of at most 4 KiB) of
/// the offsets and lengths of its reads. Buffers are aligned to 4 KiB.
#[cfg(unix)]
#[derive(Debug, Clone, Copy)]
pub struct DirectIo {
    /// The open descriptor.
    pub fd: std::os::fd::RawFd,
    /// Alignment of each read's offset and length, in bytes.
    pub align: usize,
}

/// An exclusive lock on a database directory, released when dropped.
pub trait FileLock: Send + Sync + Debug {}

/// Every operation Strata needs from a file system.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates `path` (truncating it if it exists) for writing.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file to append at its end.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file to read front to back.
    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>>;
    /// Opens an existing file for positional reads.
    fn open_random_access(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Names (not paths) of the entries in directory `dir`, in no particular order.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Creates a directory and its parents; fine if it exists.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, dir: &Path) -> Result<()>;
    /// True if `path` exists (file or directory).
    fn exists(&self, path: &Path) -> bool;
    /// True if `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Size of a file in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Takes an exclusive lock on `path` (created if missing). Fails with
    /// [`Error::Busy`] if another process or handle holds it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Makes the directory entries of `dir` (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;

    /// [`create`](Self::create) with direct I/O (`O_DIRECT`: written
    /// around the page cache, in aligned blocks), for the tables of
    /// flushes and compactions under
    /// [`Options::set_use_direct_io_for_flush_and_compaction`](crate::Options::set_use_direct_io_for_flush_and_compaction).
    /// A file system that cannot do it says `NotSupported`; the default,
    /// for file systems without a page cache (or wrappers), is `create`.
    fn create_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }

    /// [`open_random_access`](Self::open_random_access) with direct I/O,
    /// for tables under [`Options::set_use_direct_reads`](crate::Options::set_use_direct_reads).
    /// As [`create_direct`](Self::create_direct), the default is the
    /// plain open.
    fn open_random_access_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random_access(path)
    }

    /// Makes `to` a new name of the existing file `from` (a hard link), or,
    /// where that cannot be done (another file system, no links), a synced
    /// copy of it. `to` must not exist. The default copies.
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        copy_file(self, from, to, u64::MAX)
    }
}

/// Copies the first `limit` bytes of `from` (all of it if shorter) to a
/// new file `to` and syncs it.
pub(crate) fn copy_file<F: FileSystem + ?Sized>(
    fs: &F,
    from: &Path,
    to: &Path,
    limit: u64,
) -> Result<()> {
    let mut src = fs.open_sequential(from)?;
    let mut dst = fs.create(to)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut left = limit;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = src.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        dst.append(&buf[..n])?;
        left -= n as u64;
    }
    dst.sync()
}

/// Reads a whole file into memory. For small files (CURRENT, OPTIONS).
pub fn read_file_to_vec(fs: &dyn FileSystem, path: &Path) -> Result<Vec<u8>> {
    let mut file = fs.open_sequential(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Writes `data` to `path` through a temporary file, syncs it, and renames it
/// into place, so a crash leaves either the old or the new contents.
pub fn write_file_atomic(fs: &dyn FileSystem, path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension("dbtmp");
    let mut file = fs.create(&tmp)?;
    file.append(data)?;
    file.sync()?;
    drop(file);
    fs.rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fs.sync_dir(dir)?;
    }
    Ok(())
}

pub(crate) fn display(path: &Path) -> String {
    path.display().to_string()
}

pub(crate) fn not_found(path: &Path) -> Error {
    Error::io(
        format!("open {}", path.display()),
        std::io::Error::from(std::io::ErrorKind::NotFound),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same behaviour checks run against both implementations.
    fn exercise(fs: &dyn FileSystem, dir: &Path) {
        fs.create_dir_all(dir).unwrap();
        let a = dir.join("a");
        let mut w = fs.create(&a).unwrap();
        w.append(b"hello ").unwrap();
        w.append(b"world").unwrap();
        assert_eq!(w.size(), 11);
        w.sync().unwrap();
        drop(w);
        assert_eq!(fs.file_size(&a).unwrap(), 11);
        assert_eq!(read_file_to_vec(fs, &a).unwrap(), b"hello world");

        let r = fs.open_random_access(&a).unwrap();
        let mut buf = [0u8; 5];
        r.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"world");
        assert!(
            r.read_exact_at(8, &mut buf).is_err(),
            "short read must fail"
        );

        let mut w = fs.open_append(&a).unwrap();
        assert_eq!(w.size(), 11);
        w.append(b"!").unwrap();
        w.sync().unwrap();
        drop(w);
        assert_eq!(read_file_to_vec(fs, &a).unwrap(), b"hello world!");

        let b = dir.join("b");
        fs.rename(&a, &b).unwrap();
        assert!(!fs.exists(&a));
        assert!(fs.exists(&b));
        let mut names = fs.list(dir).unwrap();
        names.sort();
        assert!(names.contains(&"b".to_string()));
        fs.sync_dir(dir).unwrap();

        write_file_atomic(fs, &dir.join("CURRENT"), b"MANIFEST-000001\n").unwrap();
        assert_eq!(
            read_file_to_vec(fs, &dir.join("CURRENT")).unwrap(),
            b"MANIFEST-000001\n"
        );

        let lock = fs.lock(&dir.join("LOCK")).unwrap();
        assert!(matches!(fs.lock(&dir.join("LOCK")), Err(Error::Busy(_))));
        drop(lock);
        let _again = fs.lock(&dir.join("LOCK")).unwrap();

        fs.remove(&b).unwrap();
        assert!(!fs.exists(&b));
        assert!(fs.open_sequential(&b).unwrap_err().is_not_found());
        assert!(fs.is_dir(dir));
    }

    #[test]
    fn memory_file_system_behaves() {
        exercise(&MemFileSystem::new(), Path::new("/db"));
    }

    #[test]
    fn posix_file_system_behaves() {
        let dir = std::env::temp_dir().join(format!("strata-env-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        exercise(&PosixFileSystem::new(), &dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
