//! Column families: independent keyspaces of one database, each with its
//! own memtables, options (comparator, table format, compaction) and
//! levels, sharing one write-ahead log and one manifest, so that a batch
//! over several of them is atomic across a crash (RocksDB's column
//! families, with the `rocksdb` crate's names).
//!
//! Handles: [`DB::cf_handle`](crate::DB::cf_handle) gives a
//! `&ColumnFamily` that lives as long as the database handle; the `_cf`
//! methods take it (or a reference to it) through [`AsColumnFamilyRef`].
//! A dropped family's handle stays valid memory, but every read and write
//! through it fails with `InvalidArgument`.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::inner::{CfState, DbInner, ReadView};
use super::open::make_cf;
use super::options::{Options, ReadOptions, WriteOptions};
use super::{
    DBIterator, DBPinnableSlice, DBRawIterator, IngestExternalFileOptions, IteratorMode, Snapshot,
    WriteBatch, DB,
};
use crate::error::{Error, Result};
use crate::key::InternalKeyComparator;
use crate::version::{VersionEdit, DEFAULT_COLUMN_FAMILY_ID};

/// A handle to a column family, as `rocksdb::ColumnFamily`.
pub struct ColumnFamily {
    pub(crate) inner: Arc<DbInner>,
}

impl std::fmt::Debug for ColumnFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnFamily")
            .field("name", &self.inner.name)
            .field("id", &self.inner.id)
            .finish()
    }
}

impl ColumnFamily {
    /// The family's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The family's id (0 for the default family), as RocksDB's `GetID`.
    pub fn id(&self) -> u32 {
        self.inner.id
    }
}

/// What the `_cf` methods accept as a column family: a `ColumnFamily` or
/// a reference to one (the `rocksdb` crate's trait).
pub trait AsColumnFamilyRef {
    /// The handle.
    fn inner(&self) -> &ColumnFamily;

    /// The family's id.
    fn cf_id(&self) -> u32 {
        self.inner().inner.id
    }
}

impl AsColumnFamilyRef for ColumnFamily {
    fn inner(&self) -> &ColumnFamily {
        self
    }
}

impl AsColumnFamilyRef for &ColumnFamily {
    fn inner(&self) -> &ColumnFamily {
        self
    }
}

impl AsColumnFamilyRef for Arc<ColumnFamily> {
    fn inner(&self) -> &ColumnFamily {
        self
    }
}

/// A column family to open: its name and options, as
/// `rocksdb::ColumnFamilyDescriptor`.
#[derive(Clone, Debug)]
pub struct ColumnFamilyDescriptor {
    pub(crate) name: String,
    pub(crate) options: Options,
}

impl ColumnFamilyDescriptor {
    /// A family named `name` with `options` (those that are per family:
    /// comparator, write buffer, table format, compaction, merge operator,
    /// prefix extractor; the database-wide ones come from the options the
    /// database is opened with).
    pub fn new<S: Into<String>>(name: S, options: Options) -> ColumnFamilyDescriptor {
        ColumnFamilyDescriptor {
            name: name.into(),
            options,
        }
    }

    /// The family's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl DbInner {
    /// Creates column family `name` with `opts` (its per-family options;
    /// the database-wide ones stay the database's) and returns its handle.
    pub(crate) fn create_column_family(&self, name: &str, opts: &Options) -> Result<Arc<DbInner>> {
        if self.read_only {
            return Err(Error::NotSupported(
                "the database is open read-only: no column family can be created".into(),
            ));
        }
        check_name(name)?;
        let cf_opts = opts.for_column_family(&self.db_opts);
        cf_opts.validate()?;
        let mut st = self.state.lock();
        if let Some(e) = &st.bg_error {
            return Err(e.clone());
        }
        let icmp = InternalKeyComparator::new(cf_opts.comparator.clone());
        // Writes go to the log open now or later ones: none older can hold
        // a write of the new family.
        let log_number = st.log_number;
        let merge_operator = cf_opts.merge_operator.as_ref().map(|m| m.name().to_owned());
        let created =
            st.versions
                .create_column_family(name, icmp, merge_operator.as_deref(), log_number);
        let id = match created {
            Ok(id) => id,
            Err(e) => {
                // A failed manifest write may still have put the family on
                // disk: stop as any failed edit does.
                if st.versions.manifest_failed() {
                    self.set_bg_error(&mut st, e.clone());
                }
                return Err(e);
            }
        };
        let handle = Arc::new(make_cf(&self.shared, id, name, &cf_opts));
        st.cfs.insert(id, CfState::new(handle.clone(), log_number));
        handle.publish_read_view(&st);
        Ok(handle)
    }

