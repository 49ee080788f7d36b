//! An in-memory file system for tests: fast, isolated, and shareable between
//! "processes" (clones of one `MemFileSystem` see the same files).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{
    display, not_found, FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile,
};
use crate::error::{Error, Result};

type FileData = Arc<Mutex<Vec<u8>>>;

#[derive(Debug, Default)]
struct State {
    files: BTreeMap<PathBuf, FileData>,
    dirs: BTreeSet<PathBuf>,
    locks: HashSet<PathBuf>,
}

/// A file system held in memory. Cloning gives another handle to the same files.
#[derive(Debug, Default, Clone)]
pub struct MemFileSystem {
    state: Arc<Mutex<State>>,
}

impl MemFileSystem {
    /// An empty file system with only the root directory.
    pub fn new() -> Self {
        let fs = MemFileSystem::default();
        fs.state.lock().dirs.insert(PathBuf::from("/"));
        fs
    }

    fn file(&self, path: &Path) -> Result<FileData> {
        self.state
            .lock()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| not_found(path))
    }
}

#[derive(Debug)]
struct MemWritableFile {
    data: FileData,
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.data.lock().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.data.lock().len() as u64
    }
}

#[derive(Debug)]
struct MemSequentialFile {
    data: FileData,
    pos: usize,
}

impl SequentialFile for MemSequentialFile {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let data = self.data.lock();
        let n = buf.len().min(data.len().saturating_sub(self.pos));
        buf[..n].copy_from_slice(&data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[derive(Debug)]
struct MemRandomAccessFile {
    path: PathBuf,
    data: FileData,
    size: u64,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let data = self.data.lock();
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= data.len() as u64);
        match end {
            Some(end) => {
                buf.copy_from_slice(&data[offset as usize..end as usize]);
                Ok(())
            }
            None => Err(Error::io(
                format!(
                    "read {} bytes at offset {offset} of {}",
                    buf.len(),
                    display(&self.path)
                ),
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            )),
        }
    }
    fn size(&self) -> u64 {
        self.size
    }
}

#[derive(Debug)]
struct MemFileLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        self.state.lock().locks.remove(&self.path);
    }
}

impl FileSystem for MemFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let data: FileData = Arc::default();
        self.state
            .lock()
            .files
            .insert(path.to_owned(), data.clone());
        Ok(Box::new(MemWritableFile { data }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(MemWritableFile {
            data: self.file(path)?,
        }))
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        Ok(Box::new(MemSequentialFile {
            data: self.file(path)?,
            pos: 0,
        }))
    }

    fn open_random_access(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let data = self.file(path)?;
        let size = data.lock().len() as u64;
        Ok(Arc::new(MemRandomAccessFile {
            path: path.to_owned(),
            data,
            size,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state.lock();
        let data = state.files.remove(from).ok_or_else(|| not_found(from))?;
        state.files.insert(to.to_owned(), data);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.state
            .lock()
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let state = self.state.lock();
        if !state.dirs.contains(dir) {
            return Err(not_found(dir));
        }
        let files = state.files.keys();
        let dirs = state.dirs.iter();
        Ok(files
            .chain(dirs)
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut state = self.state.lock();
        for ancestor in dir.ancestors() {
            if state.files.contains_key(ancestor) {
                return Err(Error::invalid_argument(format!(
                    "{} is a file",
                    display(ancestor)
                )));
            }
            state.dirs.insert(ancestor.to_owned());
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        let mut state = self.state.lock();
        if state
            .files
            .keys()
            .chain(state.dirs.iter())
            .any(|p| p.parent() == Some(dir))
        {
            return Err(Error::invalid_argument(format!(
                "directory {} is not empty",
                display(dir)
            )));
        }
        state
            .dirs
            .remove(dir)
            .then_some(())
            .ok_or_else(|| not_found(dir))
    }

    fn exists(&self, path: &Path) -> bool {
        let state = self.state.lock();
        state.files.contains_key(path) || state.dirs.contains(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.state.lock().dirs.contains(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(self.file(path)?.lock().len() as u64)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = self.state.lock();
        if !state.locks.insert(path.to_owned()) {
            return Err(Error::Busy(format!(
                "lock {}: held by another DB handle",
                display(path)
            )));
        }
        state.files.entry(path.to_owned()).or_default();
        Ok(Box::new(MemFileLock {
            state: self.state.clone(),
            path: path.to_owned(),
        }))
    }

    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }
}
