//! The database: open, write, read, iterate, snapshot, flush, recover.
//!
//! Names and call shapes follow the `rocksdb` crate. A [`DB`] is `Send +
//! Sync`; share it across threads with an `Arc` or by reference.

pub(crate) mod backup;
pub(crate) mod checkpoint;
mod closed_logs;
pub mod column_family;
mod compaction;
pub mod db_iter;
pub mod filename;
mod flush;
mod ingest;
mod inner;
mod iterator;
mod level_iter;
mod live_files;
pub(crate) mod merge_operator;
mod multi_get;
mod open;
pub mod options;
mod options_file;
mod read;
mod sst_partitioner;
mod table_cache;
mod table_outputs;
mod write;
pub mod write_batch;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::key::SequenceNumber;

use inner::DbInner;

pub use column_family::{AsColumnFamilyRef, ColumnFamily, ColumnFamilyDescriptor};
pub use ingest::{IngestExternalFileOptions, SstFileWriter};
pub use iterator::{DBIterator, DBRawIterator, Direction, IteratorMode};
pub use live_files::{LiveFile, TableFileCheck};
pub use merge_operator::{MergeFn, MergeOperands, MergeOperandsIter};
pub use options::{
    BlockBasedOptions, Cache, DBCompressionType, DBRecoveryMode, Options, PackedTableOptions,
    ReadOptions, WriteOptions,
};
pub use read::DBPinnableSlice;
pub use sst_partitioner::{SstPartitioner, SstPartitionerFactory};
pub use write_batch::WriteBatch;

/// An open database.
///
/// Open, write, read, delete; writes are durable in the log unless
/// [`WriteOptions::disable_wal`] says otherwise, and synced with
/// [`WriteOptions::set_sync`].
///
/// ```
/// use strata_kv::{Options, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// let mut opts = Options::default();
/// opts.create_if_missing(true);
/// let db = DB::open(&opts, &dir)?;
/// db.put(b"user:1", b"ada")?;
/// assert_eq!(db.get(b"user:1")?.as_deref(), Some(&b"ada"[..]));
/// db.delete(b"user:1")?;
/// assert_eq!(db.get(b"user:1")?, None);
/// // Many keys at once: one result per key, in order.
/// db.put(b"a", b"1")?;
/// let got = db.multi_get([&b"a"[..], b"missing"]);
/// assert_eq!(got[0].as_ref().unwrap().as_deref(), Some(&b"1"[..]));
/// assert_eq!(got[1].as_ref().unwrap(), &None);
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
pub struct DB {
    /// The default column family.
    inner: Arc<DbInner>,
    path: PathBuf,
    /// Every column family handle given out since open, dropped ones
    /// too: none is removed while the database lives, so `cf_handle` can
    /// lend `&ColumnFamily` for the database's lifetime.
    cfs: parking_lot::Mutex<Vec<Arc<ColumnFamily>>>,
}

impl std::fmt::Debug for DB {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DB").field("path", &self.path).finish()
    }
}

impl DB {
    /// Opens the database at `path` with `opts`.
    pub fn open<P: AsRef<Path>>(opts: &Options, path: P) -> Result<DB> {
        Self::open_cf_descriptors(opts, path, Vec::new())
    }

