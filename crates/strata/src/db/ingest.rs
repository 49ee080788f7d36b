//! Bulk loading (the `rocksdb` crate's names): [`SstFileWriter`] builds a
//! table file outside any database, [`DB::ingest_external_file`] adds such
//! files to a live database without going through the write path.
//!
//! An ingested file becomes newer than everything already written: it gets
//! a sequence number of its own (the next one: of files given together, a
//! later file's keys win over an earlier one's; writes may come between
//! them, and a failure leaves the files before it ingested), and
//! its entries are rewritten with it into a level-0 table of the database
//! (RocksDB can instead record a global sequence number in the file; Strata's
//! tables carry their sequence numbers in their keys). A file whose range
//! nothing holds, with no snapshot open and no compaction running, is
//! instead copied as it is to the deepest level. Memtables holding keys
//! of a file's range are flushed first, since reads ask memtables before
//! tables. Writes wait while a file's sequence number is taken.

use std::cmp::Ordering as CmpOrdering;
use std::path::{Path, PathBuf};

use parking_lot::MutexGuard;

use crate::env::WritableFile;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{
    build_internal_key, extract_user_key, parse_entry_key, parse_internal_key, Comparator,
    InternalKey, SequenceNumber, ValueKind,
};
use crate::sst::{TableBuilder, TableOpenOptions};
use crate::version::VersionEdit;

use super::inner::{DbInner, DbState};
use super::options::Options;
use super::table_outputs::TableOutputs;

/// Writes a table file of sorted keys for [`DB::ingest_external_file`]
/// (the `rocksdb` crate's `SstFileWriter`), with the table options, the
/// comparator and the file system of the [`Options`] it is created with.
///
/// ```
/// use strata_kv::{Options, SstFileWriter, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let mut opts = Options::default();
/// opts.create_if_missing(true);
/// let file = dir.join("load.sst");
/// let mut writer = SstFileWriter::create(&opts);
/// writer.open(&file)?;
/// writer.put(b"a", b"1")?;
/// writer.put(b"b", b"2")?; // keys in order, each once
/// writer.finish()?;
/// let db = DB::open(&opts, dir.join("db"))?;
/// db.ingest_external_file(vec![&file])?;
/// assert_eq!(db.get(b"b")?.as_deref(), Some(&b"2"[..]));
/// # drop(db);
/// # DB::destroy(&Options::default(), dir.join("db"))?;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), strata_kv::Error>(())
/// ```
///
/// [`DB::ingest_external_file`]: crate::DB::ingest_external_file
pub struct SstFileWriter {
    opts: Options,
    builder: Option<TableBuilder>,
    name: String,
    last_key: Option<Vec<u8>>,
    /// The internal key of the entry being added, reused.
    ikey: Vec<u8>,
    file_size: u64,
}

impl std::fmt::Debug for SstFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstFileWriter")
            .field("file", &self.name)
            .field("open", &self.builder.is_some())
            .finish()
    }
}

impl SstFileWriter {
    /// A writer with the table options, comparator and file system of
    /// `opts`.
    pub fn create(opts: &Options) -> SstFileWriter {
        SstFileWriter {
            opts: opts.clone(),
            builder: None,
            name: String::new(),
            last_key: None,
            ikey: Vec::new(),
            file_size: 0,
        }
    }

    /// Creates the file at `path` (replacing one that is there).
    pub fn open<P: AsRef<Path>>(&mut self, path: P) -> Result<()> {
        let path = path.as_ref();
        let file: Box<dyn WritableFile> = self.opts.fs.create(path)?;
        self.name = path.display().to_string();
        self.builder = Some(TableBuilder::new(
            self.opts.table_options(),
            file,
            self.name.clone(),
        )?);
        self.last_key = None;
        self.file_size = 0;
        Ok(())
    }

