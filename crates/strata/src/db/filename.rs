//! The names of the files in a database directory, and the CURRENT file.
//!
//! ```text
//! 000012.log        write-ahead log number 12
//! 000012.sst        table number 12
//! MANIFEST-000012   manifest (version edit log) number 12
//! 000012.dbtmp      temporary file (being written, then renamed)
//! CURRENT           "MANIFEST-000012\n": the manifest to recover from
//! LOCK              held while a process has the database open
//! LOG, LOG.old      human-readable info log
//! ```
//!
//! All numbered files share one counter (the version set's next file
//! number), so a number names at most one file. Numbers are printed with at
//! least six digits, as LevelDB does; a parser accepts any count of ASCII
//! digits that fits in a `u64`. The CURRENT file is specified in
//! `docs/format/manifest.md`.

use std::path::{Path, PathBuf};

use crate::env::FileSystem;
use crate::error::Result;

/// What a file in the database directory is, judged by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A write-ahead log: `NNNNNN.log`.
    Log,
    /// A table (SST): `NNNNNN.sst`.
    Table,
    /// A manifest: `MANIFEST-NNNNNN`.
    Manifest,
    /// The pointer to the live manifest: `CURRENT`.
    Current,
    /// The lock file: `LOCK`.
    Lock,
    /// A temporary file: `NNNNNN.dbtmp`.
    Temp,
    /// The info log: `LOG` or `LOG.old`.
    InfoLog,
    /// The options the database was last opened with: `OPTIONS`.
    Options,
}

const LOG_SUFFIX: &str = ".log";
const TABLE_SUFFIX: &str = ".sst";
const TEMP_SUFFIX: &str = ".dbtmp";
const MANIFEST_PREFIX: &str = "MANIFEST-";
const CURRENT_NAME: &str = "CURRENT";
const LOCK_NAME: &str = "LOCK";
const INFO_LOG_NAME: &str = "LOG";
const OLD_INFO_LOG_NAME: &str = "LOG.old";
const OPTIONS_NAME: &str = "OPTIONS";
/// `OPTIONS` is written through this temporary name.
const OPTIONS_TEMP_NAME: &str = "OPTIONS.dbtmp";

fn numbered(dir: &Path, number: u64, suffix: &str) -> PathBuf {
    dir.join(format!("{number:06}{suffix}"))
}

/// `dir/NNNNNN.log`.
/// `names` for an error message: sorted, the first three, then ", ..."
/// if there are more.
pub(crate) fn shown_names(mut names: Vec<&str>) -> String {
    names.sort_unstable();
    let more = if names.len() > 3 { ", ..." } else { "" };
    names.truncate(3);
    format!("{}{more}", names.join(", "))
}

/// `dir/NNNNNN.log`.
pub fn log_file_name(dir: &Path, number: u64) -> PathBuf {
    numbered(dir, number, LOG_SUFFIX)
}

/// `dir/NNNNNN.sst`.
pub fn table_file_name(dir: &Path, number: u64) -> PathBuf {
    numbered(dir, number, TABLE_SUFFIX)
}

/// `dir/MANIFEST-NNNNNN`.
pub fn manifest_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{MANIFEST_PREFIX}{number:06}"))
}

/// `dir/OPTIONS`.
pub fn options_file_name(dir: &Path) -> PathBuf {
    dir.join(OPTIONS_NAME)
}

/// `dir/CURRENT`.
pub fn current_file_name(dir: &Path) -> PathBuf {
    dir.join(CURRENT_NAME)
}

/// `dir/LOCK`.
pub fn lock_file_name(dir: &Path) -> PathBuf {
    dir.join(LOCK_NAME)
}

/// `dir/NNNNNN.dbtmp`.
pub fn temp_file_name(dir: &Path, number: u64) -> PathBuf {
    numbered(dir, number, TEMP_SUFFIX)
}

/// `dir/LOG`.
#[cfg(test)]
pub fn info_log_file_name(dir: &Path) -> PathBuf {
    dir.join(INFO_LOG_NAME)
}

/// `dir/LOG.old`.
#[cfg(test)]
pub fn old_info_log_file_name(dir: &Path) -> PathBuf {
    dir.join(OLD_INFO_LOG_NAME)
}