    /// Opens the database at `path` with the column families `names`
    /// (each with default options, as `rocksdb::DB::open_cf`, except the
    /// default family, which always opens with `opts`: named or not, it
    /// keeps the comparator and settings the database was made with). Every family on record must be named
    /// (`InvalidArgument` naming those that are not); a name not on record
    /// is created with [`Options::create_missing_column_families`], and
    /// is `InvalidArgument` without it.
    pub fn open_cf<P, I, N>(opts: &Options, path: P, names: I) -> Result<DB>
    where
        P: AsRef<Path>,
        I: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        let descriptors = name_descriptors(opts, names);
        Self::open_cf_descriptors(opts, path, descriptors)
    }

    /// [`DB::open_cf`] with each family's options, as
    /// `rocksdb::DB::open_cf_with_opts`.
    pub fn open_cf_with_opts<P, I, N>(opts: &Options, path: P, families: I) -> Result<DB>
    where
        P: AsRef<Path>,
        I: IntoIterator<Item = (N, Options)>,
        N: AsRef<str>,
    {
        let descriptors = families
            .into_iter()
            .map(|(n, o)| ColumnFamilyDescriptor::new(n.as_ref(), o));
        Self::open_cf_descriptors(opts, path, descriptors)
    }

    /// [`DB::open_cf`] with each family's options, as
    /// `rocksdb::DB::open_cf_descriptors`. A family's options give its
    /// comparator, memtable size, table format, compaction settings, merge
    /// operator and prefix extractor; the database-wide options (file
    /// system, background jobs, open files, log recovery, rate limiter)
    /// are `opts`'. A descriptor named `"default"` gives the default
    /// family's.
    pub fn open_cf_descriptors<P, I>(opts: &Options, path: P, descriptors: I) -> Result<DB>
    where
        P: AsRef<Path>,
        I: IntoIterator<Item = ColumnFamilyDescriptor>,
    {
        let path = path.as_ref().to_path_buf();
        let descriptors: Vec<ColumnFamilyDescriptor> = descriptors.into_iter().collect();
        let handles = open::open(opts, &path, &descriptors)?;
        Ok(Self::with_handles(handles, path))
    }

    fn with_handles(handles: Vec<Arc<DbInner>>, path: PathBuf) -> DB {
        let inner = handles[0].clone();
        let cfs = handles
            .into_iter()
            .map(|inner| Arc::new(ColumnFamily { inner }))
            .collect();
        DB {
            inner,
            path,
            cfs: parking_lot::Mutex::new(cfs),
        }
    }

    /// The names of the column families of the database at `path`, the
    /// default first, as `rocksdb::DB::list_cf`.
    pub fn list_cf<P: AsRef<Path>>(opts: &Options, path: P) -> Result<Vec<String>> {
        crate::version::VersionSet::list_column_families(opts.fs.as_ref(), path.as_ref())
    }

    /// Creates column family `name` with `opts` (its per-family options),
    /// as `rocksdb::DB::create_cf`. `InvalidArgument` if it exists.
    pub fn create_cf<N: AsRef<str>>(&self, name: N, opts: &Options) -> Result<()> {
        let inner = self.inner.create_column_family(name.as_ref(), opts)?;
        self.cfs.lock().push(Arc::new(ColumnFamily { inner }));
        Ok(())
    }

    /// Drops column family `name`, as `rocksdb::DB::drop_cf`: its data is
    /// gone (its tables are deleted once no read holds them), and reads
    /// and writes through its handle fail with `InvalidArgument`. The
    /// default family cannot be dropped.
    pub fn drop_cf(&self, name: &str) -> Result<()> {
        let handle = self.live_handle(name).ok_or_else(|| {
            Error::invalid_argument(format!("column family {name:?} does not exist"))
        })?;
        handle.inner.drop_column_family()
    }

    /// The handle of column family `name`, if it exists, as
    /// `rocksdb::DB::cf_handle`.
    pub fn cf_handle(&self, name: &str) -> Option<&ColumnFamily> {
        let handle = self.live_handle(name)?;
        // SAFETY: the Arc stays in `self.cfs`, which never removes an
        // entry while `self` lives, and an Arc's pointee never moves: the
        // reference is valid for as long as `&self` is.
        Some(unsafe { &*Arc::as_ptr(&handle) })
    }

    fn live_handle(&self, name: &str) -> Option<Arc<ColumnFamily>> {
        self.cfs
            .lock()
            .iter()
            .find(|c| c.inner.name == name && !c.inner.dropped.load(Ordering::Acquire))
            .cloned()
    }

    /// Opens the database at `path` for reading only, as
    /// `rocksdb::DB::open_for_read_only`: no lock is taken and nothing is
    /// written, so another process may hold the database open meanwhile.
    /// The logs the manifest does not cover are replayed into memory
    /// (with `error_if_log_file_exist`, a log holding any write is an
    /// error instead). Writes, `flush` and `compact_range` return
    /// [`Error::NotSupported`]; no background work runs and no file is
    /// deleted. The view is the database as it was at open: later writes
    /// of another process are not seen, and a table it deletes
    /// meanwhile makes the reads that need it fail.
    pub fn open_for_read_only<P: AsRef<Path>>(
        opts: &Options,
        path: P,
        error_if_log_file_exist: bool,
    ) -> Result<DB> {
        Self::open_cf_for_read_only(opts, path, Vec::<&str>::new(), error_if_log_file_exist)
    }

    /// [`DB::open_for_read_only`] with column families `names` (a subset
    /// of those on record is fine), as `rocksdb::DB::open_cf_for_read_only`.
    pub fn open_cf_for_read_only<P, I, N>(
        opts: &Options,
        path: P,
        names: I,
        error_if_log_file_exist: bool,
    ) -> Result<DB>
    where
        P: AsRef<Path>,
        I: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        let path = path.as_ref().to_path_buf();
        let descriptors = name_descriptors(opts, names);
        let handles = open::open_read_only(opts, &path, &descriptors, error_if_log_file_exist)?;
        Ok(Self::with_handles(handles, path))
    }

    /// Opens with default options, creating the database if missing.
    pub fn open_default<P: AsRef<Path>>(path: P) -> Result<DB> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        DB::open(&opts, path)
    }

    /// Deletes the database at `path` and its directory. Fails with `Busy`
    /// if it is open, and with `InvalidArgument` (deleting nothing) if the
    /// directory holds files but no database (no `CURRENT` file): a table-
    /// or log-named file there is not ours to delete. A directory that does
    /// not exist, or holds only what a crashed creation leaves (`LOCK`, a
    /// manifest, temporary files), is fine.
    pub fn destroy<P: AsRef<Path>>(opts: &Options, path: P) -> Result<()> {
        let dir = path.as_ref();
        let fs = &opts.fs;
        if !fs.exists(dir) {
            return Ok(());
        }
        refuse_non_database(fs.as_ref(), dir)?;
        let lock_path = filename::lock_file_name(dir);
        let lock = fs.lock(&lock_path)?;
        for name in fs.list(dir)? {
            if filename::parse_file_name(&name)
                .is_some_and(|(kind, _)| kind != filename::FileType::Lock)
            {
                fs.remove(&dir.join(&name))?;
            }
        }
        drop(lock);
        let _ = fs.remove(&lock_path);
        // Leaves the directory if it holds files that are not ours.
        let _ = fs.remove_dir(dir);
        Ok(())
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets `key` to `value`.
    pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, key: K, value: V) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with write options.
    pub fn put_opt<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        key: K,
        value: V,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_one(wo, |b| b.put(key, value))
    }

    /// Removes `key`.
    pub fn delete<K: AsRef<[u8]>>(&self, key: K) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Removes `key` with write options.
    pub fn delete_opt<K: AsRef<[u8]>>(&self, key: K, wo: &WriteOptions) -> Result<()> {
        self.write_one(wo, |b| b.delete(key))
    }

    /// Removes every key in `[from, to)` (half open, under the database's
    /// comparator) with one write, whatever the number of keys, as
    /// RocksDB's `DeleteRange`. `from == to` deletes nothing; `from` after
    /// `to` is `InvalidArgument` (as RocksDB since 7.x). Packed tables
    /// have no range-deletion block: a table that must hold range
    /// deletions is written block-based, in any level.
    pub fn delete_range<K: AsRef<[u8]>>(&self, from: K, to: K) -> Result<()> {
        self.delete_range_opt(from, to, &WriteOptions::default())
    }

    /// [`DB::delete_range`] with write options.
    pub fn delete_range_opt<K: AsRef<[u8]>>(
        &self,
        from: K,
        to: K,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_one(wo, |b| b.delete_range(from, to))
    }

    /// Applies a batch atomically.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Merges `value` into `key` with the merge operator set at open
    /// ([`Options::set_merge_operator`]); `NotSupported` without one.
    pub fn merge<K: AsRef<[u8]>, V: AsRef<[u8]>>(&self, key: K, value: V) -> Result<()> {
        self.merge_opt(key, value, &WriteOptions::default())
    }

    /// Merges `value` into `key` with write options.
    pub fn merge_opt<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        key: K,
        value: V,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_one(wo, |b| b.merge(key, value))
    }

    /// Writes the one-record batch `add` makes, in a batch buffer this
    /// thread kept from its last write (see `write::spare_batch`).
    pub(crate) fn write_one(
        &self,
        wo: &WriteOptions,
        add: impl FnOnce(&mut WriteBatch),
    ) -> Result<()> {
        let mut b = write::spare_batch();
        add(&mut b);
        self.write_opt(b, wo)
    }

    /// Applies a batch atomically with write options.
    pub fn write_opt(&self, batch: WriteBatch, wo: &WriteOptions) -> Result<()> {
        if batch.has_merge() || batch.has_range_del() || batch.has_cf() {
            self.inner.check_batch(&batch)?;
        }
        self.inner.write(batch, wo.sync, wo.disable_wal)
    }

    /// The value of `key`, copied.
    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// The value of `key` with read options, copied.
    pub fn get_opt<K: AsRef<[u8]>>(&self, key: K, ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        Ok(self.get_pinned_opt(key, ro)?.map(|v| v.to_vec()))
    }

    /// The value of `key`, without copying it.
    pub fn get_pinned<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<DBPinnableSlice>> {
        self.get_pinned_opt(key, &ReadOptions::default())
    }

    /// The value of `key` with read options, without copying it.
    pub fn get_pinned_opt<K: AsRef<[u8]>>(
        &self,
        key: K,
        ro: &ReadOptions,
    ) -> Result<Option<DBPinnableSlice>> {
        self.inner.get_ro(key.as_ref(), ro)
    }

    /// The values of `keys`, copied, in the order given (duplicates each get
    /// their answer), as `rocksdb::DB::multi_get`. The keys are looked up
    /// together, as [`batched_multi_get`](Self::batched_multi_get) does; an
    /// I/O error or corruption fails only the keys whose lookup met it.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("strata-doc-mg-{}", std::process::id()));
    /// let db = strata_kv::DB::open_default(&dir)?;
    /// db.put(b"a", b"1")?;
    /// db.put(b"c", b"3")?;
    /// let values = db.multi_get([&b"c"[..], b"b", b"a"]);
    /// let values: Vec<Option<Vec<u8>>> = values.into_iter().collect::<Result<_, _>>()?;
    /// assert_eq!(values, vec![Some(b"3".to_vec()), None, Some(b"1".to_vec())]);
    /// # drop(db); strata_kv::DB::destroy(&strata_kv::Options::default(), &dir)?;
    /// # Ok::<(), strata_kv::Error>(())
    /// ```
    pub fn multi_get<K: AsRef<[u8]>, I: IntoIterator<Item = K>>(
        &self,
        keys: I,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_opt(keys, &ReadOptions::default())
    }

    /// [`multi_get`](Self::multi_get) with read options (snapshot,
    /// `fill_cache`).
    pub fn multi_get_opt<K: AsRef<[u8]>, I: IntoIterator<Item = K>>(
        &self,
        keys: I,
        ro: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let keys: SmallVec<[K; KEYS_INLINE]> = keys.into_iter().collect();
        let refs: SmallVec<[&[u8]; KEYS_INLINE]> = keys.iter().map(|k| k.as_ref()).collect();
        copied(self.inner.multi_get_ro(&refs, false, ro))
    }

    /// The values of `keys`, without copying them, in the order given, as
    /// `rocksdb::DB::batched_multi_get_cf`: one walk of the tree for the
    /// whole batch (filter probes prefetched together, one index search and
    /// one block fetch per data block the batch touches). `sorted_input`
    /// says the keys already ascend under the comparator, which saves the
    /// sort (a wrong hint is detected and costs only the check).
    pub fn batched_multi_get<'a, K, I>(
        &self,
        keys: I,
        sorted_input: bool,
    ) -> Vec<Result<Option<DBPinnableSlice>>>
    where
        K: AsRef<[u8]> + 'a + ?Sized,
        I: IntoIterator<Item = &'a K>,
    {
        self.batched_multi_get_opt(keys, sorted_input, &ReadOptions::default())
    }

    /// [`batched_multi_get`](Self::batched_multi_get) with read options.
    pub fn batched_multi_get_opt<'a, K, I>(
        &self,
        keys: I,
        sorted_input: bool,
        ro: &ReadOptions,
    ) -> Vec<Result<Option<DBPinnableSlice>>>
    where
        K: AsRef<[u8]> + 'a + ?Sized,
        I: IntoIterator<Item = &'a K>,
    {
        let refs: SmallVec<[&[u8]; KEYS_INLINE]> = keys.into_iter().map(|k| k.as_ref()).collect();
        self.inner.multi_get_ro(&refs, sorted_input, ro)
    }

    /// [`batched_multi_get_opt`](Self::batched_multi_get_opt) into the
    /// caller's vector, as RocksDB's C++ `MultiGet` fills the caller's
    /// `values` and `statuses` arrays: `out` is cleared, then holds one
    /// answer per key in the order given. A vector kept from one call to
    /// the next spares each call its result vector's allocation, so a
    /// batch of one costs what [`get_pinned_opt`](Self::get_pinned_opt)
    /// costs. Clear or drop `out` when done: its values pin their blocks.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("strata-doc-mgi-{}", std::process::id()));
    /// let db = strata_kv::DB::open_default(&dir)?;
    /// db.put(b"a", b"1")?;
    /// let ro = strata_kv::ReadOptions::default();
    /// let mut out = Vec::new();
    /// db.batched_multi_get_into([&b"b"[..], b"a"], false, &ro, &mut out);
    /// assert_eq!(out.len(), 2);
    /// assert!(out[0].as_ref().unwrap().is_none());
    /// assert_eq!(out[1].as_ref().unwrap().as_deref(), Some(&b"1"[..]));
    /// out.clear();
    /// # drop(db); strata_kv::DB::destroy(&strata_kv::Options::default(), &dir)?;
    /// # Ok::<(), strata_kv::Error>(())
    /// ```
    pub fn batched_multi_get_into<'a, K, I>(
        &self,
        keys: I,
        sorted_input: bool,
        ro: &ReadOptions,
        out: &mut Vec<Result<Option<DBPinnableSlice>>>,
    ) where
        K: AsRef<[u8]> + 'a + ?Sized,
        I: IntoIterator<Item = &'a K>,
    {
        let refs: SmallVec<[&[u8]; KEYS_INLINE]> = keys.into_iter().map(|k| k.as_ref()).collect();
        out.clear();
        self.inner.multi_get_ro_into(&refs, sorted_input, ro, out);
    }

    /// A consistent view of the database as of now.
    pub fn snapshot(&self) -> Snapshot<'_> {
        let mut st = self.inner.state.lock();
        let seq = st.versions.last_sequence();
        *st.snapshots.entry(seq).or_insert(0) += 1;
        Snapshot { db: self, seq }
    }

    /// A cursor over the database.
    pub fn raw_iterator(&self) -> DBRawIterator<'_> {
        self.raw_iterator_opt(ReadOptions::default())
    }

    /// A cursor over the database with read options (snapshot, bounds).
    pub fn raw_iterator_opt(&self, ro: ReadOptions) -> DBRawIterator<'_> {
        DBRawIterator::new(&self.inner, &ro)
    }

    /// A Rust iterator over `(key, value)` pairs from `mode`.
    pub fn iterator<'a: 'b, 'b>(&'a self, mode: IteratorMode<'b>) -> DBIterator<'a> {
        self.iterator_opt(mode, ReadOptions::default())
    }

    /// A Rust iterator with read options.
    pub fn iterator_opt<'a: 'b, 'b>(
        &'a self,
        mode: IteratorMode<'b>,
        ro: ReadOptions,
    ) -> DBIterator<'a> {
        DBIterator::new(self.raw_iterator_opt(ro), mode)
    }

    /// Clears a background error (RocksDB's `DB::Resume`): after a flush,
    /// compaction or manifest write failed (a full disk, a transient I/O
    /// error), writes fail with that error until this succeeds. It retries
    /// the flush of the memtables the failure held up and returns once
    /// they are in tables, or with the error of the retry. A failure of
    /// the write-ahead log itself is not cleared (its end is unknown): it
    /// returns that error, and only a reopen recovers. `Ok` when there is
    /// no error.
    pub fn resume(&self) -> Result<()> {
        self.inner.resume()
    }

    /// Writes the memtables that hold data when it is called to tables and
    /// waits until they are. Memtables that fill up while it waits are
    /// not waited for (as RocksDB), so steady writes cannot hold it up.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_memtables()
    }

    /// Adds table files written by an [`SstFileWriter`] (the `rocksdb`
    /// crate's name). Each file becomes newer than everything written
    /// before it (files given together: later ones win): it is copied as it
    /// is to the deepest level when nothing holds a key of its range and no
    /// snapshot or compaction is running, and otherwise rewritten into a
    /// level-0 table with a sequence number of its own; it is read back
    /// before it is recorded. Memtables holding keys of a
    /// file's range are flushed first. The files themselves are left as
    /// they are. A file with entries that are not one version per key at
    /// sequence 0 (not one [`SstFileWriter`] made) is `InvalidArgument`;
    /// a file ordered by another comparator too.
    pub fn ingest_external_file<P: AsRef<Path>>(&self, paths: Vec<P>) -> Result<()> {
        self.ingest_external_file_opts(&IngestExternalFileOptions::default(), paths)
    }

    /// [`DB::ingest_external_file`] with options: move the files instead of
    /// copying them, and refuse (with `InvalidArgument`, nothing ingested
    /// of that file) an ingestion that would need a flush or a sequence
    /// number of its own.
    pub fn ingest_external_file_opts<P: AsRef<Path>>(
        &self,
        opts: &IngestExternalFileOptions,
        paths: Vec<P>,
    ) -> Result<()> {
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.inner.ingest_external_files(&paths, opts)
    }

    /// Compacts the key range `[start, end]` (None: unbounded) down the
    /// levels, as `rocksdb::DB::compact_range`. Flushes the memtable first.
    pub fn compact_range<S: AsRef<[u8]>, E: AsRef<[u8]>>(
        &self,
        start: Option<S>,
        end: Option<E>,
    ) -> Result<()> {
        self.flush()?;
        self.inner.compact_range(
            start.as_ref().map(|s| s.as_ref()),
            end.as_ref().map(|e| e.as_ref()),
        )
    }

    /// Waits until every pending flush and compaction is done.
    pub fn wait_for_compact(&self) -> Result<()> {
        self.inner.wait_for_compact()
    }

    /// A database property: `strata.stats` (compaction statistics table),
    /// `strata.levelstats`, `strata.sstables`, `strata.num-files-at-level<N>`,
    /// `strata.total-sst-files-size`, `strata.cur-size-all-mem-tables`,
    /// `strata.num-immutable-mem-table` (memtables switched out and not yet
    /// flushed),
    /// `strata.estimate-num-keys`, `strata.user-bytes-written`,
    /// `strata.num-write-groups` (group commits) and
    /// `strata.num-parallel-write-groups` (those shared out for parallel
    /// memtable inserts), `strata.num-parallel-write-batches` (batches in
    /// them that their own writer inserted, beside the leader),
    /// `strata.num-pipelined-write-groups` (groups that handed the log to
    /// the next leader before their memtable insert),
    /// `strata.num-write-delays` (writes slowed by 1 ms: level 0 at
    /// `level0_slowdown_writes_trigger`), `strata.num-write-stops` (writes
    /// stopped until a flush or compaction finished: memtables full, or
    /// level 0 at `level0_stop_writes_trigger`) and
    /// `strata.write-stall-micros` (time spent in both),
    /// `strata.num-point-reads` (keys looked up by get and MultiGet),
    /// `strata.num-iterator-steps` (iterator positionings and steps,
    /// counted by each iterator in runs of 1,024 and when it drops),
    /// `strata.num-tables-dropped-unread` (compaction inputs wholly under
    /// newer range deletions, deleted without being read),
    /// `strata.num-read-triggered-compactions` (compactions of files that
    /// point lookups searched in vain too often; see
    /// [`Options::set_read_triggered_compactions`]),
    /// `strata.num-flushes`, `strata.num-compactions` (trivial moves
    /// included),
    /// `strata.estimate-table-readers-mem` (heap the open table readers
    /// hold outside the block cache: indexes and filters they keep),
    /// `strata.block-cache-usage` and `strata.block-cache-capacity`,
    /// `strata.base-level`, `strata.compaction.bytes-written-at-level<N>`,
    /// `strata.compaction.bytes-moved-at-level<N>`; the `rocksdb.` prefix
    /// works too.
    pub fn property_value(&self, name: &str) -> Result<Option<String>> {
        self.inner.property(name)
    }

    /// The sequence number of the last write.
    pub fn latest_sequence_number(&self) -> SequenceNumber {
        self.inner.state.lock().versions.last_sequence()
    }
}

