//! Opening a database: checks, lock, manifest recovery, log replay.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::key::InternalKeyComparator;
use crate::memtable::{MemTable, SpareBlocks};
use crate::version::{
    VersionEdit, VersionSet, DEFAULT_COLUMN_FAMILY_ID, DEFAULT_COLUMN_FAMILY_NAME,
};
use crate::wal::{LogReader, LogWriter, WalRecoveryMode};

use super::column_family::ColumnFamilyDescriptor;
use super::filename::{
    current_file_name, lock_file_name, log_file_name, parse_file_name, table_file_name, FileType,
};
use super::inner::{CfState, DbInner, DbShared, DbState, ReadView};
use super::options::Options;
use super::table_cache::TableCache;
use super::write::insert_into;
use super::write_batch::{BatchRecord, WriteBatch};

/// Block cache used when the options name none: 32 MiB, as RocksDB.
const DEFAULT_BLOCK_CACHE_BYTES: usize = 32 << 20;

/// The column families an open asks for: `descriptors`, with the default
/// family added (with the database's options) if missing. Names must be
/// distinct.
fn families(
    opts: &Options,
    descriptors: &[ColumnFamilyDescriptor],
) -> Result<Vec<(String, Options)>> {
    let mut out: Vec<(String, Options)> = Vec::with_capacity(descriptors.len() + 1);
    if !descriptors
        .iter()
        .any(|d| d.name == DEFAULT_COLUMN_FAMILY_NAME)
    {
        out.push((DEFAULT_COLUMN_FAMILY_NAME.to_owned(), opts.clone()));
    }
    for d in descriptors {
        if out.iter().any(|(n, _)| *n == d.name) {
            return Err(Error::invalid_argument(format!(
                "column family {:?} is named twice",
                d.name
            )));
        }
        super::column_family::check_name(&d.name)?;
        let cf_opts = d.options.for_column_family(opts);
        cf_opts.validate()?;
        out.push((d.name.clone(), cf_opts));
    }
    // The default family first.
    out.sort_by_key(|(n, _)| n != DEFAULT_COLUMN_FAMILY_NAME);
    Ok(out)
}

/// Opens (or creates) the database in `dir` with the column families
/// `descriptors` (the default one is always opened) and starts its
/// background threads. Returns the families' handles, default first, then
/// in the order given.
pub(crate) fn open(
    opts: &Options,
    dir: &Path,
    descriptors: &[ColumnFamilyDescriptor],
) -> Result<Vec<Arc<DbInner>>> {
    let opts = &opts.sanitized();
    opts.validate()?;
    let wanted = families(opts, descriptors)?;
    let fs = opts.fs.clone();
    let shown = dir.display();
    if fs.exists(dir) && !fs.is_dir(dir) {
        return Err(Error::invalid_argument(format!(
            "{shown} exists and is not a directory"
        )));
    }
    let has_db = fs.exists(&current_file_name(dir));
    if !has_db && !opts.create_if_missing {
        return Err(Error::invalid_argument(format!(
            "{shown} holds no database (no CURRENT file) and create_if_missing is false"
        )));
    }
    if has_db && opts.error_if_exists {
        return Err(Error::invalid_argument(format!(
            "{shown} already holds a database and error_if_exists is true"
        )));
    }
    fs.create_dir_all(dir)?;
    let lock = fs.lock(&lock_file_name(dir)).map_err(|e| match e {
        Error::Busy(what) => Error::Busy(format!(
            "database {shown} is already open (LOCK is held): {what}"
        )),
        e => e,
    })?;
    // Another process may have made the database between the first look
    // and the lock: what the directory holds is decided under the lock.
    let has_db = has_db || fs.exists(&current_file_name(dir));
    if has_db && opts.error_if_exists {
        return Err(Error::invalid_argument(format!(
            "{shown} already holds a database and error_if_exists is true"
        )));
    }
    if !has_db {
        refuse_orphaned_data(fs.as_ref(), dir)?;
    }
    check_direct_io(fs.as_ref(), dir, opts)?;
    let opened: Vec<(String, InternalKeyComparator)> = wanted
        .iter()
        .map(|(n, o)| (n.clone(), InternalKeyComparator::new(o.comparator.clone())))
        .collect();
    let create_missing = opts.create_missing_column_families;
    let versions = if has_db {
        VersionSet::recover_cfs(fs.clone(), dir, &opened, create_missing)?
    } else {
        let new_families: Vec<&str> = wanted.iter().skip(1).map(|(n, _)| n.as_str()).collect();
        if !new_families.is_empty() && !create_missing {
            return Err(crate::version::missing_families(&new_families));
        }
        VersionSet::create_new(fs.clone(), dir, opened[0].1.clone())?
    };
    // The families to create: those asked for that are not on record.
    let missing: Vec<&str> = wanted
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !versions.column_families().values().any(|cf| cf.name == *n))
        .collect();
    check_tables(fs.as_ref(), dir, &versions, opts)?;
    for (&id, cf) in versions.column_families() {
        let cf_opts = &wanted
            .iter()
            .find(|(n, _)| *n == cf.name)
            .expect("opened")
            .1;
        check_merge_operator(&versions, id, cf_opts, dir)?;
    }
    let default = build(opts, dir, versions, &wanted, Some(lock), false);
    let started = start(&default, opts, fs.as_ref(), dir, &wanted, &missing);
    if started.is_err() {
        default.release_families();
    }
    started?;
    Ok(handles_of(&default, &wanted))
}