    /// Adds `key` with `value`. Keys must come in increasing order of the
    /// comparator, each once.
    pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, key: K, value: V) -> Result<()> {
        self.add(key.as_ref(), ValueKind::Value, value.as_ref())
    }

    /// Adds a merge operand for `key` (resolved by the merge operator of
    /// the database it is ingested into).
    pub fn merge<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, key: K, value: V) -> Result<()> {
        self.add(key.as_ref(), ValueKind::Merge, value.as_ref())
    }

    /// Adds a deletion of `key`: ingested, it hides older values.
    pub fn delete<K: AsRef<[u8]>>(&mut self, key: K) -> Result<()> {
        self.add(key.as_ref(), ValueKind::Deletion, &[])
    }

    fn add(&mut self, key: &[u8], kind: ValueKind, value: &[u8]) -> Result<()> {
        let Some(builder) = self.builder.as_mut() else {
            return Err(Error::invalid_argument(
                "SstFileWriter: open a file before adding keys",
            ));
        };
        if key.len() > crate::limits::KEY_SIZE_BYTES_MAX
            || value.len() > crate::limits::VALUE_SIZE_BYTES_MAX
        {
            return Err(Error::invalid_argument(format!(
                "SstFileWriter: a {}-byte key or {}-byte value exceeds the limits",
                key.len(),
                value.len()
            )));
        }
        if let Some(last) = &self.last_key {
            if self.opts.comparator.compare(last, key) != CmpOrdering::Less {
                return Err(Error::invalid_argument(format!(
                    "SstFileWriter {}: keys must be added in increasing order, each once",
                    self.name
                )));
            }
        }
        build_internal_key(&mut self.ikey, key, 0, kind);
        builder.add(&self.ikey, value)?;
        let last = self.last_key.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(key);
        Ok(())
    }

    /// Ends the file: its blocks, index and footer are written and synced.
    /// A file without keys is an error (as RocksDB).
    pub fn finish(&mut self) -> Result<()> {
        let Some(mut builder) = self.builder.take() else {
            return Err(Error::invalid_argument("SstFileWriter: no file is open"));
        };
        if self.last_key.is_none() {
            return Err(Error::invalid_argument(format!(
                "SstFileWriter {}: no key was added",
                self.name
            )));
        }
        builder.finish()?;
        builder.sync()?;
        self.file_size = builder.file_size();
        Ok(())
    }

    /// Bytes of the file written so far (all of it after `finish`).
    pub fn file_size(&self) -> u64 {
        match &self.builder {
            Some(b) => b.file_size(),
            None => self.file_size,
        }
    }
}

/// How [`DB::ingest_external_file_opts`](crate::DB::ingest_external_file_opts)
/// ingests (the `rocksdb` crate's names and defaults).
#[derive(Debug, Clone)]
pub struct IngestExternalFileOptions {
    move_files: bool,
    allow_global_seqno: bool,
    allow_blocking_flush: bool,
}

impl Default for IngestExternalFileOptions {
    fn default() -> Self {
        IngestExternalFileOptions {
            move_files: false,
            allow_global_seqno: true,
            allow_blocking_flush: true,
        }
    }
}

impl IngestExternalFileOptions {
    /// Move the files into the database (a hard link where the file
    /// system allows, then the original name is removed) instead of
    /// copying them. A file that must be rewritten (it overlaps data
    /// already there) is read, rewritten, and then removed. Default: false.
    pub fn set_move_files(&mut self, v: bool) {
        self.move_files = v;
    }

    /// Allow a file that overlaps data already in the database, which
    /// then gets a sequence number of its own (it is rewritten into level
    /// 0; RocksDB writes a global sequence number into it). With false,
    /// such a file is refused. Default: true.
    pub fn set_allow_global_seqno(&mut self, v: bool) {
        self.allow_global_seqno = v;
    }

    /// Allow flushing memtables that hold keys of a file's range before
    /// ingesting it. With false, such a file is refused. Default: true.
    pub fn set_allow_blocking_flush(&mut self, v: bool) {
        self.allow_blocking_flush = v;
    }
}

impl DbInner {
    /// See [`crate::DB::ingest_external_file_opts`].
    pub(crate) fn ingest_external_files(
        &self,
        paths: &[PathBuf],
        opts: &IngestExternalFileOptions,
    ) -> Result<()> {
        if self.read_only {
            return Err(Error::NotSupported(
                "the database is open read-only: nothing can be ingested".into(),
            ));
        }
        for path in paths {
            self.ingest_one(path, opts)?;
        }
        Ok(())
    }