impl Drop for DB {
    fn drop(&mut self) {
        // As RocksDB (unless `avoid_flush_during_shutdown`): writes made
        // with the log disabled live only in the memtables, so a clean
        // close writes them to tables. Best effort: a failure here has no
        // caller to go to, and leaves the database as a crash would.
        let unpersisted: Vec<Arc<DbInner>> = {
            let st = self.inner.state.lock();
            if st.unpersisted_data && st.bg_error.is_none() {
                st.cfs
                    .values()
                    .filter(|c| !(c.mem.is_empty() && c.imm.is_empty()))
                    .map(|c| c.handle.clone())
                    .collect()
            } else {
                Vec::new()
            }
        };
        for cf in unpersisted {
            let _ = cf.flush_memtables();
        }
        self.inner.shutting_down.store(true, Ordering::Release);
        {
            let _st = self.inner.state.lock();
            self.inner.bg_work.notify_all();
        }
        for t in self.inner.threads.lock().drain(..) {
            let _ = t.join();
        }
        {
            let mut st = self.inner.state.lock();
            if let Some(log) = st.log.as_mut() {
                // Best effort: unsynced writes are not promised to survive.
                let _ = log.flush();
            }
        }
        self.inner.release_families();
    }
}

/// A consistent read view, as `rocksdb::Snapshot`. Reads through it see
/// the database as it was when it was taken.
///
/// ```
/// use strata_kv::{Options, ReadOptions, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// # let mut opts = Options::default();
/// # opts.create_if_missing(true);
/// let db = DB::open(&opts, &dir)?;
/// db.put(b"k", b"old")?;
/// let snap = db.snapshot();
/// db.put(b"k", b"new")?;
/// assert_eq!(snap.get(b"k")?.as_deref(), Some(&b"old"[..]));
/// assert_eq!(db.get(b"k")?.as_deref(), Some(&b"new"[..]));
/// // Or through read options, for any read method.
/// let mut ro = ReadOptions::default();
/// ro.set_snapshot(&snap);
/// assert_eq!(db.get_opt(b"k", &ro)?.as_deref(), Some(&b"old"[..]));
/// drop(snap);
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
pub struct Snapshot<'a> {
    db: &'a DB,
    seq: SequenceNumber,
}