    /// Drops this column family: records the drop, then its tables go
    /// once no read holds them, and its writes in the logs are ignored.
    /// Waits for its running flush or compactions to end first.
    pub(crate) fn drop_column_family(&self) -> Result<()> {
        if self.id == DEFAULT_COLUMN_FAMILY_ID {
            return Err(Error::invalid_argument(
                "the default column family cannot be dropped",
            ));
        }
        if self.read_only {
            return Err(Error::NotSupported(
                "the database is open read-only: no column family can be dropped".into(),
            ));
        }
        let mut st = self.state.lock();
        let Some(cf) = st.cfs.get_mut(&self.id) else {
            return Err(self.dropped_error());
        };
        if cf.dropping {
            return Err(Error::Busy(format!(
                "column family {:?} is being dropped",
                self.name
            )));
        }
        cf.dropping = true;
        // Its flush, if one runs, and its compactions end before the drop
        // (no new one starts); other families' work goes on. After a
        // background error no edit is written, the drop's neither.
        loop {
            if let Some(e) = &st.bg_error {
                let e = e.clone();
                st.cf_mut(self.id).dropping = false;
                return Err(e);
            }
            let cf = st.cf(self.id);
            if !cf.flushing && cf.running.is_empty() && !cf.manual_compaction {
                break;
            }
            self.bg_done.wait(&mut st);
        }
        let mut edit = VersionEdit::new();
        edit.set_column_family(self.id);
        edit.drop_column_family();
        let version = st.versions.current_cf(self.id);
        self.remember_current(&mut st);
        if let Err(e) = st.versions.log_and_apply(&mut edit) {
            st.cf_mut(self.id).dropping = false;
            // The manifest's tail is unknown: stop as any failed edit does.
            self.set_bg_error(&mut st, e.clone());
            return Err(e);
        }
        st.cfs.remove(&self.id);
        self.dropped.store(true, Ordering::Release);
        // Readers that hold the old view finish with it; new ones fail.
        self.read_view.store(Arc::new(ReadView {
            mem: self.new_memtable(),
            imm: Vec::new(),
            version: Arc::new(crate::version::Version::empty()),
        }));
        // The handle outlives the drop (the database keeps it): its open
        // tables must not, or their files' space stays taken.
        for f in version.all_files() {
            self.table_cache.evict(f.number);
        }
        drop(version);
        // The drop is on record whatever follows; a failure to record the
        // others' log numbers stops writes as any failed edit does.
        if let Err(e) = self.advance_idle_log_numbers(&mut st) {
            self.set_bg_error(&mut st, e);
        }
        // Whoever waits for this family's memtables (a flush, a resume)
        // wakes to find it gone.
        self.bg_done.notify_all();
        self.bg_work.notify_all();
        self.delete_obsolete_files(&mut st);
        Ok(())
    }

    /// `InvalidArgument` if the family was dropped.
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(self.dropped_error());
        }
        Ok(())
    }
}

/// `InvalidArgument` for a name no family can have: empty, or over
/// [`COLUMN_FAMILY_NAME_BYTES_MAX`](crate::limits::COLUMN_FAMILY_NAME_BYTES_MAX).
pub(crate) fn check_name(name: &str) -> Result<()> {
    let max = crate::limits::COLUMN_FAMILY_NAME_BYTES_MAX;
    if name.is_empty() || name.len() > max {
        return Err(Error::invalid_argument(format!(
            "a column family name must be 1 to {max} bytes, not {}",
            name.len()
        )));
    }
    Ok(())
}