    fn ingest_one(&self, path: &Path, opts: &IngestExternalFileOptions) -> Result<()> {
        let name = path.display().to_string();
        let file = self.fs.open_random_access(path)?;
        let table_opts = TableOpenOptions {
            comparator: self.user_cmp.clone(),
            block_cache: None,
            placement: crate::sst::MetaPlacement::Reader,
            prefix_extractor: None,
            packed_lazy_checksums: false,
            cache_stored_under_direct_reads: false,
        };
        let table = crate::sst::Table::open(file, name.clone(), &table_opts)?;
        if !table.range_deletions().is_empty() {
            return Err(Error::NotSupported(format!(
                "{name}: ingesting a table that holds range deletions"
            )));
        }
        let ucmp = &*self.user_cmp;
        let (first, last) = external_range(&table, &name, ucmp)?;
        let (smallest, largest) = (first.user_key(), last.user_key());
        let mut st = self.state.lock();
        // Wait until no write group is in flight and no memtable holds a
        // key of the file's range; from then on the lock is held to the
        // end, so no write, snapshot or other ingestion can see the
        // sequence number before the table is in place (RocksDB stops
        // writes while it ingests too; reads take no lock and go on).
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            // The family may be dropped while the lock is let go.
            if st.cfs.get(&self.id).is_none_or(|c| c.dropping) {
                return Err(self.dropped_error());
            }
            if !st.writers.is_empty() || st.pending_groups > 0 || st.log.is_none() {
                MutexGuard::unlocked(&mut st, std::thread::yield_now);
                continue;
            }
            if memtables_overlap(&st, self.id, smallest, largest, ucmp) {
                if !opts.allow_blocking_flush {
                    return Err(Error::invalid_argument(format!(
                        "{name}: the memtable holds keys of its range, and flushing is not allowed"
                    )));
                }
                MutexGuard::unlocked(&mut st, || self.flush_memtables())?;
                continue;
            }
            break;
        }
        let number = st.versions.new_file_number();
        st.pending_outputs.insert(number);
        // Where nothing anywhere holds a key of its range and no snapshot
        // is open, its entries, at sequence 0, are no older than anything
        // they could meet: the file is copied as it is, to the deepest
        // level (RocksDB links or copies it there too). Otherwise it is
        // rewritten with a sequence number of its own into level 0.
        let copy_level = self.copy_level(&st, &table, smallest, largest);
        if copy_level.is_none() && !opts.allow_global_seqno {
            st.pending_outputs.remove(&number);
            return Err(Error::invalid_argument(format!(
                "{name}: it overlaps data already in the database (or a snapshot or compaction is running) and would need a sequence number of its own, which is not allowed"
            )));
        }
        let placed = match copy_level {
            Some(level) => self
                .copy_in(path, number, level, &first, &last, opts.move_files)
                .map(|file| (level, vec![file], None)),
            None => {
                let seq = st.versions.last_sequence() + 1;
                self.rewrite_with_sequence(&table, seq, number)
                    .map(|files| (0, files, Some(seq)))
            }
        };
        let (level, files, seq) = match placed {
            Ok(placed) => placed,
            Err(e) => {
                self.discard_outputs(&mut st, &[number]);
                return Err(e);
            }
        };
        if let Some(seq) = seq {
            st.versions.set_last_sequence(seq);
        }
        let mut edit = VersionEdit::new();
        edit.set_column_family(self.id);
        for f in files {
            edit.add_new_file(level, f);
        }
        self.remember_current(&mut st);
        let applied = st.versions.log_and_apply(&mut edit);
        st.pending_outputs.remove(&number);
        // Published whether or not the edit went in: a failed one leaves
        // the version as it was, but the sequence number is taken.
        self.publish_read_view(&st);
        // A failed manifest write may still have put the edit on disk: the
        // table stays (no file is deleted until a manifest is written
        // again), and writes stop, as after a flush's.
        if let Err(e) = applied {
            self.set_bg_error(&mut st, e.clone());
            return Err(e);
        }
        self.bg_work.notify_all();
        drop(st);
        if opts.move_files {
            // In the database now: the original name goes (as RocksDB
            // unlinks a moved file). The ingestion has happened whatever
            // this says: reporting a failure here would invite a retry,
            // which would make the file's keys newer than later writes.
            let _ = self.fs.remove(path);
        }
        Ok(())
    }

    /// The level an external file can be copied to as it is: the deepest
    /// block-based one, when no snapshot is open, the file holds no merge
    /// operand (its table records no operator) and no memtable or level
    /// holds a key of its range (memtables were checked by the caller).
    fn copy_level(
        &self,
        st: &DbState,
        table: &crate::sst::Table,
        smallest: &[u8],
        largest: &[u8],
    ) -> Option<usize> {
        // A running compaction may be writing into the range's gap of the
        // deepest level: only the rewrite into level 0 is safe then.
        if !st.snapshots.is_empty()
            || !st.cf(self.id).running.is_empty()
            || st.cf(self.id).manual_compaction
            || table.properties().num_merge_operands > 0
            || matches!(table, crate::sst::Table::Packed(_))
        {
            return None;
        }
        let version = st.versions.current_cf(self.id);
        let ucmp = &*self.user_cmp;
        let overlaps = (0..crate::version::NUM_LEVELS)
            .any(|level| version.overlap_in_level(level, Some(smallest), Some(largest), ucmp));
        if overlaps {
            return None;
        }
        (1..crate::version::NUM_LEVELS)
            .rev()
            .find(|&level| !self.opts.packed_at(level))
    }

    /// Copies the external file to table `number` of the database (synced)
    /// and reads it back.
    fn copy_in(
        &self,
        path: &Path,
        number: u64,
        level: usize,
        first: &InternalKey,
        last: &InternalKey,
        move_file: bool,
    ) -> Result<crate::version::NewFile> {
        let to = super::filename::table_file_name(&self.dir, number);
        if move_file {
            self.fs.link_or_copy(path, &to)?;
        } else {
            crate::env::copy_file(self.fs.as_ref(), path, &to, u64::MAX)?;
        }
        self.fs.sync_dir(&self.dir)?;
        let file_size = self.fs.file_size(&to)?;
        self.table_cache.get(number, file_size, level)?;
        Ok(crate::version::NewFile {
            number,
            file_size,
            smallest: first.clone(),
            largest: last.clone(),
            smallest_seqno: 0,
            largest_seqno: 0,
            has_range_deletions: false,
        })
    }

    /// The entries of `table` with sequence number `seq`, in a new level-0
    /// table of the database.
    fn rewrite_with_sequence(
        &self,
        table: &crate::sst::Table,
        seq: SequenceNumber,
        number: u64,
    ) -> Result<Vec<crate::version::NewFile>> {
        // One output: it is never cut.
        let mut out = TableOutputs::new(self, 0, || number);
        (|| {
            let mut it = table.iter_opt(false);
            it.seek_to_first();
            let mut key = Vec::new();
            while it.valid() {
                let p = parse_entry_key(it.key()).ok_or_else(|| {
                    Error::corruption("external table", 0, "malformed internal key")
                })?;
                if p.kind == ValueKind::Merge && self.opts.merge_operator.is_none() {
                    return Err(Error::NotSupported(
                        "the external file holds merge operands and the database has no merge operator".into(),
                    ));
                }
                build_internal_key(&mut key, p.user_key, seq, p.kind);
                out.add(&key, it.value(), seq)?;
                it.next();
            }
            it.status()?;
            out.finish()
        })()
    }
}