/// The handles of the families `wanted`, in its order (all are open).
fn handles_of(default: &DbInner, wanted: &[(String, Options)]) -> Vec<Arc<DbInner>> {
    let st = default.state.lock();
    wanted
        .iter()
        .map(|(name, _)| {
            st.cfs
                .values()
                .find(|c| c.handle.name == *name)
                .expect("every wanted family is open")
                .handle
                .clone()
        })
        .collect()
}

/// Replays the logs, creates the missing families, writes the options
/// file and starts the background threads of a database `build` made.
fn start(
    default: &Arc<DbInner>,
    opts: &Options,
    fs: &dyn crate::env::FileSystem,
    dir: &Path,
    wanted: &[(String, Options)],
    missing: &[&str],
) -> Result<()> {
    default.recover_logs()?;
    for name in missing {
        let cf_opts = &wanted.iter().find(|(n, _)| n == name).expect("wanted").1;
        default.create_column_family(name, cf_opts)?;
    }
    // What the database runs with, for tools and people (RocksDB's OPTIONS
    // file); written through a temporary file and a rename.
    crate::env::write_file_atomic(
        fs,
        &super::filename::options_file_name(dir),
        opts.to_toml().as_bytes(),
    )?;
    for _ in 0..opts.max_background_jobs {
        let db = default.clone();
        let handle = std::thread::Builder::new()
            .name("strata-bg".into())
            .spawn(move || db.background_loop())
            .map_err(|e| Error::io("spawning a background thread", e))?;
        default.threads.lock().push(handle);
    }
    default.bg_work.notify_all();
    Ok(())
}

/// A family that ran with a merge operator opens for writing only with
/// that operator or none: operands written under two names would leave
/// tables no single operator can read. (Without one, no operand can be
/// written, and reads of old operands fail with a clear error.)
fn check_merge_operator(versions: &VersionSet, id: u32, opts: &Options, dir: &Path) -> Result<()> {
    let recorded = versions.merge_operator(id).filter(|r| !r.is_empty());
    match (recorded, &opts.merge_operator) {
        (Some(r), Some(op)) if r != op.name() => Err(Error::invalid_argument(format!(
            "{}{} ran with merge operator {r:?}; it cannot be opened for writing with {:?}",
            dir.display(),
            match versions.column_families().get(&id) {
                Some(cf) if id != DEFAULT_COLUMN_FAMILY_ID =>
                    format!(" (column family {:?})", cf.name),
                _ => String::new(),
            },
            op.name()
        ))),
        _ => Ok(()),
    }
}

