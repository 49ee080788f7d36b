//! The one error type of the tool. Every variant ends the run with a
//! message on stderr and exit status 1, as db_bench does.

use std::fmt;

/// Why a run could not go on.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A bad command line: unknown flag, malformed value, bad combination.
    Usage(String),
    /// A flag the chosen engine knows but cannot honour (yet).
    Unsupported(String),
    /// The engine failed an operation.
    Engine {
        /// The engine's name (`strata`, `rocksdb`, ...).
        engine: &'static str,
        /// What failed, with the engine's own message.
        message: String,
    },
    /// Writing the report or handling the database directory failed.
    Io(std::io::Error),
}

impl Error {
    /// An engine error from anything printable.
    pub fn engine(engine: &'static str, what: impl fmt::Display) -> Error {
        Error::Engine {
            engine,
            message: what.to_string(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(m) => write!(f, "{m}"),
            Error::Unsupported(m) => write!(f, "not supported: {m}"),
            Error::Engine { engine, message } => write!(f, "{engine}: {message}"),
            Error::Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// The result of the tool's operations.
pub type Result<T> = std::result::Result<T, Error>;