impl std::fmt::Debug for Snapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("sequence", &self.seq)
            .finish()
    }
}

impl<'a> Snapshot<'a> {
    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> SequenceNumber {
        self.seq
    }

    fn options(&self, mut ro: ReadOptions) -> ReadOptions {
        ro.snapshot = Some(self.seq);
        ro
    }

    /// The value of `key` as of the snapshot.
    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Vec<u8>>> {
        self.db.get_opt(key, &self.options(ReadOptions::default()))
    }

    /// The value of `key` as of the snapshot, with read options.
    pub fn get_opt<K: AsRef<[u8]>>(&self, key: K, ro: ReadOptions) -> Result<Option<Vec<u8>>> {
        self.db.get_opt(key, &self.options(ro))
    }

    /// The values of `keys` as of the snapshot, copied
    /// ([`DB::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>, I: IntoIterator<Item = K>>(
        &self,
        keys: I,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_opt(keys, ReadOptions::default())
    }

    /// The values of `keys` as of the snapshot, with read options.
    pub fn multi_get_opt<K: AsRef<[u8]>, I: IntoIterator<Item = K>>(
        &self,
        keys: I,
        ro: ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.db.multi_get_opt(keys, &self.options(ro))
    }

    /// The values of `keys` as of the snapshot, without copying them
    /// ([`DB::batched_multi_get`]).
    pub fn batched_multi_get<'k, K, I>(
        &self,
        keys: I,
        sorted_input: bool,
    ) -> Vec<Result<Option<DBPinnableSlice>>>
    where
        K: AsRef<[u8]> + 'k + ?Sized,
        I: IntoIterator<Item = &'k K>,
    {
        self.batched_multi_get_opt(keys, sorted_input, ReadOptions::default())
    }

    /// [`Snapshot::batched_multi_get`] with read options.
    pub fn batched_multi_get_opt<'k, K, I>(
        &self,
        keys: I,
        sorted_input: bool,
        ro: ReadOptions,
    ) -> Vec<Result<Option<DBPinnableSlice>>>
    where
        K: AsRef<[u8]> + 'k + ?Sized,
        I: IntoIterator<Item = &'k K>,
    {
        self.db
            .batched_multi_get_opt(keys, sorted_input, &self.options(ro))
    }

    /// [`DB::batched_multi_get_into`] as of the snapshot.
    pub fn batched_multi_get_into<'k, K, I>(
        &self,
        keys: I,
        sorted_input: bool,
        ro: ReadOptions,
        out: &mut Vec<Result<Option<DBPinnableSlice>>>,
    ) where
        K: AsRef<[u8]> + 'k + ?Sized,
        I: IntoIterator<Item = &'k K>,
    {
        self.db
            .batched_multi_get_into(keys, sorted_input, &self.options(ro), out)
    }

    /// A cursor as of the snapshot.
    pub fn raw_iterator(&self) -> DBRawIterator<'a> {
        self.db
            .raw_iterator_opt(self.options(ReadOptions::default()))
    }

    /// A Rust iterator as of the snapshot.
    pub fn iterator<'b>(&self, mode: IteratorMode<'b>) -> DBIterator<'a> {
        DBIterator::new(self.raw_iterator(), mode)
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        let mut st = self.db.inner.state.lock();
        if let Some(n) = st.snapshots.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                st.snapshots.remove(&self.seq);
            }
        }
    }
}

