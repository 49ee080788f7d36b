//! The real file system, through `std::fs` and positional reads (`pread`).

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::{display, FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

/// Appends smaller than this are gathered before a `write` system call.
const WRITE_BUFFER_BYTES: usize = 64 << 10;

/// The operating system's file system.
#[derive(Debug, Default, Clone)]
pub struct PosixFileSystem;

impl PosixFileSystem {
    /// Creates a handle to the real file system.
    pub fn new() -> Self {
        PosixFileSystem
    }
}

/// Paths locked by this process: OS locks (`flock`) are per open file
/// description, so two opens in one process must be caught here.
fn locked_paths() -> &'static Mutex<HashSet<PathBuf>> {
    static LOCKED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    LOCKED.get_or_init(|| Mutex::new(HashSet::new()))
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", display(path)), e)
}

#[derive(Debug)]
struct PosixWritableFile {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    size: u64,
}

impl WritableFile for PosixWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.size += data.len() as u64;
        if self.buf.len() + data.len() <= WRITE_BUFFER_BYTES {
            self.buf.extend_from_slice(data);
            return Ok(());
        }
        self.flush()?;
        if data.len() >= WRITE_BUFFER_BYTES {
            return self
                .file
                .write_all(data)
                .map_err(|e| io_err("write", &self.path, e));
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(|e| io_err("write", &self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file
            .sync_data()
            .map_err(|e| io_err("sync", &self.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for PosixWritableFile {
    fn drop(&mut self) {
        // Best effort: an error here is seen by the next sync or read of the file.
        let _ = self.flush();
    }
}

#[derive(Debug)]
struct PosixSequentialFile {
    path: PathBuf,
    file: File,
}

impl SequentialFile for PosixSequentialFile {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        self.file
            .read(buf)
            .map_err(|e| io_err("read", &self.path, e))
    }
}

#[derive(Debug)]
struct PosixRandomAccessFile {
    path: PathBuf,
    file: File,
    size: u64,
}

impl RandomAccessFile for PosixRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| {
            io_err(
                &format!("read {} bytes at offset {offset} of", buf.len()),
                &self.path,
                e,
            )
        })
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn map(&self) -> Result<bytes::Bytes> {
        map_file(&self.file, &self.path, self.size)
    }
}

/// The first `size` bytes of `file` (a table) mapped into memory.
pub(crate) fn map_file(file: &File, path: &Path, size: u64) -> Result<bytes::Bytes> {
    if size == 0 {
        return Ok(bytes::Bytes::new());
    }
    let len = usize::try_from(size)
        .map_err(|_| Error::invalid_argument(format!("{}: too large to map", display(path))))?;
    // SAFETY: table files are written once, synced and never modified
    // or truncated while the database has them open (they are deleted
    // only when no version and no reader holds them, and a deleted
    // file's mapping stays valid). Only a process outside the engine
    // truncating the file could invalidate the mapping.
    let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }
        .map_err(|e| io_err("mmap", path, e))?;
    Ok(bytes::Bytes::from_owner(map))
}

#[derive(Debug)]
struct PosixFileLock {
    path: PathBuf,
    file: File,
}

impl FileLock for PosixFileLock {}

impl Drop for PosixFileLock {
    fn drop(&mut self) {
        // Unlock explicitly rather than leave it to closing the descriptor:
        // a child forked by another thread of this process holds a copy of
        // the descriptor until it execs, and with it the lock. An unlock
        // releases the open file description's lock for every copy.
        let _ = self.file.unlock();
        if let Ok(mut set) = locked_paths().lock() {
            set.remove(&self.path);
        }
    }
}

impl FileSystem for PosixFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| io_err("create", path, e))?;
        Ok(Box::new(PosixWritableFile {
            path: path.to_owned(),
            file,
            buf: Vec::new(),
            size: 0,
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| io_err("open", path, e))?;
        let size = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
        Ok(Box::new(PosixWritableFile {
            path: path.to_owned(),
            file,
            buf: Vec::new(),
            size,
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let file = File::open(path).map_err(|e| io_err("open", path, e))?;
        Ok(Box::new(PosixSequentialFile {
            path: path.to_owned(),
            file,
        }))
    }

    fn create_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(super::direct::DirectWritableFile::create(path)?))
    }

    fn open_random_access_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(super::direct::DirectRandomAccessFile::open(path)?))
    }

    fn open_random_access(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| io_err("open", path, e))?;
        let size = file.metadata().map_err(|e| io_err("stat", path, e))?.len();
        Ok(Arc::new(PosixRandomAccessFile {
            path: path.to_owned(),
            file,
            size,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to).map_err(|e| io_err(&format!("rename {} to", display(from)), to, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        fs::remove_file(path).map_err(|e| io_err("remove", path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| io_err("list", dir, e))? {
            let entry = entry.map_err(|e| io_err("list", dir, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).map_err(|e| io_err("create directory", dir, e))
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        fs::remove_dir(dir).map_err(|e| io_err("remove directory", dir, e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(fs::metadata(path)
            .map_err(|e| io_err("stat", path, e))?
            .len())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let key = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        let busy = || {
            Error::Busy(format!(
                "lock {}: held by another process or DB handle",
                display(path)
            ))
        };
        {
            let mut set = locked_paths().lock().map_err(|_| busy())?;
            if !set.insert(key.clone()) {
                return Err(busy());
            }
        }
        let release = |key: &PathBuf| {
            if let Ok(mut set) = locked_paths().lock() {
                set.remove(key);
            }
        };
        let file = match OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
        {
            Ok(f) => f,
            Err(e) => {
                release(&key);
                return Err(io_err("open lock file", path, e));
            }
        };
        match file.try_lock() {
            Ok(()) => Ok(Box::new(PosixFileLock { path: key, file })),
            Err(std::fs::TryLockError::WouldBlock) => {
                release(&key);
                Err(busy())
            }
            Err(std::fs::TryLockError::Error(e)) => {
                release(&key);
                Err(io_err("lock", path, e))
            }
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let d = File::open(dir).map_err(|e| io_err("open directory", dir, e))?;
        d.sync_all().map_err(|e| io_err("sync directory", dir, e))
    }

    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        match std::fs::hard_link(from, to) {
            Ok(()) => Ok(()),
            // Another file system, or one without links: copy.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::CrossesDevices
                        | std::io::ErrorKind::Unsupported
                        | std::io::ErrorKind::PermissionDenied
                ) =>
            {
                super::copy_file(self, from, to, u64::MAX)
            }
            Err(e) => Err(io_err("link", from, e)),
        }
    }
}