/// With direct I/O asked for, checks that the directory's file system
/// takes it, before anything is written: a scratch file is written and
/// read back with `O_DIRECT` (a partial block, so the padded write, the
/// cut back and the aligned read all run) and removed. The open then fails
/// with `NotSupported` (or the I/O error) rather than the first flush or
/// table read.
fn check_direct_io(fs: &dyn crate::env::FileSystem, dir: &Path, opts: &Options) -> Result<()> {
    if !(opts.use_direct_reads || opts.use_direct_io_for_flush_and_compaction) {
        return Ok(());
    }
    // A temporary file's name: one a crash leaves behind is deleted by the
    // next obsolete-file pass, and by `DB::destroy`.
    let probe = super::filename::temp_file_name(dir, 0);
    let result = (|| {
        let data: Vec<u8> = (0..100u8).collect();
        let mut file = fs.create_direct(&probe)?;
        file.append(&data)?;
        file.sync()?;
        drop(file);
        let mut back = vec![0u8; data.len()];
        fs.open_random_access_direct(&probe)?
            .read_exact_at(0, &mut back)?;
        if back != data {
            return Err(Error::NotSupported(format!(
                "{}: a direct write and read gave other bytes back",
                probe.display()
            )));
        }
        Ok(())
    })();
    let _ = fs.remove(&probe);
    result
}

/// Checks that every table the manifest names exists (and, unless told
/// otherwise, has the size it records).
fn check_tables(
    fs: &dyn crate::env::FileSystem,
    dir: &Path,
    versions: &VersionSet,
    opts: &Options,
) -> Result<()> {
    if !opts.paranoid_checks {
        return Ok(());
    }
    for &id in versions.column_families().keys() {
        for f in versions.current_cf(id).all_files() {
            let path = table_file_name(dir, f.number);
            if !fs.exists(&path) {
                return Err(Error::corruption(
                    path.display().to_string(),
                    0,
                    "table file named by the manifest is missing",
                ));
            }
            if opts.skip_checking_sst_file_sizes_on_db_open {
                continue;
            }
            // As RocksDB by default: a truncated (or grown) table is found
            // at open, with both sizes, not at the first read that reaches it.
            let size = fs.file_size(&path)?;
            super::table_cache::check_table_size(&path.display().to_string(), size, f.file_size)?;
        }
    }
    Ok(())
}

/// The block cache of a family whose options name none: 32 MiB, as
/// RocksDB, shared by every such family of the database.
fn block_cache_for(opts: &Options, shared_default: &Arc<BlockCache>) -> Option<Arc<BlockCache>> {
    match (&opts.table.cache, opts.table.no_block_cache) {
        (_, true) => None,
        (Some(c), false) => Some(c.inner.clone()),
        (None, false) => Some(shared_default.clone()),
    }
}

/// Column family `id`'s handle over `shared`.
pub(crate) fn make_cf(shared: &Arc<DbShared>, id: u32, name: &str, opts: &Options) -> DbInner {
    let ucmp = opts.comparator.clone();
    let icmp = InternalKeyComparator::new(ucmp.clone());
    let table_cache = TableCache::new(
        shared.dir.clone(),
        shared.fs.clone(),
        ucmp.clone(),
        block_cache_for(opts, &shared.default_block_cache),
        opts.max_open_files,
    )
    .with_index_and_filter_placement(
        opts.table.cache_index_and_filter_blocks,
        opts.table.pin_l0_filter_and_index_blocks_in_cache,
    )
    .with_prefix_extractor(opts.prefix_extractor.clone())
    .with_direct_reads(
        opts.use_direct_reads,
        opts.table.cache_compressed_under_direct_reads,
    )
    .with_merge_operator(opts.merge_operator.as_ref().map(|m| m.name().to_string()))
    .with_packed_lazy_checksums(opts.packed.as_ref().is_some_and(|p| p.lazy_checksums));
    shared.spare_blocks.keep_up_to(opts.write_buffer_size);
    DbInner {
        shared: shared.clone(),
        id,
        name: name.to_owned(),
        opts: opts.clone(),
        icmp: icmp.clone(),
        user_cmp: ucmp,
        table_cache,
        read_view: ArcSwap::from_pointee(ReadView {
            mem: Arc::new(MemTable::with_spare(
                icmp.clone(),
                opts.write_buffer_size,
                Some(shared.spare_blocks.clone()),
            )),
            imm: Vec::new(),
            version: Arc::new(crate::version::Version::empty()),
        }),
        dropped: AtomicBool::new(false),
    }
}

