//! File handles of the fault-injecting file system: each operation is
//! checked against the rules and the crash state before it reaches the
//! inner file.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use super::{down, FaultInjectionFileSystem, FileOp};
use crate::env::{RandomAccessFile, SequentialFile, WritableFile};
use crate::error::Result;

/// A file being written: appends go straight through to the inner file (no
/// buffering here), so what a crash keeps is decided by this wrapper alone.
pub(super) struct FaultWritableFile {
    pub(super) inner: Box<dyn WritableFile>,
    pub(super) path: PathBuf,
    pub(super) inode: u64,
    pub(super) epoch: u64,
    pub(super) fs: FaultInjectionFileSystem,
}

impl fmt::Debug for FaultWritableFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultWritableFile")
            .field("path", &self.path)
            .finish()
    }
}

impl WritableFile for FaultWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut st = self.fs.lock_state();
        self.fs
            .check(&mut st, FileOp::Append, &[&self.path], Some(self.epoch))?;
        self.inner.append(data)?;
        self.inner.flush()
    }

    fn flush(&mut self) -> Result<()> {
        let st = self.fs.lock_state();
        if !st.active || st.epoch != self.epoch {
            return Err(down("flush", &self.path));
        }
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        let mut st = self.fs.lock_state();
        self.fs
            .check(&mut st, FileOp::Sync, &[&self.path], Some(self.epoch))?;
        self.inner.sync()?;
        let size = self.inner.size();
        if let Some(inode) = st.ns.inodes.get_mut(&self.inode) {
            inode.synced_len = inode.synced_len.max(size);
        }
        Ok(())
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }
}

pub(super) struct FaultSequentialFile {
    pub(super) inner: Box<dyn SequentialFile>,
    pub(super) path: PathBuf,
    pub(super) epoch: u64,
    pub(super) fs: FaultInjectionFileSystem,
}

impl fmt::Debug for FaultSequentialFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultSequentialFile")
            .field("path", &self.path)
            .finish()
    }
}

impl SequentialFile for FaultSequentialFile {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        {
            let mut st = self.fs.lock_state();
            self.fs
                .check(&mut st, FileOp::Read, &[&self.path], Some(self.epoch))?;
        }
        self.inner.read(buf)
    }
}

pub(super) struct FaultRandomAccessFile {
    pub(super) inner: Arc<dyn RandomAccessFile>,
    pub(super) path: PathBuf,
    pub(super) epoch: u64,
    pub(super) fs: FaultInjectionFileSystem,
}

impl fmt::Debug for FaultRandomAccessFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultRandomAccessFile")
            .field("path", &self.path)
            .finish()
    }
}

impl RandomAccessFile for FaultRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        {
            let mut st = self.fs.lock_state();
            self.fs
                .check(&mut st, FileOp::Read, &[&self.path], Some(self.epoch))?;
        }
        self.inner.read_exact_at(offset, buf)
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }
}
