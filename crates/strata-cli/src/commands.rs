//! What each subcommand does.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use strata::env::{FileSystem, PosixFileSystem};
use strata::key::{parse_internal_key, ValueKind};
use strata::{
    BytewiseComparator, ColumnFamily, ColumnFamilyDescriptor, Comparator, IteratorMode, Options,
    ReadOptions, WriteBatch, DB,
};

use crate::{Cli, Command, Outcome, ScanArgs, SstCommand, WalCommand};
use strata_cli::codec::{hex_decode, hex_encode, Codec};

/// Why a command failed.
#[derive(Debug)]
pub enum Failure {
    /// The command line was wrong (exit 2).
    Usage(String),
    /// The database or a file gave an error (exit 3).
    Error(String),
    /// Standard output was closed (`strata ... | head`): stop quietly.
    Closed,
}

impl From<strata::Error> for Failure {
    fn from(e: strata::Error) -> Failure {
        Failure::Error(e.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        if e.kind() == io::ErrorKind::BrokenPipe {
            Failure::Closed
        } else {
            Failure::Error(e.to_string())
        }
    }
}

type Result<T> = std::result::Result<T, Failure>;

fn usage<T>(msg: impl Into<String>) -> Result<T> {
    Err(Failure::Usage(msg.into()))
}

/// The options to open `dir` with: `--options-file`, else the database's
/// own OPTIONS file, else the defaults; never creating unless `--create`
/// (a mistyped path is an error, not a new database).
fn db_options(cli: &Cli, dir: &Path) -> Result<Options> {
    let own = dir.join("OPTIONS");
    let file = cli
        .options_file
        .clone()
        .or_else(|| own.exists().then_some(own));
    let mut opts = match file {
        Some(f) => Options::from_file(&f)?,
        None => Options::default(),
    };
    opts.create_if_missing(cli.create);
    opts.set_error_if_exists(false);
    Ok(opts)
}

/// The column families on record in `path` (none for a path that holds
/// no database yet).
fn families(opts: &Options, path: &Path) -> Result<Vec<String>> {
    if !path.join("CURRENT").exists() {
        return Ok(Vec::new());
    }
    Ok(DB::list_cf(opts, path)?)
}

fn open_db(cli: &Cli) -> Result<DB> {
    let Some(path) = &cli.db else {
        return usage("this command needs --db PATH");
    };
    let opts = db_options(cli, path)?;
    let names = families(&opts, path)?;
    let descriptors = names
        .iter()
        .map(|n| ColumnFamilyDescriptor::new(n, opts.clone()));
    Ok(DB::open_cf_descriptors(&opts, path, descriptors)?)
}

/// The column family `--cf` names (default: the default family).
fn family<'a>(cli: &Cli, db: &'a DB) -> Result<&'a ColumnFamily> {
    let name = cli.cf.as_deref().unwrap_or("default");
    match db.cf_handle(name) {
        Some(cf) => Ok(cf),
        None => usage(format!(
            "no column family {name:?} in the database (list-cf names them)"
        )),
    }
}

/// Opens for reading only: no lock, nothing written, so a database that
/// another process holds can be read (as it was at this moment).
fn open_db_read_only(cli: &Cli) -> Result<DB> {
    let Some(path) = &cli.db else {
        return usage("this command needs --db PATH");
    };
    let opts = db_options(cli, path)?;
    let names = families(&opts, path)?;
    Ok(DB::open_cf_for_read_only(&opts, path, names, false)?)
}

fn arg(codec: Codec, s: &str) -> Result<Vec<u8>> {
    codec.decode(s).map_err(Failure::Usage)
}

