//! The error type of every fallible Strata operation.
//!
//! Operating errors (I/O, corruption, bad input) are values of [`Error`];
//! our own bugs are assertions. A `Corruption` always names the file, the byte
//! offset and what the decoder expected, so an operator can find the bad bytes.

use std::fmt;
use std::io;
use std::sync::Arc;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Strata.
///
/// ```
/// use strata_kv::{Error, Options, DB};
/// // Opening a database that does not exist, without create_if_missing.
/// let dir = std::env::temp_dir().join(format!("strata-doc-missing-{}", std::process::id()));
/// match DB::open(&Options::default(), &dir) {
///     Err(Error::InvalidArgument(what)) => assert!(what.contains("create_if_missing"), "{what}"),
///     other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
/// }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// Bytes read from storage do not match their format or checksum.
    Corruption {
        /// The file that holds the bad bytes.
        file: String,
        /// Byte offset in that file where the problem was found.
        offset: u64,
        /// What the decoder expected and found.
        what: String,
    },
    /// An operating-system I/O error, with what was being done.
    Io {
        /// What Strata was doing, e.g. "open /db/000012.sst".
        context: String,
        /// The underlying error (shared so `Error` stays `Clone`).
        source: Arc<io::Error>,
    },
    /// A caller passed something that cannot be honoured: a bad option, an
    /// oversized key, value or batch, a path that is not a database
    /// directory, a directory with no database and `create_if_missing` off
    /// (RocksDB's status for that case too), or one that holds data but no
    /// database.
    InvalidArgument(String),
    /// A file the database needs vanished while it was being opened (its
    /// `CURRENT` file, after open found it). A missing table named by the
    /// manifest is `Corruption`.
    NotFound(String),
    /// The database is locked by another process or another open handle.
    /// (A background compaction that stops because the database is closing
    /// ends with it too, but no caller receives that one.)
    Busy(String),
    /// A RocksDB compression type Strata does not implement, by name
    /// (`"zlib"`, `"bzip2"`, `"lz4hc"`, `"xpress"` parsed as a
    /// [`DBCompressionType`](crate::DBCompressionType)); or a merge written
    /// to a database opened without a merge operator (as RocksDB).
    NotSupported(String),
    /// The merge operator returned `None` for a key's operands (the message
    /// names the operator and the key). The read, or the compaction, that
    /// asked fails; the operands stay stored and nothing is lost.
    MergeFailed(String),
    /// A write stopped part way through: applying its batch panicked (a
    /// user comparator's panic, say). The writes queued with it fail with
    /// this error, and so does every later write until the database is
    /// reopened (RocksDB's `Status::Aborted`). Reads go on.
    Aborted(String),
}

impl Error {
    /// Builds a [`Error::Corruption`].
    pub fn corruption(file: impl Into<String>, offset: u64, what: impl Into<String>) -> Error {
        Error::Corruption {
            file: file.into(),
            offset,
            what: what.into(),
        }
    }

    /// Wraps an [`io::Error`] with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source: Arc::new(source),
        }
    }

    /// Builds an [`Error::InvalidArgument`].
    pub fn invalid_argument(what: impl Into<String>) -> Error {
        Error::InvalidArgument(what.into())
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// True for an I/O error of a full disk or an exhausted quota (ENOSPC,
    /// EDQUOT). A flush or compaction that fails with one is retried by
    /// the database itself once space returns
    /// ([`Options::set_max_bgerror_resume_count`](crate::Options::set_max_bgerror_resume_count)).
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                source.kind() == io::ErrorKind::StorageFull
                    || source.kind() == io::ErrorKind::QuotaExceeded
                    || matches!(source.raw_os_error(), Some(28 | 122))
            }
            _ => false,
        }
    }

    /// True for [`Error::NotFound`], including an I/O error of kind `NotFound`.
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::NotFound(_) => true,
            Error::Io { source, .. } => source.kind() == io::ErrorKind::NotFound,
            _ => false,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Corruption { file, offset, what } => {
                write!(f, "Corruption: {file} at offset {offset}: {what}")
            }
            Error::Io { context, source } => write!(f, "IO error: {context}: {source}"),
            Error::InvalidArgument(what) => write!(f, "Invalid argument: {what}"),
            Error::NotFound(what) => write!(f, "Not found: {what}"),
            Error::Busy(what) => write!(f, "Busy: {what}"),
            Error::NotSupported(what) => write!(f, "Not supported: {what}"),
            Error::MergeFailed(what) => write!(f, "Merge failed: {what}"),
            Error::Aborted(what) => write!(f, "Aborted: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corruption_message_names_file_and_offset() {
        let e = Error::corruption("000007.sst", 4096, "bad block checksum");
        assert_eq!(
            e.to_string(),
            "Corruption: 000007.sst at offset 4096: bad block checksum"
        );
        assert!(e.is_corruption());
    }

    #[test]
    fn io_not_found_is_not_found() {
        let e = Error::io("open x", io::Error::from(io::ErrorKind::NotFound));
        assert!(e.is_not_found());
        assert!(!e.is_corruption());
    }
}