impl DB {
    /// The family behind `cf`, checked to be of this database and live.
    fn family<'c>(&self, cf: &'c impl AsColumnFamilyRef) -> Result<&'c Arc<DbInner>> {
        let inner = &cf.inner().inner;
        if !Arc::ptr_eq(&inner.shared, &self.inner.shared) {
            return Err(Error::invalid_argument(format!(
                "column family {:?} belongs to another database",
                inner.name
            )));
        }
        inner.check_live()?;
        Ok(inner)
    }

    /// Writes the one-record batch `add` makes, in family `cf`.
    fn write_cf(
        &self,
        cf: &impl AsColumnFamilyRef,
        wo: &WriteOptions,
        add: impl FnOnce(&mut WriteBatch),
    ) -> Result<()> {
        self.family(cf)?;
        self.write_one(wo, add)
    }

    /// Sets `key` to `value` in column family `cf`.
    pub fn put_cf<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
    ) -> Result<()> {
        self.put_cf_opt(cf, key, value, &WriteOptions::default())
    }

    /// [`DB::put_cf`] with write options.
    pub fn put_cf_opt<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_cf(cf, wo, |b| b.put_cf(cf, key, value))
    }

    /// Removes `key` from column family `cf`.
    pub fn delete_cf<K: AsRef<[u8]>>(&self, cf: &impl AsColumnFamilyRef, key: K) -> Result<()> {
        self.delete_cf_opt(cf, key, &WriteOptions::default())
    }

    /// [`DB::delete_cf`] with write options.
    pub fn delete_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_cf(cf, wo, |b| b.delete_cf(cf, key))
    }

    /// Removes every key in `[from, to)` of column family `cf`, under its
    /// comparator ([`DB::delete_range`]).
    pub fn delete_range_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        from: K,
        to: K,
    ) -> Result<()> {
        self.delete_range_cf_opt(cf, from, to, &WriteOptions::default())
    }

    /// [`DB::delete_range_cf`] with write options.
    pub fn delete_range_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        from: K,
        to: K,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_cf(cf, wo, |b| b.delete_range_cf(cf, from, to))
    }

    /// Merges `value` into `key` of column family `cf` with the family's
    /// merge operator; `NotSupported` without one.
    pub fn merge_cf<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
    ) -> Result<()> {
        self.merge_cf_opt(cf, key, value, &WriteOptions::default())
    }

    /// [`DB::merge_cf`] with write options.
    pub fn merge_cf_opt<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        value: V,
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_cf(cf, wo, |b| b.merge_cf(cf, key, value))
    }

    /// The value of `key` in column family `cf`, copied.
    pub fn get_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
    ) -> Result<Option<Vec<u8>>> {
        self.get_cf_opt(cf, key, &ReadOptions::default())
    }

    /// [`DB::get_cf`] with read options.
    pub fn get_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        ro: &ReadOptions,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self.get_pinned_cf_opt(cf, key, ro)?.map(|v| v.to_vec()))
    }

    /// The value of `key` in column family `cf`, without copying it.
    pub fn get_pinned_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
    ) -> Result<Option<DBPinnableSlice>> {
        self.get_pinned_cf_opt(cf, key, &ReadOptions::default())
    }

    /// [`DB::get_pinned_cf`] with read options.
    pub fn get_pinned_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        ro: &ReadOptions,
    ) -> Result<Option<DBPinnableSlice>> {
        self.family(cf)?.get_ro(key.as_ref(), ro)
    }

    /// The values of `(family, key)` pairs, copied, in the order given, as
    /// `rocksdb::DB::multi_get_cf`: the keys of each family are looked up
    /// together ([`DB::batched_multi_get_cf`]).
    pub fn multi_get_cf<'a, 'b: 'a, K, I, W>(&'a self, keys: I) -> Vec<Result<Option<Vec<u8>>>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = (&'b W, K)>,
        W: 'b + AsColumnFamilyRef,
    {
        self.multi_get_cf_opt(keys, &ReadOptions::default())
    }

    /// [`DB::multi_get_cf`] with read options.
    pub fn multi_get_cf_opt<'a, 'b: 'a, K, I, W>(
        &'a self,
        keys: I,
        ro: &ReadOptions,
    ) -> Vec<Result<Option<Vec<u8>>>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = (&'b W, K)>,
        W: 'b + AsColumnFamilyRef,
    {
        let pairs: Vec<(&'b W, K)> = keys.into_iter().collect();
        let mut out: Vec<Option<Result<Option<Vec<u8>>>>> =
            (0..pairs.len()).map(|_| None).collect();
        // Group by family, in order of first appearance.
        let mut done = vec![false; pairs.len()];
        for i in 0..pairs.len() {
            if done[i] {
                continue;
            }
            let id = pairs[i].0.cf_id();
            let group: Vec<usize> = (i..pairs.len())
                .filter(|&j| !done[j] && pairs[j].0.cf_id() == id)
                .collect();
            for &j in &group {
                done[j] = true;
            }
            match self.family(pairs[i].0) {
                Err(e) => {
                    for &j in &group {
                        out[j] = Some(Err(e.clone()));
                    }
                }
                Ok(inner) => {
                    let refs: Vec<&[u8]> = group.iter().map(|&j| pairs[j].1.as_ref()).collect();
                    let results = inner.multi_get_ro(&refs, false, ro);
                    for (&j, r) in group.iter().zip(results) {
                        out[j] = Some(r.map(|v| v.map(|v| v.to_vec())));
                    }
                }
            }
        }
        out.into_iter()
            .map(|r| r.expect("every key answered"))
            .collect()
    }

    /// The values of `keys` in column family `cf`, without copying them,
    /// in the order given, as `rocksdb::DB::batched_multi_get_cf`
    /// ([`DB::batched_multi_get`]).
    pub fn batched_multi_get_cf<'a, K, I>(
        &self,
        cf: &impl AsColumnFamilyRef,
        keys: I,
        sorted_input: bool,
    ) -> Vec<Result<Option<DBPinnableSlice>>>
    where
        K: AsRef<[u8]> + 'a + ?Sized,
        I: IntoIterator<Item = &'a K>,
    {
        self.batched_multi_get_cf_opt(cf, keys, sorted_input, &ReadOptions::default())
    }

    /// [`DB::batched_multi_get_cf`] with read options.
    pub fn batched_multi_get_cf_opt<'a, K, I>(
        &self,
        cf: &impl AsColumnFamilyRef,
        keys: I,
        sorted_input: bool,
        ro: &ReadOptions,
    ) -> Vec<Result<Option<DBPinnableSlice>>>
    where
        K: AsRef<[u8]> + 'a + ?Sized,
        I: IntoIterator<Item = &'a K>,
    {
        let refs: Vec<&[u8]> = keys.into_iter().map(|k| k.as_ref()).collect();
        match self.family(cf) {
            Ok(inner) => inner.multi_get_ro(&refs, sorted_input, ro),
            Err(e) => refs.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    /// A Rust iterator over column family `cf` from `mode`.
    pub fn iterator_cf<'a: 'b, 'b>(
        &'a self,
        cf: &impl AsColumnFamilyRef,
        mode: IteratorMode<'b>,
    ) -> DBIterator<'a> {
        self.iterator_cf_opt(cf, ReadOptions::default(), mode)
    }

    /// [`DB::iterator_cf`] with read options (the `rocksdb` crate's
    /// argument order).
    pub fn iterator_cf_opt<'a: 'b, 'b>(
        &'a self,
        cf: &impl AsColumnFamilyRef,
        ro: ReadOptions,
        mode: IteratorMode<'b>,
    ) -> DBIterator<'a> {
        DBIterator::new(self.raw_iterator_cf_opt(cf, ro), mode)
    }

    /// A cursor over column family `cf`.
    pub fn raw_iterator_cf<'a>(&'a self, cf: &impl AsColumnFamilyRef) -> DBRawIterator<'a> {
        self.raw_iterator_cf_opt(cf, ReadOptions::default())
    }

    /// [`DB::raw_iterator_cf`] with read options. A family of another
    /// database or a dropped one gives an iterator whose `status` is the
    /// error.
    pub fn raw_iterator_cf_opt<'a>(
        &'a self,
        cf: &impl AsColumnFamilyRef,
        ro: ReadOptions,
    ) -> DBRawIterator<'a> {
        match self.family(cf) {
            Ok(inner) => DBRawIterator::new(inner, &ro),
            Err(e) => DBRawIterator::failed(&self.inner, e),
        }
    }

    /// Writes the memtables of column family `cf` that hold data to tables
    /// and waits until they are ([`DB::flush`]).
    pub fn flush_cf(&self, cf: &impl AsColumnFamilyRef) -> Result<()> {
        self.family(cf)?.flush_memtables()
    }

    /// Compacts `[start, end]` of column family `cf` ([`DB::compact_range`]).
    pub fn compact_range_cf<S: AsRef<[u8]>, E: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        start: Option<S>,
        end: Option<E>,
    ) -> Result<()> {
        let inner = self.family(cf)?;
        inner.flush_memtables()?;
        inner.compact_range(
            start.as_ref().map(|s| s.as_ref()),
            end.as_ref().map(|e| e.as_ref()),
        )
    }

    /// A property of column family `cf` ([`DB::property_value`]).
    pub fn property_value_cf(
        &self,
        cf: &impl AsColumnFamilyRef,
        name: &str,
    ) -> Result<Option<String>> {
        self.family(cf)?.property(name)
    }

    /// [`DB::ingest_external_file`] into column family `cf` (files ordered
    /// by its comparator).
    pub fn ingest_external_file_cf<P: AsRef<Path>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        paths: Vec<P>,
    ) -> Result<()> {
        self.ingest_external_file_cf_opts(cf, &IngestExternalFileOptions::default(), paths)
    }

    /// [`DB::ingest_external_file_cf`] with options.
    pub fn ingest_external_file_cf_opts<P: AsRef<Path>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        opts: &IngestExternalFileOptions,
        paths: Vec<P>,
    ) -> Result<()> {
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.family(cf)?.ingest_external_files(&paths, opts)
    }
}