/// The database state over `versions`, before any log is replayed: the
/// default family's handle (every family on record has its state).
fn build(
    opts: &Options,
    dir: &Path,
    versions: VersionSet,
    wanted: &[(String, Options)],
    lock: Option<Box<dyn crate::env::FileLock>>,
    read_only: bool,
) -> Arc<DbInner> {
    let fs = opts.fs.clone();
    let sequence = versions.last_sequence();
    let on_record: Vec<(u32, String)> = versions
        .column_families()
        .iter()
        .map(|(&id, cf)| (id, cf.name.clone()))
        .collect();
    let state = DbState {
        cfs: Default::default(),
        log: None,
        log_number: 0,
        versions,
        bg_error: None,
        bg_error_in_log: false,
        auto_resumes: 0,
        auto_resuming: false,
        writers: Default::default(),
        pending_groups: 0,
        last_allocated: 0,
        next_compaction_id: 0,
        pending_outputs: Default::default(),
        snapshots: Default::default(),
        old_versions: Vec::new(),
        user_bytes: 0,
        write_groups: 0,
        group_writers: 0,
        parallel_groups: 0,
        parallel_batches: 0,
        pipelined_groups: 0,
        stalls: Default::default(),
        unpublishable_from: None,
        write_scratch: Default::default(),
        unpersisted_data: false,
        wal_bytes: 0,
        live_logs: Default::default(),
        file_deletions_disabled: 0,
    };
    let shared = Arc::new(DbShared {
        dir: dir.to_owned(),
        db_opts: opts.clone(),
        fs: fs.clone(),
        state: Mutex::new(state),
        default_block_cache: Arc::new(BlockCache::new(DEFAULT_BLOCK_CACHE_BYTES, None)),
        spare_blocks: SpareBlocks::new(opts.write_buffer_size),
        visible_sequence: AtomicU64::new(sequence),
        bg_done: Condvar::new(),
        bg_work: Condvar::new(),
        group_published: Condvar::new(),
        queued_writers: Default::default(),
        writers_in_flight: Default::default(),
        shutting_down: AtomicBool::new(false),
        threads: Mutex::new(Vec::new()),
        _lock: lock,
        read_only,
        point_reads: Default::default(),
        iterator_steps: Default::default(),
        tables_dropped_unread: Default::default(),
        subcompactions: Default::default(),
        read_triggered_compactions: Default::default(),
        read_compaction_quiet: Default::default(),
        closed_logs: Default::default(),
    });
    let mut st = shared.state.lock();
    for (id, name) in on_record {
        let Some((_, cf_opts)) = wanted.iter().find(|(n, _)| *n == name) else {
            continue; // a read-only open of a subset
        };
        let handle = Arc::new(make_cf(&shared, id, &name, cf_opts));
        st.cfs.insert(id, CfState::new(handle.clone(), 0));
        handle.publish_read_view(&st);
    }
    let default = st.cf(DEFAULT_COLUMN_FAMILY_ID).handle.clone();
    drop(st);
    default
}

/// Opens the database in `dir` for reading only: no lock is taken and
/// nothing is written. The manifest is replayed, and the logs it does not
/// cover are replayed into memory (with `error_if_log_file_exist`, a
/// non-empty log is an error instead). Writes, flushes and compactions
/// return `NotSupported`; no background thread runs; no file is deleted.
/// The view is the one at open: what another process writes later is not
/// seen, and tables it deletes meanwhile become unreadable (RocksDB's
/// read-only open behaves the same). Column families on record but not in
/// `descriptors` are not opened.
pub(crate) fn open_read_only(
    opts: &Options,
    dir: &Path,
    descriptors: &[ColumnFamilyDescriptor],
    error_if_log_file_exist: bool,
) -> Result<Vec<Arc<DbInner>>> {
    let opts = &opts.sanitized();
    opts.validate()?;
    let wanted = families(opts, descriptors)?;
    let fs = opts.fs.clone();
    if !fs.exists(&current_file_name(dir)) {
        return Err(Error::invalid_argument(format!(
            "{} holds no database (no CURRENT file)",
            dir.display()
        )));
    }
    let opened: Vec<(String, InternalKeyComparator)> = wanted
        .iter()
        .map(|(n, o)| (n.clone(), InternalKeyComparator::new(o.comparator.clone())))
        .collect();
    let versions = VersionSet::recover_read_only(fs.clone(), dir, &opened)?;
    let missing: Vec<&str> = wanted
        .iter()
        .map(|(n, _)| n.as_str())
        .filter(|n| !versions.column_families().values().any(|cf| cf.name == *n))
        .collect();
    if !missing.is_empty() {
        return Err(Error::invalid_argument(format!(
            "column families not found: {}",
            missing.join(", ")
        )));
    }
    check_tables(fs.as_ref(), dir, &versions, opts)?;
    let default = build(opts, dir, versions, &wanted, None, true);
    if let Err(e) = default.replay_logs_read_only(error_if_log_file_exist) {
        default.release_families();
        return Err(e);
    }
    Ok(handles_of(&default, &wanted))
}