/// The first and last entries of an external table, as read (not as its
/// properties say), after checking what ingestion relies on: entries at
/// sequence 0, one per user key, in increasing order of `ucmp`.
fn external_range(
    table: &crate::sst::Table,
    name: &str,
    ucmp: &dyn Comparator,
) -> Result<(InternalKey, InternalKey)> {
    let bad = |what: &str| Error::invalid_argument(format!("{name}: {what}"));
    let mut it = table.iter_opt(false);
    it.seek_to_first();
    let mut first: Option<InternalKey> = None;
    let mut last: Option<Vec<u8>> = None;
    while it.valid() {
        let p = parse_entry_key(it.key()).ok_or_else(|| bad("malformed key"))?;
        if p.sequence != 0 {
            return Err(bad(
                "entries carry sequence numbers: not a file SstFileWriter made",
            ));
        }
        if let Some(prev) = &last {
            let prev = extract_user_key(prev);
            if ucmp.compare(prev, p.user_key) != CmpOrdering::Less {
                return Err(bad("keys out of order, or a key twice"));
            }
        }
        if first.is_none() {
            first = Some(InternalKey::from_encoded(it.key().to_vec()));
        }
        let l = last.get_or_insert_with(Vec::new);
        l.clear();
        l.extend_from_slice(it.key());
        it.next();
    }
    it.status()?;
    match (first, last) {
        (Some(first), Some(last)) => Ok((first, InternalKey::from_encoded(last))),
        _ => Err(bad("the file holds no key")),
    }
}

/// True if a memtable of family `cf` in `st` holds a key in
/// `[smallest, largest]`.
fn memtables_overlap(
    st: &DbState,
    cf: u32,
    smallest: &[u8],
    largest: &[u8],
    ucmp: &dyn Comparator,
) -> bool {
    let cf = st.cf(cf);
    std::iter::once(&cf.mem)
        .chain(cf.imm.iter().map(|m| &m.mem))
        .any(|mem| {
            // A range deletion over the range hides older entries: the
            // file's must be newer, so the memtable is flushed first.
            let deletes = mem.range_deletions().is_some_and(|list| {
                list.fragments().iter().any(|f| {
                    ucmp.compare(&f.start, largest) != CmpOrdering::Greater
                        && ucmp.compare(smallest, &f.end) == CmpOrdering::Less
                })
            });
            if deletes {
                return true;
            }
            let mut it = mem.iter();
            it.seek(
                InternalKey::new(
                    smallest,
                    crate::key::MAX_SEQUENCE_NUMBER,
                    ValueKind::FOR_SEEK,
                )
                .encoded(),
            );
            it.valid()
                && parse_internal_key(it.key())
                    .is_some_and(|p| ucmp.compare(p.user_key, largest) != CmpOrdering::Greater)
        })
}