/// `InvalidArgument` if `dir` has no `CURRENT` file but holds files other
/// than those a crashed database creation can leave (`LOCK`, a manifest,
/// temporary files).
fn refuse_non_database(fs: &dyn crate::env::FileSystem, dir: &Path) -> Result<()> {
    use filename::FileType;
    let names = fs.list(dir)?;
    if names.iter().any(|n| n == "CURRENT") {
        return Ok(());
    }
    let foreign: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| {
            !matches!(
                filename::parse_file_name(n),
                Some((
                    FileType::Lock | FileType::Manifest | FileType::Temp | FileType::Options,
                    _
                ))
            )
        })
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    Err(Error::invalid_argument(format!(
        "{} holds {} file(s) ({}) but no database (no CURRENT file): not deleting anything",
        dir.display(),
        foreign.len(),
        filename::shown_names(foreign)
    )))
}

/// Descriptors for families named without options: default options, but
/// the default family gets the database's.
fn name_descriptors<I, N>(opts: &Options, names: I) -> Vec<ColumnFamilyDescriptor>
where
    I: IntoIterator<Item = N>,
    N: AsRef<str>,
{
    names
        .into_iter()
        .map(|n| {
            let n = n.as_ref();
            let o = if n == crate::version::DEFAULT_COLUMN_FAMILY_NAME {
                opts.clone()
            } else {
                Options::default()
            };
            ColumnFamilyDescriptor::new(n, o)
        })
        .collect()
}