/// A new database is made only where no data of an old one lies: logs or
/// tables without a CURRENT file are what is left of a database whose
/// CURRENT was lost. Replaying those logs into a new database would
/// resurrect writes under a manifest that never knew them, and deleting
/// them would lose data; neither is an open's call to make. (A new
/// database writes CURRENT before its first log or table, so its own
/// crash never leaves them behind.)
fn refuse_orphaned_data(fs: &dyn crate::env::FileSystem, dir: &Path) -> Result<()> {
    let names = fs.list(dir)?;
    let found: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|name| {
            matches!(
                parse_file_name(name),
                Some((FileType::Log | FileType::Table, _))
            )
        })
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    Err(Error::invalid_argument(format!(
        "{} has no CURRENT file but holds {} log or table file(s) ({}): not creating a new database over the data of another; move them away or restore CURRENT",
        dir.display(),
        found.len(),
        super::filename::shown_names(found)
    )))
}

/// The memtables a log replay fills, one per family on record.
struct Recovering {
    /// Family id, its handle, its memtable.
    mems: Vec<(u32, Arc<DbInner>, Arc<MemTable>)>,
    /// The last sequence number replayed (batches must follow it).
    last: Option<u64>,
}

impl DbInner {
    /// The logs some family on record may need, oldest first. With
    /// `mark_used`, every file number in the directory is marked used, so
    /// none is handed out again.
    fn logs_to_replay(&self, st: &mut DbState, mark_used: bool) -> Result<Vec<u64>> {
        let min_log = st.versions.min_log_number();
        let mut logs = Vec::new();
        for name in self.fs.list(&self.dir)? {
            if let Some((kind, number)) = parse_file_name(&name) {
                if mark_used {
                    st.versions.mark_file_number_used(number);
                }
                if kind == FileType::Log && number >= min_log {
                    logs.push(number);
                }
            }
        }
        logs.sort_unstable();
        Ok(logs)
    }