/// Runs the command `cli` names.
pub fn run(cli: &Cli) -> Result<Outcome> {
    let codec = cli.codec();
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let outcome = match &cli.command {
        Command::Get { key } => {
            let db = open_db_read_only(cli)?;
            match db.get_cf(family(cli, &db)?, arg(codec, key)?)? {
                Some(v) => {
                    out.write_all(&codec.encode(&v))?;
                    out.write_all(b"\n")?;
                    Outcome::Done
                }
                None => {
                    eprintln!("strata: not found");
                    Outcome::No
                }
            }
        }
        Command::Put { key, value } => {
            let db = open_db(cli)?;
            db.put_cf(family(cli, &db)?, arg(codec, key)?, arg(codec, value)?)?;
            Outcome::Done
        }
        Command::Delete { key } => {
            let db = open_db(cli)?;
            db.delete_cf(family(cli, &db)?, arg(codec, key)?)?;
            Outcome::Done
        }
        Command::Scan(a) => {
            let db = open_db_read_only(cli)?;
            scan(&db, family(cli, &db)?, a, codec, &mut out)?;
            Outcome::Done
        }
        Command::Dump { file } => {
            let db = open_db_read_only(cli)?;
            let mut sink: Box<dyn Write> = if file == "-" {
                Box::new(&mut out)
            } else {
                Box::new(BufWriter::new(File::create(file)?))
            };
            for item in db.iterator_cf(family(cli, &db)?, IteratorMode::Start) {
                let (k, v) = item?;
                writeln!(sink, "{} {}", hex_encode(&k), hex_encode(&v))?;
            }
            sink.flush()?;
            Outcome::Done
        }
        Command::Load { file } => {
            let db = open_db(cli)?;
            let input: Box<dyn BufRead> = if file == "-" {
                Box::new(BufReader::new(io::stdin()))
            } else {
                Box::new(BufReader::new(File::open(file)?))
            };
            load(&db, family(cli, &db)?, input)?;
            Outcome::Done
        }
        Command::ListCf => {
            let Some(path) = &cli.db else {
                return usage("list-cf needs --db PATH");
            };
            for name in DB::list_cf(&db_options(cli, path)?, path)? {
                writeln!(out, "{name}")?;
            }
            Outcome::Done
        }
        Command::Levels => {
            let db = open_db_read_only(cli)?;
            levels(&db, family(cli, &db)?, codec, &mut out)?;
            Outcome::Done
        }
        Command::Stats => {
            let db = open_db_read_only(cli)?;
            let stats = db
                .property_value_cf(family(cli, &db)?, "rocksdb.stats")?
                .unwrap_or_default();
            out.write_all(stats.as_bytes())?;
            if !stats.ends_with('\n') {
                out.write_all(b"\n")?;
            }
            Outcome::Done
        }
        Command::Verify => {
            let db = open_db_read_only(cli)?;
            let checks = db.verify_table_files();
            let mut damaged = 0;
            for c in &checks {
                match &c.result {
                    Ok(n) => writeln!(out, "ok       L{} {} ({n} entries)", c.level, c.name)?,
                    Err(e) => {
                        damaged += 1;
                        writeln!(out, "DAMAGED  L{} {}: {e}", c.level, c.name)?;
                    }
                }
            }
            writeln!(out, "{} table files, {damaged} damaged", checks.len())?;
            if damaged > 0 {
                Outcome::No
            } else {
                Outcome::Done
            }
        }
        Command::Compact { from, to } => {
            let db = open_db(cli)?;
            let from = from.as_deref().map(|k| arg(codec, k)).transpose()?;
            let to = to.as_deref().map(|k| arg(codec, k)).transpose()?;
            db.compact_range_cf(family(cli, &db)?, from, to)?;
            Outcome::Done
        }
        Command::Checkpoint { path } => {
            let db = open_db(cli)?;
            strata::checkpoint::Checkpoint::new(&db)?.create_checkpoint(path)?;
            writeln!(out, "checkpoint written to {}", path.display())?;
            Outcome::Done
        }
        Command::Manifest => {
            let Some(dir) = &cli.db else {
                return usage("manifest needs --db PATH");
            };
            let fs = PosixFileSystem::new();
            let path = strata::dump::current_manifest(&fs, dir)?;
            writeln!(out, "{}", path.display())?;
            for r in strata::dump::manifest_records(&fs, &path)? {
                write!(out, "@{}:", r.offset)?;
                if r.column_family != 0 {
                    write!(out, " column_family={}", r.column_family)?;
                }
                if let Some(name) = &r.column_family_add {
                    write!(out, " add_column_family={name:?}")?;
                }
                if r.column_family_drop {
                    write!(out, " drop_column_family")?;
                }
                if let Some(c) = &r.comparator {
                    write!(out, " comparator={c}")?;
                }
                if let Some(n) = r.log_number {
                    write!(out, " log_number={n}")?;
                }
                if let Some(n) = r.next_file_number {
                    write!(out, " next_file_number={n}")?;
                }
                if let Some(n) = r.last_sequence {
                    write!(out, " last_sequence={n}")?;
                }
                writeln!(out)?;
                for (level, number) in &r.deleted {
                    writeln!(out, "  delete L{level} #{number}")?;
                }
                for f in &r.added {
                    write!(out, "  add L{} #{} {} bytes [", f.level, f.number, f.size)?;
                    out.write_all(&codec.encode(&f.smallest.0))?;
                    write!(out, " @{} .. ", f.smallest.1)?;
                    out.write_all(&codec.encode(&f.largest.0))?;
                    writeln!(out, " @{}]", f.largest.1)?;
                }
            }
            Outcome::Done
        }
        Command::Web { addr } => {
            let db = std::sync::Arc::new(open_db_read_only(cli)?);
            let view = strata_cli::web::serve(db, addr)?;
            writeln!(out, "serving http://{}/", view.addr())?;
            out.flush()?;
            view.wait();
            Outcome::Done
        }
        Command::Wal(WalCommand::Dump { file }) => {
            let fs = PosixFileSystem::new();
            if let Some(p) = strata::dump::wal_predecessor(&fs, file)? {
                writeln!(
                    out,
                    "follows log #{}, {} bytes when this one was started",
                    p.number, p.size
                )?;
            }
            for r in strata::dump::wal_records(&fs, file)? {
                writeln!(
                    out,
                    "@{}: sequence {}, {} entries",
                    r.offset,
                    r.sequence,
                    r.entries.len()
                )?;
                for e in &r.entries {
                    match e {
                        strata::dump::WalEntry::Put(k, v) => {
                            out.write_all(b"  put ")?;
                            out.write_all(&codec.encode(k))?;
                            out.write_all(b" ")?;
                            out.write_all(&codec.encode(v))?;
                        }
                        strata::dump::WalEntry::Delete(k) => {
                            out.write_all(b"  delete ")?;
                            out.write_all(&codec.encode(k))?;
                        }
                        strata::dump::WalEntry::Merge(k, v) => {
                            out.write_all(b"  merge ")?;
                            out.write_all(&codec.encode(k))?;
                            out.write_all(b" ")?;
                            out.write_all(&codec.encode(v))?;
                        }
                        strata::dump::WalEntry::DeleteRange(from, to) => {
                            out.write_all(b"  delete_range ")?;
                            out.write_all(&codec.encode(from))?;
                            out.write_all(b" ")?;
                            out.write_all(&codec.encode(to))?;
                        }
                    }
                    out.write_all(b"\n")?;
                }
            }
            Outcome::Done
        }
        Command::Sst(sst) => self::sst(sst, codec, &mut out)?,
    };
    out.flush()?;
    Ok(outcome)
}