/// Keys of a MultiGet listed on the stack before the lookup: batches up to
/// this size build their key list without an allocation.
const KEYS_INLINE: usize = 8;

/// MultiGet answers with each value copied out of its pinned block.
fn copied(results: Vec<Result<Option<DBPinnableSlice>>>) -> Vec<Result<Option<Vec<u8>>>> {
    results
        .into_iter()
        .map(|r| r.map(|v| v.map(|v| v.to_vec())))
        .collect()
}

impl DbInner {
    pub(crate) fn property(&self, name: &str) -> Result<Option<String>> {
        let Some(prop) = name
            .strip_prefix("strata.")
            .or_else(|| name.strip_prefix("rocksdb."))
        else {
            return Ok(None);
        };
        let st = self.state.lock();
        let Some(cf) = st.cfs.get(&self.id) else {
            return Err(self.dropped_error());
        };
        let v = st.versions.current_cf(self.id);
        if let Some(level) = prop.strip_prefix("num-files-at-level") {
            let level: usize = level
                .parse()
                .map_err(|_| Error::invalid_argument(format!("bad property {name}")))?;
            return Ok((level < crate::version::NUM_LEVELS).then(|| v.num_files(level).to_string()));
        }
        if let Some(level) = prop.strip_prefix("compaction.bytes-written-at-level") {
            let level: usize = level
                .parse()
                .map_err(|_| Error::invalid_argument(format!("bad property {name}")))?;
            return Ok(cf.stats.get(level).map(|s| s.bytes_written.to_string()));
        }
        if let Some(level) = prop.strip_prefix("compaction.bytes-moved-at-level") {
            let level: usize = level
                .parse()
                .map_err(|_| Error::invalid_argument(format!("bad property {name}")))?;
            return Ok(cf.stats.get(level).map(|s| s.bytes_moved.to_string()));
        }
        let mem_bytes = || {
            cf.mem.approximate_memory_usage()
                + cf.imm
                    .iter()
                    .map(|m| m.mem.approximate_memory_usage())
                    .sum::<usize>()
        };
        Ok(match prop {
            "total-sst-files-size" => {
                Some(v.all_files().map(|f| f.file_size).sum::<u64>().to_string())
            }
            "cur-size-all-mem-tables" => Some(mem_bytes().to_string()),
            "num-immutable-mem-table" => Some(cf.imm.len().to_string()),
            "estimate-num-keys" => {
                let mem: usize = cf.mem.num_entries()
                    + cf.imm.iter().map(|m| m.mem.num_entries()).sum::<usize>();
                let tables: u64 = (0..crate::version::NUM_LEVELS)
                    .flat_map(|level| v.files(level).iter().map(move |f| (level, f)))
                    .filter_map(|(level, f)| {
                        self.table_cache.get(f.number, f.file_size, level).ok()
                    })
                    .map(|t| t.properties().num_entries)
                    .sum();
                Some((mem as u64 + tables).to_string())
            }
            // RocksDB's: the heap the open table readers of the current
            // version hold outside the block cache (indexes, filters).
            "estimate-table-readers-mem" => Some(
                v.all_files()
                    .filter_map(|f| self.table_cache.open_reader(f))
                    .map(|t| t.approximate_memory_usage())
                    .sum::<usize>()
                    .to_string(),
            ),
            "block-cache-usage" => self
                .table_cache
                .block_cache()
                .map(|c| c.usage().to_string()),
            "block-cache-capacity" => self
                .table_cache
                .block_cache()
                .map(|c| c.capacity().to_string()),
            "stats" => Some(self.stats_string(&st, &v)),
            "user-bytes-written" => Some(st.user_bytes.to_string()),
            "num-write-groups" => Some(st.write_groups.to_string()),
            "num-parallel-write-groups" => Some(st.parallel_groups.to_string()),
            "num-parallel-write-batches" => Some(st.parallel_batches.to_string()),
            "num-pipelined-write-groups" => Some(st.pipelined_groups.to_string()),
            "num-write-delays" => Some(st.stalls.delays.to_string()),
            "num-write-stops" => {
                Some((st.stalls.memtable_stops + st.stalls.level0_stops).to_string())
            }
            "write-stall-micros" => Some(st.stalls.micros.to_string()),
            "num-point-reads" => Some(self.point_reads.sum().to_string()),
            "num-iterator-steps" => Some(self.iterator_steps.sum().to_string()),
            "num-subcompactions" => Some(
                self.subcompactions
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .to_string(),
            ),
            "num-read-triggered-compactions" => Some(
                self.read_triggered_compactions
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .to_string(),
            ),
            "num-tables-dropped-unread" => Some(
                self.tables_dropped_unread
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .to_string(),
            ),
            // Level 0's outputs are flushes; every other level's, compactions.
            "num-flushes" => Some(cf.stats[0].count.to_string()),
            "num-compactions" => Some(
                cf.stats[1..]
                    .iter()
                    .map(|s| s.count)
                    .sum::<u64>()
                    .to_string(),
            ),
            "base-level" => Some(
                compaction::level_targets(&self.opts, &v)
                    .base_level
                    .to_string(),
            ),
            "levelstats" => Some(compaction::stats::format_level_stats(&v)),
            "sstables" => Some(self.sstables_string(&v)),
            _ => None,
        })
    }

