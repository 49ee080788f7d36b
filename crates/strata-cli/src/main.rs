//! `strata`: read, write and inspect a Strata database and its files.
//!
//! Exit status: 0 done; 1 the answer is "no" (`get` of an absent key,
//! `verify` or `sst verify` found damage); 2 bad usage; 3 an error (the
//! database cannot be opened, is locked by another process, a file is
//! unreadable).

mod commands;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use strata_cli::codec::Codec;

/// Read, write and inspect a Strata database.
///
/// Keys and values are text unless --hex or --base64 says how they are
/// written; output uses the same encoding.
#[derive(Debug, Parser)]
#[command(
    name = "strata",
    version,
    about,
    long_about = None,
    after_help = "Exit status: 0 done; 1 no (get: the key is absent; verify: damage found); \
                  2 bad usage; 3 error (cannot open the database, locked by another process, \
                  unreadable file).\n\nExample: strata --db /tmp/db --hex scan --limit 10"
)]
pub struct Cli {
    /// The database directory (every command but `sst`).
    #[arg(long, global = true, value_name = "PATH")]
    db: Option<PathBuf>,
    /// Keys and values are hex (output too).
    #[arg(long, global = true, conflicts_with = "base64")]
    hex: bool,
    /// Keys and values are base64 (output too).
    #[arg(long, global = true)]
    base64: bool,
    /// Create the database if it does not exist (otherwise a path that
    /// holds no database is an error).
    #[arg(long, global = true)]
    create: bool,
    /// Open with the options in this TOML file (keys: the rocksdb crate's
    /// setter names without `set_`). Default: the database's own OPTIONS
    /// file, written at its last open, if it has one.
    #[arg(long, global = true, value_name = "FILE")]
    options_file: Option<PathBuf>,
    /// The column family get, put, delete, scan, dump, load, levels, stats
    /// and compact work on (default: the default family). Every family on
    /// record is opened, each with the database's options.
    #[arg(long, global = true, value_name = "NAME")]
    cf: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the value of KEY (exit 1 if absent).
    #[command(after_help = "Example: strata --db /tmp/db get user:42")]
    Get { key: String },
    /// Set KEY to VALUE.
    #[command(after_help = "Example: strata --db /tmp/db put user:42 alice")]
    Put { key: String, value: String },
    /// Delete KEY.
    #[command(after_help = "Example: strata --db /tmp/db delete user:42")]
    Delete { key: String },
    /// Print `key value` lines, in key order.
    #[command(after_help = "Example: strata --db /tmp/db scan --from user: --to user; --limit 10")]
    Scan(ScanArgs),
    /// Write every entry to FILE ('-': standard output), a line each:
    /// the key in hex, a space, the value in hex.
    #[command(after_help = "Example: strata --db /tmp/db dump /tmp/db.txt")]
    Dump { file: String },
    /// Put every line of FILE ('-': standard input), in `dump`'s format.
    #[command(after_help = "Example: strata --db /tmp/copy load /tmp/db.txt")]
    Load { file: String },
    /// The names of the database's column families, a line each.
    #[command(name = "list-cf", after_help = "Example: strata --db /tmp/db list-cf")]
    ListCf,
    /// Table files per level: count, bytes, and each file's key range.
    #[command(after_help = "Example: strata --db /tmp/db levels")]
    Levels,
    /// The compaction statistics table.
    #[command(after_help = "Example: strata --db /tmp/db stats")]
    Stats,
    /// Read every live table file whole and check every checksum; exit 1
    /// and list the damaged files if any.
    #[command(after_help = "Example: strata --db /tmp/db verify")]
    Verify,
    /// Compact the whole key range, or [--from, --to].
    #[command(after_help = "Example: strata --db /tmp/db compact --from a --to m")]
    Compact {
        #[arg(long)]
        from: Option<String>,
        #[arg(long)]
        to: Option<String>,
    },
    /// Write a checkpoint of the database into the new directory PATH: an
    /// openable copy, table files hard-linked. Opens the database for
    /// writing (its memtable is flushed first), so not while another
    /// process holds it; that process can make one with
    /// `strata_kv::checkpoint::Checkpoint`.
    #[command(after_help = "Example: strata --db /tmp/db checkpoint /tmp/db-copy")]
    Checkpoint { path: std::path::PathBuf },
    /// Every version edit of the database's manifest (reads only the
    /// files, so it works on a database another process holds).
    #[command(after_help = "Example: strata --db /tmp/db manifest")]
    Manifest,
    /// Serve a read-only dashboard of the database (levels drawn as boxes,
    /// a page per table file, compaction statistics, JSON at
    /// /api/state.json), refreshing itself; until interrupted.
    #[command(after_help = "Example: strata --db /tmp/db web --addr 127.0.0.1:8080")]
    Web {
        /// Address to listen on; loopback unless told otherwise.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: String,
    },
    /// Look inside a write-ahead log file (no database needed).
    #[command(subcommand)]
    Wal(WalCommand),
    /// Look inside one table file (no database needed).
    #[command(subcommand)]
    Sst(SstCommand),
}

#[derive(Debug, Subcommand)]
pub enum WalCommand {
    /// Every record: offset, sequence number, and each put or delete.
    #[command(after_help = "Example: strata --hex wal dump /tmp/db/000007.log")]
    Dump { file: PathBuf },
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// First key (inclusive).
    #[arg(long)]
    from: Option<String>,
    /// Last key (exclusive).
    #[arg(long)]
    to: Option<String>,
    /// At most this many entries.
    #[arg(long)]
    limit: Option<usize>,
    /// Largest key first.
    #[arg(long)]
    reverse: bool,
}

#[derive(Debug, Subcommand)]
pub enum SstCommand {
    /// Every block (or packed section): kind, offset, size, compression,
    /// checksum, hash index use.
    #[command(after_help = "Example: strata sst dump /tmp/db/000012.sst")]
    Dump { file: PathBuf },
    /// Every entry: key, sequence number, kind, value.
    #[command(after_help = "Example: strata --hex sst scan /tmp/db/000012.sst")]
    Scan { file: PathBuf },
    /// The table's properties.
    #[command(after_help = "Example: strata sst props /tmp/db/000012.sst")]
    Props { file: PathBuf },
    /// Check every checksum and entry; exit 1 if damaged.
    #[command(after_help = "Example: strata sst verify /tmp/db/000012.sst")]
    Verify { file: PathBuf },
}

impl Cli {
    fn codec(&self) -> Codec {
        if self.hex {
            Codec::Hex
        } else if self.base64 {
            Codec::Base64
        } else {
            Codec::Text
        }
    }
}

/// How a command ended, for the exit status.
#[derive(Debug)]
pub enum Outcome {
    Done,
    No,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match commands::run(&cli) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::No) => ExitCode::from(1),
        Err(commands::Failure::Usage(msg)) => {
            eprintln!("strata: {msg}");
            ExitCode::from(2)
        }
        Err(commands::Failure::Error(msg)) => {
            eprintln!("strata: {msg}");
            ExitCode::from(3)
        }
        Err(commands::Failure::Closed) => ExitCode::SUCCESS,
    }
}