fn scan(
    db: &DB,
    cf: &ColumnFamily,
    a: &ScanArgs,
    codec: Codec,
    out: &mut impl Write,
) -> Result<()> {
    let from = a.from.as_deref().map(|k| arg(codec, k)).transpose()?;
    let to = a.to.as_deref().map(|k| arg(codec, k)).transpose()?;
    let mut ro = ReadOptions::default();
    if let Some(f) = &from {
        ro.set_iterate_lower_bound(f.clone());
    }
    if let Some(t) = &to {
        ro.set_iterate_upper_bound(t.clone());
    }
    let mode = if a.reverse {
        IteratorMode::End
    } else {
        IteratorMode::Start
    };
    for item in db
        .iterator_cf_opt(cf, ro, mode)
        .take(a.limit.unwrap_or(usize::MAX))
    {
        let (k, v) = item?;
        out.write_all(&codec.encode(&k))?;
        out.write_all(b" ")?;
        out.write_all(&codec.encode(&v))?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// Puts `dump`'s lines, a batch per 1,000.
fn load(db: &DB, cf: &ColumnFamily, input: Box<dyn BufRead>) -> Result<()> {
    let mut batch = WriteBatch::default();
    for (i, line) in input.lines().enumerate() {
        let line = line?;
        if line.is_empty() {
            continue;
        }
        let bad = |why: String| Failure::Usage(format!("line {}: {why}", i + 1));
        let (k, v) = line
            .split_once(' ')
            .ok_or_else(|| bad("expected `HEXKEY HEXVALUE`".into()))?;
        batch.put_cf(cf, hex_decode(k).map_err(bad)?, hex_decode(v).map_err(bad)?);
        if batch.len() >= 1000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    if !batch.is_empty() {
        db.write(batch)?;
    }
    Ok(())
}

fn levels(db: &DB, cf: &ColumnFamily, codec: Codec, out: &mut impl Write) -> Result<()> {
    let files: Vec<_> = db
        .live_files()?
        .into_iter()
        .filter(|f| f.column_family_name == cf.name())
        .collect();
    let max_level = files.iter().map(|f| f.level).max().unwrap_or(0);
    writeln!(out, "level  files        bytes")?;
    for level in 0..=max_level {
        let in_level: Vec<_> = files.iter().filter(|f| f.level == level).collect();
        let bytes: usize = in_level.iter().map(|f| f.size).sum();
        writeln!(out, "{level:>5} {:>6} {bytes:>12}", in_level.len())?;
    }
    for f in &files {
        write!(
            out,
            "L{} {} {} bytes, {} entries, [",
            f.level, f.name, f.size, f.num_entries
        )?;
        out.write_all(&codec.encode(f.start_key.as_deref().unwrap_or_default()))?;
        out.write_all(b" .. ")?;
        out.write_all(&codec.encode(f.end_key.as_deref().unwrap_or_default()))?;
        out.write_all(b"]\n")?;
    }
    Ok(())
}

fn open_file(path: &Path) -> Result<Arc<dyn strata::env::RandomAccessFile>> {
    Ok(PosixFileSystem::new().open_random_access(path)?)
}

fn sst(cmd: &SstCommand, codec: Codec, out: &mut impl Write) -> Result<Outcome> {
    let cmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
    match cmd {
        SstCommand::Dump { file } => {
            let name = file.display().to_string();
            let layout = strata::sst::describe_table(open_file(file)?, &name, cmp)?;
            writeln!(out, "{name}: {} table", layout.format)?;
            writeln!(
                out,
                "kind         offset       size  compression  checksum  hash-index"
            )?;
            for p in &layout.parts {
                let hash = match p.hash_index {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                };
                writeln!(
                    out,
                    "{:<12} {:>6} {:>10}  {:<11}  {:<8}  {hash}",
                    p.kind,
                    p.offset,
                    p.size,
                    p.compression,
                    if p.checksum_ok { "ok" } else { "BAD" },
                )?;
            }
            let bad = layout.parts.iter().filter(|p| !p.checksum_ok).count();
            writeln!(
                out,
                "{} parts, {bad} with a bad checksum",
                layout.parts.len()
            )?;
            Ok(if bad > 0 { Outcome::No } else { Outcome::Done })
        }
        SstCommand::Scan { file } => {
            let name = file.display().to_string();
            let mut it = strata::sst::table_entries(open_file(file)?, &name, cmp.clone())?;
            it.seek_to_first();
            while it.valid() {
                let p = parse_internal_key(it.key())
                    .ok_or_else(|| Failure::Error(format!("{name}: malformed internal key")))?;
                out.write_all(&codec.encode(p.user_key))?;
                let kind = match p.kind {
                    ValueKind::Value => "value",
                    ValueKind::Deletion => "deletion",
                    ValueKind::Merge => "merge",
                    ValueKind::RangeDeletion => "range deletion",
                };
                write!(out, " @ {} {kind} => ", p.sequence)?;
                out.write_all(&codec.encode(it.value()))?;
                out.write_all(b"\n")?;
                it.next();
            }
            it.status()?;
            // Then the range-deletion block: start @ seq range deletion => end.
            for d in strata::sst::table_range_deletions(open_file(file)?, &name, cmp)? {
                out.write_all(&codec.encode(&d.start))?;
                write!(out, " @ {} range deletion => ", d.sequence)?;
                out.write_all(&codec.encode(&d.end))?;
                out.write_all(b"\n")?;
            }
            Ok(Outcome::Done)
        }
        SstCommand::Props { file } => {
            let name = file.display().to_string();
            let layout = strata::sst::describe_table(open_file(file)?, &name, cmp)?;
            writeln!(out, "format: {}", layout.format)?;
            writeln!(out, "{:#?}", layout.properties)?;
            Ok(Outcome::Done)
        }
        SstCommand::Verify { file } => {
            let name = file.display().to_string();
            match strata::sst::verify_table(open_file(file)?, &name, cmp) {
                Ok(n) => {
                    writeln!(out, "ok: {n} entries")?;
                    Ok(Outcome::Done)
                }
                Err(e @ strata::Error::Corruption { .. }) => {
                    writeln!(out, "DAMAGED: {e}")?;
                    Ok(Outcome::No)
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}