    /// Inserts every batch of log `number` into the memtables of
    /// `rec`: a record of a family goes in only if the family's log number
    /// says its tables do not hold it yet (records of dropped families
    /// are skipped). Raises `max_seq` to the last sequence number
    /// applied; `after` runs after each batch. `replayed` holds the logs
    /// this recovery replayed before, with how much of each was intact.
    ///
    /// Returns how much of the log was intact, or `None` if it must not be
    /// replayed, nor any log after it (see [`Self::predecessor_hole`]).
    fn replay_log(
        &self,
        st: &DbState,
        number: u64,
        replayed: &[(u64, u64)],
        rec: &mut Recovering,
        max_seq: &mut u64,
        mut after: impl FnMut(&mut Recovering) -> Result<()>,
    ) -> Result<Option<u64>> {
        let path = log_file_name(&self.dir, number);
        let name = path.display().to_string();
        let mut reader = LogReader::new(
            self.fs.open_sequential(&path)?,
            name.clone(),
            self.db_opts.wal_recovery_mode,
        );
        let mut record = Vec::new();
        // The predecessor fragment is known once the first read returns.
        let mut first = reader.read_record(&mut record)?;
        if self.predecessor_hole(st, &reader, replayed, &name)? {
            return Ok(None);
        }
        while std::mem::take(&mut first) || reader.read_record(&mut record)? {
            let offset = reader.last_record_offset();
            // Without paranoid checks a record whose checksum holds but
            // whose batch is malformed or out of sequence is skipped, as
            // RocksDB skips it.
            let paranoid = self.db_opts.paranoid_checks;
            let batch = match WriteBatch::from_record(&record, &name, offset) {
                Ok(batch) => batch,
                Err(_) if !paranoid => continue,
                Err(e) => return Err(e),
            };
            let first = batch.sequence();
            // Writers number batches in increasing order; a batch that does
            // not follow those already replayed (a damaged or foreign log
            // whose checksums hold) would collide with them.
            if let Some(last) = rec.last.filter(|&last| first <= last) {
                if !paranoid {
                    continue;
                }
                return Err(Error::corruption(
                    &name,
                    offset,
                    format!(
                        "batch at sequence {first} does not follow sequence {last}, already replayed"
                    ),
                ));
            }
            let applies = |cf: u32| number >= st.versions.cf_log_number(cf);
            if batch.has_merge() {
                for r in batch.iter_cf() {
                    if let Ok((cf, BatchRecord::Merge(..))) = r {
                        if let Some((_, h, _)) = rec.mems.iter().find(|(id, _, _)| *id == cf) {
                            if applies(cf) {
                                let recorded = st.versions.merge_operator(cf);
                                h.check_logged_operands(recorded, &name, offset)?;
                            }
                        }
                    }
                }
            }
            let mems = &rec.mems;
            insert_into(
                |cf| {
                    mems.iter()
                        .find(|(id, _, _)| *id == cf)
                        .filter(|_| applies(cf))
                        .map(|(_, _, m)| &**m)
                },
                &batch,
                first,
                usize::MAX,
                false,
            );
            let last = first + batch.len() as u64 - 1;
            rec.last = Some(last);
            *max_seq = (*max_seq).max(last);
            after(rec)?;
        }
        Ok(Some(reader.valid_end()))
    }

    /// Whether the log `reader` has begun to read follows an older log
    /// that a power loss cut short: the older log is still needed (at or
    /// after the oldest log on record) but less of it was intact than the
    /// newer log records it held when the newer one was started (or it is
    /// gone). A memtable switch does not sync the log it closes, so this
    /// is what a power loss can leave; every write after the cut, in this
    /// log and the ones after it, was unsynced (a synced write syncs the
    /// older logs first), and replaying them after the hole would recover
    /// no prefix of the writes. Tolerating a torn tail or recovering to a
    /// point in time, the replay stops here (true); with absolute
    /// consistency the hole is `Corruption`; skipping corrupted records,
    /// it is skipped (false).
    fn predecessor_hole(
        &self,
        st: &DbState,
        reader: &LogReader,
        replayed: &[(u64, u64)],
        name: &str,
    ) -> Result<bool> {
        let Some(p) = reader.predecessor() else {
            return Ok(false);
        };
        if p.number < st.versions.min_log_number() {
            return Ok(false); // its writes are in tables
        }
        let intact = replayed
            .iter()
            .find(|&&(n, _)| n == p.number)
            .map(|&(_, end)| end);
        if intact.is_some_and(|end| end >= p.size) {
            return Ok(false);
        }
        match self.db_opts.wal_recovery_mode {
            WalRecoveryMode::SkipAnyCorruptedRecords => Ok(false),
            WalRecoveryMode::TolerateCorruptedTailRecords
            | WalRecoveryMode::PointInTimeRecovery => Ok(true),
            WalRecoveryMode::AbsoluteConsistency => Err(Error::corruption(
                name,
                0,
                format!(
                    "the log before this one ({}) held {} bytes when this one was started, but {}",
                    log_file_name(&self.dir, p.number).display(),
                    p.size,
                    match intact {
                        Some(end) => format!("only {end} are intact"),
                        None => "it is missing".to_string(),
                    }
                ),
            )),
        }
    }