/// Parses a non-empty string of ASCII digits (no sign, no spaces) that fits
/// in a `u64`.
fn parse_number(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Classifies a file name (not a path) found in a database directory.
/// Returns the type and number (0 for unnumbered files), or `None` for a
/// name Strata does not write.
pub fn parse_file_name(name: &str) -> Option<(FileType, u64)> {
    match name {
        CURRENT_NAME => return Some((FileType::Current, 0)),
        LOCK_NAME => return Some((FileType::Lock, 0)),
        INFO_LOG_NAME | OLD_INFO_LOG_NAME => return Some((FileType::InfoLog, 0)),
        OPTIONS_NAME => return Some((FileType::Options, 0)),
        OPTIONS_TEMP_NAME => return Some((FileType::Temp, 0)),
        _ => {}
    }
    if let Some(digits) = name.strip_prefix(MANIFEST_PREFIX) {
        return Some((FileType::Manifest, parse_number(digits)?));
    }
    let (digits, suffix) = name.split_at(name.find('.')?);
    let file_type = match suffix {
        LOG_SUFFIX => FileType::Log,
        TABLE_SUFFIX => FileType::Table,
        TEMP_SUFFIX => FileType::Temp,
        _ => return None,
    };
    Some((file_type, parse_number(digits)?))
}

/// Points CURRENT at `MANIFEST-<manifest_number>`: writes
/// `"MANIFEST-NNNNNN\n"` to `NNNNNN.dbtmp`, syncs it, renames it over
/// CURRENT and syncs the directory. A crash at any point leaves CURRENT
/// naming either the old or the new manifest. On failure the temporary
/// file is removed (best effort).
pub fn set_current_file(fs: &dyn FileSystem, dir: &Path, manifest_number: u64) -> Result<()> {
    let tmp = temp_file_name(dir, manifest_number);
    let contents = format!("{MANIFEST_PREFIX}{manifest_number:06}\n");
    let result = write_and_rename(fs, &tmp, &current_file_name(dir), contents.as_bytes());
    if result.is_err() {
        // The original error is what matters; the file may not even exist.
        let _ = fs.remove(&tmp);
        return result;
    }
    fs.sync_dir(dir)
}

fn write_and_rename(fs: &dyn FileSystem, tmp: &Path, to: &Path, data: &[u8]) -> Result<()> {
    let mut file = fs.create(tmp)?;
    file.append(data)?;
    file.sync()?;
    drop(file);
    fs.rename(tmp, to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{read_file_to_vec, MemFileSystem};

    #[test]
    fn names() {
        let dir = Path::new("/db");
        assert_eq!(log_file_name(dir, 12), Path::new("/db/000012.log"));
        assert_eq!(table_file_name(dir, 12), Path::new("/db/000012.sst"));
        assert_eq!(
            manifest_file_name(dir, 12),
            Path::new("/db/MANIFEST-000012")
        );
        assert_eq!(temp_file_name(dir, 12), Path::new("/db/000012.dbtmp"));
        assert_eq!(current_file_name(dir), Path::new("/db/CURRENT"));
        assert_eq!(lock_file_name(dir), Path::new("/db/LOCK"));
        assert_eq!(info_log_file_name(dir), Path::new("/db/LOG"));
        assert_eq!(old_info_log_file_name(dir), Path::new("/db/LOG.old"));
        // Wider numbers are not truncated.
        assert_eq!(
            table_file_name(dir, 12345678),
            Path::new("/db/12345678.sst")
        );
    }

    #[test]
    fn parse_round_trips() {
        let dir = Path::new("/db");
        for n in [0, 1, 12, 999_999, 1_000_000, u64::MAX] {
            let cases = [
                (log_file_name(dir, n), FileType::Log),
                (table_file_name(dir, n), FileType::Table),
                (manifest_file_name(dir, n), FileType::Manifest),
                (temp_file_name(dir, n), FileType::Temp),
            ];
            for (path, t) in cases {
                let name = path.file_name().unwrap().to_str().unwrap();
                assert_eq!(parse_file_name(name), Some((t, n)), "{name}");
            }
        }
        assert_eq!(parse_file_name("CURRENT"), Some((FileType::Current, 0)));
        assert_eq!(parse_file_name("LOCK"), Some((FileType::Lock, 0)));
        assert_eq!(parse_file_name("LOG"), Some((FileType::InfoLog, 0)));
        assert_eq!(parse_file_name("LOG.old"), Some((FileType::InfoLog, 0)));
        assert_eq!(parse_file_name("7.log"), Some((FileType::Log, 7)));
    }

    #[test]
    fn parse_is_strict() {
        for name in [
            "",
            ".log",
            "x.log",
            "+12.log",
            "-12.log",
            " 12.log",
            "12 .log",
            "12.log.old",
            "12.LOG",
            "12.sst~",
            "12",
            "12.",
            "1.2.sst",
            "MANIFEST-",
            "MANIFEST-12a",
            "MANIFEST-+12",
            "MANIFEST--12",
            "manifest-000001",
            "CURRENT.dbtmp",
            "CURRENTX",
            "LOCK2",
            "LOG.older",
            "99999999999999999999.log", // overflows u64
            "٣.log",                    // a non-ASCII digit
        ] {
            assert_eq!(parse_file_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn set_current_file_replaces_current_and_leaves_no_temp() {
        let fs = MemFileSystem::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        set_current_file(&fs, dir, 1).unwrap();
        assert_eq!(
            read_file_to_vec(&fs, &current_file_name(dir)).unwrap(),
            b"MANIFEST-000001\n"
        );
        set_current_file(&fs, dir, 1234567).unwrap();
        assert_eq!(
            read_file_to_vec(&fs, &current_file_name(dir)).unwrap(),
            b"MANIFEST-1234567\n"
        );
        let mut names = fs.list(dir).unwrap();
        names.sort();
        assert_eq!(names, ["CURRENT"]);
    }
}