impl Snapshot<'_> {
    /// The value of `key` in column family `cf` as of the snapshot.
    pub fn get_cf<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
    ) -> Result<Option<Vec<u8>>> {
        self.get_cf_opt(cf, key, ReadOptions::default())
    }

    /// [`Snapshot::get_cf`] with read options.
    pub fn get_cf_opt<K: AsRef<[u8]>>(
        &self,
        cf: &impl AsColumnFamilyRef,
        key: K,
        ro: ReadOptions,
    ) -> Result<Option<Vec<u8>>> {
        self.db.get_cf_opt(cf, key, &self.options(ro))
    }

    /// The values of `(family, key)` pairs as of the snapshot, copied
    /// ([`DB::multi_get_cf`]).
    pub fn multi_get_cf<'b, K, I, W>(&self, keys: I) -> Vec<Result<Option<Vec<u8>>>>
    where
        K: AsRef<[u8]>,
        I: IntoIterator<Item = (&'b W, K)>,
        W: 'b + AsColumnFamilyRef,
    {
        let ro = self.options(ReadOptions::default());
        self.db.multi_get_cf_opt(keys, &ro)
    }

    /// The values of `keys` in column family `cf` as of the snapshot,
    /// without copying them ([`DB::batched_multi_get_cf`]).
    pub fn batched_multi_get_cf<'k, K, I>(
        &self,
        cf: &impl AsColumnFamilyRef,
        keys: I,
        sorted_input: bool,
    ) -> Vec<Result<Option<DBPinnableSlice>>>
    where
        K: AsRef<[u8]> + 'k + ?Sized,
        I: IntoIterator<Item = &'k K>,
    {
        let ro = self.options(ReadOptions::default());
        self.db
            .batched_multi_get_cf_opt(cf, keys, sorted_input, &ro)
    }

    /// A cursor over column family `cf` as of the snapshot.
    pub fn raw_iterator_cf(&self, cf: &impl AsColumnFamilyRef) -> DBRawIterator<'_> {
        self.db
            .raw_iterator_cf_opt(cf, self.options(ReadOptions::default()))
    }

    /// A Rust iterator over column family `cf` as of the snapshot.
    pub fn iterator_cf<'b>(
        &self,
        cf: &impl AsColumnFamilyRef,
        mode: IteratorMode<'b>,
    ) -> DBIterator<'_> {
        DBIterator::new(self.raw_iterator_cf(cf), mode)
    }
}
