//! How a command fails: the exit status tells a bad setup (1) from a
//! database that failed a check (2), so a script can tell "fix the flags"
//! from "found a bug".

/// Why a command failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Bad flags, missing or unusable files, I/O on the tool's own files.
    Setup(String),
    /// The database did not hold what it must, or could not be reopened.
    Check(String),
}

impl Failure {
    /// The exit status: 1 for setup, 2 for a failed check.
    pub fn exit_code(&self) -> i32 {
        match self {
            Failure::Setup(_) => 1,
            Failure::Check(_) => 2,
        }
    }

    /// The same failure with `context` before its message.
    pub fn context(self, context: impl std::fmt::Display) -> Failure {
        match self {
            Failure::Setup(m) => Failure::Setup(format!("{context}: {m}")),
            Failure::Check(m) => Failure::Check(format!("{context}: {m}")),
        }
    }
}

/// A failure to open the database at `path`: the caller's doing (a bad
/// option, a missing database, one locked by another process) is Setup;
/// what the engine found or hit on disk (corruption, I/O) is Check.
pub fn open_failure(path: &str, e: strata::Error) -> Failure {
    let what = format!("open {path}: {e}");
    match e {
        strata::Error::Corruption { .. } | strata::Error::Io { .. } => Failure::Check(what),
        _ => Failure::Setup(what),
    }
}

/// Plain string errors come from flags and the tool's own files.
impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Setup(message)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Setup(m) => write!(f, "{m}"),
            Failure::Check(m) => write!(f, "VERIFICATION FAILED: {m}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_and_check_failures_exit_differently() {
        let setup: Failure = String::from("--keys=x: not a number").into();
        assert_eq!(setup.exit_code(), 1);
        assert_eq!(setup.to_string(), "--keys=x: not a number");
        let check = Failure::Check("slot 3".into()).context("cycle 2");
        assert_eq!(check.exit_code(), 2);
        assert_eq!(check.to_string(), "VERIFICATION FAILED: cycle 2: slot 3");
    }

    #[test]
    fn open_failures_are_sorted_by_whose_they_are() {
        let busy = open_failure("/db", strata::Error::Busy("LOCK held".into()));
        assert_eq!(busy.exit_code(), 1);
        let corrupt = strata::Error::Corruption {
            file: "/db/000001.sst".into(),
            offset: 0,
            what: "bad".into(),
        };
        assert_eq!(open_failure("/db", corrupt).exit_code(), 2);
    }
}