    fn sstables_string(&self, v: &crate::version::Version) -> String {
        let mut out = String::new();
        for level in 0..crate::version::NUM_LEVELS {
            out.push_str(&format!("--- level {level} ---\n"));
            for f in v.files(level) {
                out.push_str(&format!(
                    " {}:{}[{} .. {}]\n",
                    f.number,
                    f.file_size,
                    String::from_utf8_lossy(f.smallest.user_key()),
                    String::from_utf8_lossy(f.largest.user_key())
                ));
            }
        }
        out
    }

    fn stats_string(&self, st: &inner::DbState, v: &crate::version::Version) -> String {
        let targets = compaction::level_targets(&self.opts, v);
        let scores = self.level_scores(v, &targets);
        let mut out = compaction::stats::format_stats(&compaction::stats::StatsInput {
            version: v,
            stats: &st.cf(self.id).stats,
            scores: &scores,
            targets: &targets,
            user_bytes: st.user_bytes,
            wal_bytes: st.wal_bytes,
        });
        out.push_str(&format!(
            "Memtables: {} immutable, {} bytes active; last sequence {}; open tables {}; running compactions {}\n",
            st.cf(self.id).imm.len(),
            st.cf(self.id).mem.approximate_memory_usage(),
            st.versions.last_sequence(),
            self.table_cache.len(),
            st.cf(self.id).running.len()
        ));
        out.push_str(&format!(
            "Write groups: {}, {:.2} writers per group; {} shared out for parallel inserts, \
             in which {} followers inserted their own batch; {} pipelined\n",
            st.write_groups,
            st.group_writers as f64 / st.write_groups.max(1) as f64,
            st.parallel_groups,
            st.parallel_batches,
            st.pipelined_groups
        ));
        let stalls = st.stalls;
        out.push_str(&format!(
            "Write stalls: {} delays (level 0 at the slowdown trigger), {} stops for full \
             memtables, {} for level 0 at the stop trigger; {:.3} s stalled\n",
            stalls.delays,
            stalls.memtable_stops,
            stalls.level0_stops,
            stalls.micros as f64 / 1e6
        ));
        out.push_str(&format!(
            "Subcompactions: {} ranges run; tables dropped unread: {}\n",
            self.subcompactions
                .load(std::sync::atomic::Ordering::Relaxed),
            self.tables_dropped_unread
                .load(std::sync::atomic::Ordering::Relaxed)
        ));
        out
    }
}