    /// Logged merge operands are replayed only under the merge operator
    /// that wrote them: the one on record (a family that never recorded
    /// one takes any), and never without one.
    fn check_logged_operands(&self, recorded: Option<&str>, log: &str, offset: u64) -> Result<()> {
        let configured = self.opts.merge_operator.as_ref().map(|m| m.name());
        let ok = match (configured, recorded) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(c), Some(r)) => c == r,
        };
        if ok {
            return Ok(());
        }
        Err(Error::invalid_argument(format!(
            "{log} (offset {offset}) holds merge operands written with merge operator {}, opened with {}",
            recorded.map_or("(unrecorded)".to_string(), |r| format!("{r:?}")),
            configured.map_or("none (Options::set_merge_operator)".to_string(), |c| format!("{c:?}")),
        )))
    }

    /// Empty memtables for every family of `st`.
    fn recovering(st: &DbState) -> Recovering {
        Recovering {
            mems: st
                .cfs
                .iter()
                .map(|(&id, c)| (id, c.handle.clone(), c.handle.new_memtable()))
                .collect(),
            last: None,
        }
    }

    /// Replays the logs the manifest does not cover into the memtables,
    /// writing nothing (a read-only open).
    pub(crate) fn replay_logs_read_only(&self, error_if_log_file_exist: bool) -> Result<()> {
        let mut st = self.state.lock();
        let logs = self.logs_to_replay(&mut st, false)?;
        let mut max_seq = st.versions.last_sequence();
        let mut rec = Self::recovering(&st);
        let mut replayed = Vec::new();
        for &number in &logs {
            let path = log_file_name(&self.dir, number);
            if error_if_log_file_exist && self.fs.file_size(&path)? > 0 {
                return Err(Error::invalid_argument(format!(
                    "{}: a write-ahead log holds writes not yet in tables, and error_if_log_file_exist is true",
                    path.display()
                )));
            }
            match self.replay_log(&st, number, &replayed, &mut rec, &mut max_seq, |_| Ok(()))? {
                Some(end) => replayed.push((number, end)),
                None => break,
            }
        }
        st.versions.set_last_sequence(max_seq);
        for (id, handle, mem) in rec.mems {
            st.cf_mut(id).mem = mem;
            handle.publish_read_view(&st);
        }
        Ok(())
    }

    /// Replays the logs the manifest does not cover into L0 tables of
    /// their families, then starts a fresh log and records all of it, one
    /// manifest edit per family.
    pub(crate) fn recover_logs(&self) -> Result<()> {
        let mut st = self.state.lock();
        let logs = self.logs_to_replay(&mut st, true)?;
        let mut edits: Vec<(u32, VersionEdit)> = st
            .cfs
            .keys()
            .map(|&id| {
                let mut e = VersionEdit::new();
                e.set_column_family(id);
                (id, e)
            })
            .collect();
        let mut max_seq = st.versions.last_sequence();
        let mut rec = Self::recovering(&st);
        let mut replayed = Vec::new();
        for &number in &logs {
            let mut flushes: Vec<(usize, Arc<MemTable>)> = Vec::new();
            let st_ref: &DbState = &st;
            let intact =
                self.replay_log(st_ref, number, &replayed, &mut rec, &mut max_seq, |rec| {
                    for (i, (_, h, mem)) in rec.mems.iter_mut().enumerate() {
                        if mem.approximate_memory_usage() >= h.opts.write_buffer_size {
                            let full = std::mem::replace(mem, h.new_memtable());
                            flushes.push((i, full));
                        }
                    }
                    Ok(())
                })?;
            // Memtables that filled during this log, written now (their
            // file numbers are taken under the state, which the replay
            // only reads).
            for (i, mem) in flushes {
                let h = rec.mems[i].1.clone();
                h.flush_recovered(&mut st, &mem, &mut edits[i].1)?;
            }
            match intact {
                Some(end) => replayed.push((number, end)),
                // The logs from here on are obsolete once the new log is
                // on record, and deleted with the others.
                None => break,
            }
        }
        for (i, (_, h, mem)) in rec.mems.iter().enumerate() {
            if !mem.is_empty() {
                h.flush_recovered(&mut st, mem, &mut edits[i].1)?;
            }
        }
        st.versions.set_last_sequence(max_seq);
        let number = st.versions.new_file_number();
        let file = self.fs.create(&log_file_name(&self.dir, number))?;
        self.fs.sync_dir(&self.dir)?;
        for (id, mut edit) in edits {
            edit.set_log_number(number);
            // The logs written under the previous merge operator are in
            // tables now: record the one the family runs with from here
            // (an open without one keeps the name: it writes no operands).
            let handle = st.cf(id).handle.clone();
            if let Some(op) = &handle.opts.merge_operator {
                if st.versions.merge_operator(id) != Some(op.name()) {
                    edit.set_merge_operator_name(op.name());
                }
            }
            st.versions.log_and_apply(&mut edit)?;
            st.cf_mut(id).mem_log_number = number;
            handle.publish_read_view(&st);
        }
        st.log = Some(LogWriter::new(file));
        st.log_number = number;
        st.live_logs.push_back((number, 0));
        self.delete_obsolete_files(&mut st);
        Ok(())
    }

    fn flush_recovered(
        &self,
        st: &mut DbState,
        mem: &Arc<MemTable>,
        edit: &mut VersionEdit,
    ) -> Result<()> {
        let number = st.versions.new_file_number();
        let mut it = mem.iter();
        crate::iter::InternalIterator::seek_to_first(&mut it);
        let range_dels = mem.range_deletion_list();
        if let Some(f) = self.write_table(&mut it, &range_dels, number)? {
            edit.add_new_file(0, f);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::db::filename::{parse_file_name, FileType};
    use crate::env::{FileSystem, MemFileSystem};
    use crate::wal::LogWriter;
    use crate::{Error, Options, WriteBatch, DB};

    /// A log record whose checksum holds but whose batch repeats sequence
    /// numbers already replayed is `Corruption` naming the log, not a
    /// panic, and the database's files are left as they were.
    #[test]
    fn replayed_batch_that_goes_back_in_sequence_is_corruption() {
        let fs = Arc::new(MemFileSystem::new());
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_file_system(fs.clone());
        let dir = std::path::Path::new("/db");
        {
            let db = DB::open(&opts, dir).unwrap();
            db.put(b"a", b"1").unwrap();
            db.put(b"b", b"2").unwrap();
        }
        let log = fs
            .list(dir)
            .unwrap()
            .into_iter()
            .filter(|n| matches!(parse_file_name(n), Some((FileType::Log, _))))
            .max()
            .expect("a log");
        let path = dir.join(&log);
        let size = fs.file_size(&path).unwrap();
        assert!(size > 0, "the writes are in the log");
        let mut batch = WriteBatch::default();
        batch.put(b"c", b"3");
        batch.set_sequence(1); // sequence 1 is already in this log
        let mut writer = LogWriter::new_at_offset(fs.open_append(&path).unwrap(), size);
        writer.add_record(batch.data()).unwrap();
        writer.sync().unwrap();
        drop(writer);
        let before = fs.list(dir).unwrap();
        let err = DB::open(&opts, dir).unwrap_err();
        assert!(matches!(err, Error::Corruption { .. }), "{err}");
        assert!(err.to_string().contains(&log), "{err}");
        assert!(
            err.to_string().contains("does not follow sequence"),
            "{err}"
        );
        let after = fs.list(dir).unwrap();
        for name in &before {
            assert!(after.contains(name), "{name} deleted; now {after:?}");
        }
        // Without paranoid checks the open skips that record, and a
        // malformed one, and replays the records after them.
        let size = fs.file_size(&path).unwrap();
        let mut writer = LogWriter::new_at_offset(fs.open_append(&path).unwrap(), size);
        writer.add_record(b"not a batch").unwrap();
        let mut batch = WriteBatch::default();
        batch.put(b"d", b"4");
        batch.set_sequence(3);
        writer.add_record(batch.data()).unwrap();
        writer.sync().unwrap();
        drop(writer);
        assert!(DB::open(&opts, dir).is_err(), "paranoid by default");
        opts.set_paranoid_checks(false);
        let db = DB::open(&opts, dir).unwrap();
        assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
        assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
        assert_eq!(db.get(b"c").unwrap(), None, "the out-of-sequence batch");
        assert_eq!(db.get(b"d").unwrap().as_deref(), Some(&b"4"[..]));
        db.put(b"e", b"5").unwrap();
        drop(db);
        let db = DB::open(&opts, dir).unwrap();
        assert_eq!(db.get(b"e").unwrap().as_deref(), Some(&b"5"[..]));
    }
}
