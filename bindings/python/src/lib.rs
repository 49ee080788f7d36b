//! The Python binding of Strata: the native module `strata_kv._strata_kv`,
//! re-exported by the pure-Python package `strata_kv`.
//!
//! Every call that may touch the disk or wait (open, reads, writes, flush,
//! compaction, iterator steps) runs with the GIL released (`py.detach`), so
//! Python threads sharing one `DB` run in parallel. The database is held in
//! an `Arc`: iterators and snapshots keep it alive, so `close()` (or leaving
//! the `with` block) stops new calls at once, and the files are released
//! when the last iterator or snapshot made from it is gone.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use strata_kv::{
    DBRawIterator, Error as KvError, Options, ReadOptions, Snapshot, WriteBatch as KvBatch,
    WriteOptions, DB as KvDB,
};

create_exception!(
    strata_kv,
    Error,
    PyException,
    "Base class of every error Strata raises."
);
create_exception!(
    strata_kv,
    CorruptionError,
    Error,
    "Stored data failed a checksum or a format check; the message names the file and offset."
);
create_exception!(
    strata_kv,
    InvalidArgumentError,
    Error,
    "An argument or option was refused (a key too large, an option out of range, a path that is not a database)."
);
create_exception!(
    strata_kv,
    BusyError,
    Error,
    "The database is locked by another process or handle."
);
create_exception!(
    strata_kv,
    IOError,
    Error,
    "The operating system failed a file operation."
);
create_exception!(
    strata_kv,
    NotFoundError,
    Error,
    "A named thing (a database, a file) does not exist."
);
create_exception!(
    strata_kv,
    NotSupportedError,
    Error,
    "The operation is not supported by this database or build."
);

/// Maps an engine error to its Python exception class.
fn err(e: KvError) -> PyErr {
    let msg = e.to_string();
    match e {
        KvError::Corruption { .. } => CorruptionError::new_err(msg),
        KvError::InvalidArgument(_) => InvalidArgumentError::new_err(msg),
        KvError::Busy(_) => BusyError::new_err(msg),
        KvError::Io { .. } => IOError::new_err(msg),
        KvError::NotFound(_) => NotFoundError::new_err(msg),
        KvError::NotSupported(_) => NotSupportedError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

fn closed() -> PyErr {
    InvalidArgumentError::new_err("the database is closed")
}

/// Options of the block-based table, set by their setter names like the
/// others; they go to the `[block_based_table_factory]` table of the
/// options file format (`docs/options_file.md`).
const BLOCK_BASED_KEYS: &[&str] = &[
    "block_size",
    "block_size_deviation",
    "block_restart_interval",
    "index_block_restart_interval",
    "bloom_filter",
    "block_cache",
    "data_block_index_type",
    "data_block_hash_ratio",
    "cache_index_and_filter_blocks",
    "pin_l0_filter_and_index_blocks_in_cache",
    "whole_key_filtering",
    "cache_compressed_under_direct_reads",
];

/// Converts one keyword argument to a TOML value.
fn toml_value(name: &str, v: &Bound<'_, PyAny>) -> PyResult<toml::Value> {
    // bool before int: Python's bool is an int.
    if v.is_instance_of::<pyo3::types::PyBool>() {
        return Ok(toml::Value::Boolean(v.extract()?));
    }
    if v.is_instance_of::<pyo3::types::PyInt>() {
        let i: i64 = v.extract()?;
        return Ok(toml::Value::Integer(i));
    }
    if let Ok(f) = v.extract::<f64>() {
        return Ok(toml::Value::Float(f));
    }
    if let Ok(s) = v.extract::<String>() {
        return Ok(toml::Value::String(s));
    }
    // A table of the options file, e.g. `packed_table_factory={"from_level": 1}`.
    if let Ok(d) = v.cast::<PyDict>() {
        let mut table = toml::Table::new();
        for (k, v) in d.iter() {
            let key: String = k.extract()?;
            let value = toml_value(&format!("{name}.{key}"), &v)?;
            table.insert(key, value);
        }
        return Ok(toml::Value::Table(table));
    }
    Err(PyTypeError::new_err(format!(
        "option {name}: expected bool, int, float, str or dict, got {}",
        v.get_type().name()?
    )))
}

/// Builds `Options` from keyword arguments named as the `rocksdb` crate's
/// setters without `set_` (the options file's keys). An unknown name is a
/// `TypeError`, as for any Python function; a bad value an
/// `InvalidArgumentError`.
fn options_from_kwargs(
    create_if_missing: bool,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Options> {
    let mut root = toml::Table::new();
    let mut block = toml::Table::new();
    root.insert(
        "create_if_missing".into(),
        toml::Value::Boolean(create_if_missing),
    );
    let mut merge_operator: Option<String> = None;
    if let Some(kwargs) = kwargs {
        for (k, v) in kwargs.iter() {
            let name: String = k.extract()?;
            let name = name.strip_prefix("set_").unwrap_or(&name).to_string();
            if name == "merge_operator" {
                merge_operator = Some(v.extract()?);
                continue;
            }
            let value = toml_value(&name, &v)?;
            if BLOCK_BASED_KEYS.contains(&name.as_str()) {
                block.insert(name, value);
            } else {
                root.insert(name, value);
            }
        }
    }
    if !block.is_empty() {
        root.insert(
            "block_based_table_factory".into(),
            toml::Value::Table(block),
        );
    }
    let text = toml::to_string(&root).map_err(|e| Error::new_err(e.to_string()))?;
    let mut opts = Options::from_toml(&text, "options").map_err(|e| match e {
        KvError::InvalidArgument(m) if m.contains("unknown key") => {
            PyTypeError::new_err(format!("unexpected keyword argument: {m}"))
        }
        e => err(e),
    })?;
    if let Some(name) = merge_operator {
        set_merge_operator(&mut opts, &name)?;
    }
    Ok(opts)
}

/// `merge_operator=`: one of RocksDB's stock operators, by db_bench's name
/// or RocksDB's class name (the class name is recorded in the database):
/// `uint64add` (8-byte little-endian counters; another size counts as 0),
/// `stringappend` (values joined by `,`), `put` (the newest operand wins).
/// All are associative: each is its own partial merge.
fn set_merge_operator(opts: &mut Options, name: &str) -> PyResult<()> {
    fn uint64add(
        _key: &[u8],
        base: Option<&[u8]>,
        ops: &strata_kv::MergeOperands,
    ) -> Option<Vec<u8>> {
        let counter = |v: &[u8]| <[u8; 8]>::try_from(v).map_or(0, u64::from_le_bytes);
        let sum = ops
            .iter()
            .fold(base.map_or(0, counter), |s, op| s.wrapping_add(counter(op)));
        Some(sum.to_le_bytes().to_vec())
    }
    fn stringappend(
        _key: &[u8],
        base: Option<&[u8]>,
        ops: &strata_kv::MergeOperands,
    ) -> Option<Vec<u8>> {
        let mut out = base.map(<[u8]>::to_vec);
        for op in ops {
            match &mut out {
                Some(v) => {
                    v.push(b',');
                    v.extend_from_slice(op);
                }
                None => out = Some(op.to_vec()),
            }
        }
        Some(out.unwrap_or_default())
    }
    fn put(_key: &[u8], base: Option<&[u8]>, ops: &strata_kv::MergeOperands) -> Option<Vec<u8>> {
        Some(match ops.iter().last() {
            Some(op) => op.to_vec(),
            None => base.unwrap_or_default().to_vec(),
        })
    }
    match name {
        "uint64add" | "UInt64AddOperator" => {
            opts.set_merge_operator_associative("UInt64AddOperator", uint64add)
        }
        "stringappend" | "StringAppendOperator" => {
            opts.set_merge_operator_associative("StringAppendOperator", stringappend)
        }
        "put" | "PutOperator" => opts.set_merge_operator_associative("PutOperator", put),
        other => {
            return Err(InvalidArgumentError::new_err(format!(
                "merge_operator={other:?}: expected \"uint64add\", \"stringappend\" or \"put\""
            )))
        }
    }
    Ok(())
}

fn write_options(sync: bool, disable_wal: bool) -> WriteOptions {
    let mut wo = WriteOptions::default();
    wo.set_sync(sync);
    wo.disable_wal(disable_wal);
    wo
}

/// A snapshot and the database it belongs to, with the borrow erased.
struct SnapHolder {
    // Declared first: dropped before the database it borrows.
    snap: Snapshot<'static>,
    db: Arc<KvDB>,
}

impl SnapHolder {
    fn new(db: Arc<KvDB>) -> SnapHolder {
        let snap = db.snapshot();
        // SAFETY: the snapshot borrows the `DB` inside the `Arc`, whose
        // address is stable; `db` below keeps it alive, and the field order
        // drops the snapshot first.
        let snap = unsafe { std::mem::transmute::<Snapshot<'_>, Snapshot<'static>>(snap) };
        SnapHolder { snap, db }
    }

    fn read_options(&self) -> ReadOptions {
        let mut ro = ReadOptions::default();
        ro.set_snapshot(&self.snap);
        ro
    }
}

/// A raw iterator and what it borrows, with the borrow erased.
struct IterHolder {
    // Declared first: dropped before what it borrows.
    it: DBRawIterator<'static>,
    _snap: Option<Arc<SnapHolder>>,
    _db: Arc<KvDB>,
}

impl IterHolder {
    fn new(db: Arc<KvDB>, snap: Option<Arc<SnapHolder>>, mut ro: ReadOptions) -> IterHolder {
        if let Some(s) = &snap {
            ro.set_snapshot(&s.snap);
        }
        let it = db.raw_iterator_opt(ro);
        // SAFETY: the iterator borrows the `DB` inside the `Arc` (stable
        // address), kept alive by `_db` (and the snapshot by `_snap`); the
        // field order drops the iterator first.
        let it = unsafe { std::mem::transmute::<DBRawIterator<'_>, DBRawIterator<'static>>(it) };
        IterHolder {
            it,
            _snap: snap,
            _db: db,
        }
    }
}

fn bounds(start: Option<&[u8]>, stop: Option<&[u8]>) -> ReadOptions {
    let mut ro = ReadOptions::default();
    if let Some(s) = start {
        ro.set_iterate_lower_bound(s.to_vec());
    }
    if let Some(s) = stop {
        ro.set_iterate_upper_bound(s.to_vec());
    }
    ro
}

/// What a range iterator yields.
#[derive(Clone, Copy)]
enum Yield {
    Items,
    Keys,
    Values,
}

/// Entries fetched per GIL release by range iterators.
const CHUNK_ENTRIES: usize = 256;
/// ... or this many bytes of keys and values, whichever comes first.
const CHUNK_BYTES: usize = 1 << 20;

struct RangeState {
    holder: IterHolder,
    reverse: bool,
    started: bool,
    done: bool,
    buf: VecDeque<(Vec<u8>, Vec<u8>)>,
}

impl RangeState {
    /// Fills `buf` with the next entries (GIL released by the caller).
    fn fill(&mut self, want_values: bool) -> strata_kv::Result<()> {
        let it = &mut self.holder.it;
        if !self.started {
            self.started = true;
            if self.reverse {
                it.seek_to_last();
            } else {
                it.seek_to_first();
            }
        } else if self.reverse {
            it.prev();
        } else {
            it.next();
        }
        let mut bytes = 0;
        loop {
            if !it.valid() {
                it.status()?;
                self.done = true;
                return Ok(());
            }
            let (k, v) = it.item().expect("valid iterator has an item");
            bytes += k.len() + v.len();
            let v = if want_values { v.to_vec() } else { Vec::new() };
            self.buf.push_back((k.to_vec(), v));
            if self.buf.len() >= CHUNK_ENTRIES || bytes >= CHUNK_BYTES {
                // The iterator stays on the last entry taken.
                return Ok(());
            }
            if self.reverse {
                it.prev();
            } else {
                it.next();
            }
        }
    }
}

/// An iterator over a key range: `(key, value)` pairs, keys or values, in
/// key order or reversed. Made by `DB.items()`, `keys()`, `values()` and
/// their `Snapshot` forms.
#[pyclass(module = "strata_kv", name = "RangeIterator")]
struct RangeIterator {
    state: Mutex<RangeState>,
    what: Yield,
}

#[pymethods]
impl RangeIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut st = self.state.lock();
        if st.buf.is_empty() && !st.done {
            let want_values = !matches!(self.what, Yield::Keys);
            let st = &mut *st;
            py.detach(|| st.fill(want_values)).map_err(err)?;
        }
        let Some((k, v)) = st.buf.pop_front() else {
            return Ok(None);
        };
        Ok(Some(match self.what {
            Yield::Items => PyTuple::new(py, [PyBytes::new(py, &k), PyBytes::new(py, &v)])?
                .into_any()
                .unbind(),
            Yield::Keys => PyBytes::new(py, &k).into_any().unbind(),
            Yield::Values => PyBytes::new(py, &v).into_any().unbind(),
        }))
    }
}

fn range_iter(
    db: Arc<KvDB>,
    snap: Option<Arc<SnapHolder>>,
    start: Option<&[u8]>,
    stop: Option<&[u8]>,
    reverse: bool,
    what: Yield,
) -> RangeIterator {
    let holder = IterHolder::new(db, snap, bounds(start, stop));
    RangeIterator {
        state: Mutex::new(RangeState {
            holder,
            reverse,
            started: false,
            done: false,
            buf: VecDeque::new(),
        }),
        what,
    }
}

/// A cursor over the database, as RocksDB's raw iterator: position it with
/// `seek`, `seek_for_prev`, `seek_to_first` or `seek_to_last`, move it with
/// `next`, `prev`, `next_prefix` or `prev_prefix`, and read `key()` and
/// `value()` while `valid()`.
#[pyclass(module = "strata_kv", name = "RawIterator")]
struct RawIterator {
    holder: Mutex<IterHolder>,
}

impl RawIterator {
    /// Runs one positioning or move with the GIL released; a move
    /// (`from_entry`) needs the iterator on an entry.
    fn step(
        &self,
        py: Python<'_>,
        from_entry: bool,
        f: impl FnOnce(&mut DBRawIterator<'static>) + Send,
    ) -> PyResult<()> {
        let mut h = self.holder.lock();
        let it = &mut h.it;
        if from_entry && !it.valid() {
            return Err(InvalidArgumentError::new_err(
                "the iterator is not on an entry (check valid() first)",
            ));
        }
        py.detach(|| {
            f(it);
            it.status()
        })
        .map_err(err)
    }
}

#[pymethods]
impl RawIterator {
    /// True while the iterator is on an entry.
    fn valid(&self) -> bool {
        self.holder.lock().it.valid()
    }

    /// The current key, or None when not valid.
    fn key<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.holder.lock().it.key().map(|k| PyBytes::new(py, k))
    }

    /// The current value, or None when not valid.
    fn value<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.holder.lock().it.value().map(|v| PyBytes::new(py, v))
    }

    /// Moves to the first key >= `key`.
    fn seek(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.step(py, false, |it| it.seek(key))
    }

    /// Moves to the last key <= `key`.
    fn seek_for_prev(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.step(py, false, |it| it.seek_for_prev(key))
    }

    /// Moves to the first key.
    fn seek_to_first(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, false, |it| it.seek_to_first())
    }

    /// Moves to the last key.
    fn seek_to_last(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, false, |it| it.seek_to_last())
    }

    /// Moves to the next key.
    fn next(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, true, |it| it.next())
    }

    /// Moves to the previous key.
    fn prev(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, true, |it| it.prev())
    }

    /// Moves to the first key whose prefix (the database's prefix extractor)
    /// differs from the current key's: skips the rest of a row's versions.
    fn next_prefix(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, true, |it| it.next_prefix())
    }

    /// Moves to the last key of the previous prefix.
    fn prev_prefix(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, true, |it| it.prev_prefix())
    }
}

/// A batch of puts and deletes applied atomically by `DB.write(batch)`.
/// Made by `WriteBatch()`, or by `db.write_batch(sync=..., disable_wal=...)`
/// for use as a context manager that writes the batch when the `with`
/// block ends without an exception.
#[pyclass(module = "strata_kv", name = "WriteBatch")]
struct WriteBatch {
    batch: Mutex<KvBatch>,
    /// Where `__exit__` writes the batch (a batch from `db.write_batch()`);
    /// taken at exit, so a finished batch does not keep the database open.
    target: Mutex<Option<(Arc<KvDB>, bool, bool)>>,
}

#[pymethods]
impl WriteBatch {
    #[new]
    fn new() -> WriteBatch {
        WriteBatch {
            batch: Mutex::new(KvBatch::default()),
            target: Mutex::new(None),
        }
    }

    /// Adds a put of `key` = `value`.
    fn put(&self, key: &[u8], value: &[u8]) {
        self.batch.lock().put(key, value);
    }

    /// Adds a delete of `key`.
    fn delete(&self, key: &[u8]) {
        self.batch.lock().delete(key);
    }

    /// Adds a deletion of every key in `[start, end)`.
    fn delete_range(&self, start: &[u8], end: &[u8]) {
        self.batch.lock().delete_range(start, end);
    }

    /// Adds a merge of `value` into `key` (the database's `merge_operator`).
    fn merge(&self, key: &[u8], value: &[u8]) {
        self.batch.lock().merge(key, value);
    }

    /// Removes every operation.
    fn clear(&self) {
        self.batch.lock().clear();
    }

    /// Number of operations.
    fn __len__(&self) -> usize {
        self.batch.lock().len()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Writes the batch if the block ended without an exception and the
    /// batch came from `db.write_batch()`.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let target = self.target.lock().take();
        if exc_type.is_some() {
            return Ok(false);
        }
        let Some((db, sync, disable_wal)) = target else {
            return Ok(false);
        };
        let batch = std::mem::take(&mut *self.batch.lock());
        let wo = write_options(sync, disable_wal);
        py.detach(|| db.write_opt(batch, &wo)).map_err(err)?;
        Ok(false)
    }
}

/// A consistent read-only view of the database at the moment it was taken.
/// Release it with `close()` or a `with` block (or by dropping it) so that
/// compaction can drop the old versions it keeps.
#[pyclass(module = "strata_kv", name = "Snapshot")]
struct PySnapshot {
    snap: RwLock<Option<Arc<SnapHolder>>>,
}

impl PySnapshot {
    fn holder(&self) -> PyResult<Arc<SnapHolder>> {
        self.snap
            .read()
            .clone()
            .ok_or_else(|| InvalidArgumentError::new_err("the snapshot is closed"))
    }
}

#[pymethods]
impl PySnapshot {
    /// The value of `key` as of the snapshot, or `default`.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &[u8],
        default: Option<Py<PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let h = self.holder()?;
        let ro = h.read_options();
        let v = py.detach(|| h.db.get_pinned_opt(key, &ro)).map_err(err)?;
        Ok(match v {
            Some(v) => Some(PyBytes::new(py, &v).into_any().unbind()),
            None => default,
        })
    }

    fn __getitem__(&self, py: Python<'_>, key: &[u8]) -> PyResult<Py<PyAny>> {
        self.get(py, key, None)?
            .ok_or_else(|| PyKeyError::new_err(PyBytes::new(py, key).unbind()))
    }

    fn __contains__(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        Ok(self.get(py, key, None)?.is_some())
    }

    /// Values of `keys` as of the snapshot (None where absent), in order.
    fn multi_get(
        &self,
        py: Python<'_>,
        keys: Vec<Bound<'_, PyBytes>>,
    ) -> PyResult<Vec<Option<Py<PyBytes>>>> {
        let h = self.holder()?;
        multi_get(py, &h.db, &h.read_options(), &keys)
    }

    /// `(key, value)` pairs with `start <= key < stop`, in order (reversed
    /// with `reverse=True`), as of the snapshot.
    #[pyo3(signature = (start=None, stop=None, reverse=false))]
    fn items(
        &self,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        reverse: bool,
    ) -> PyResult<RangeIterator> {
        let h = self.holder()?;
        Ok(range_iter(
            h.db.clone(),
            Some(h),
            start,
            stop,
            reverse,
            Yield::Items,
        ))
    }

    /// Keys with `start <= key < stop`, as `items()`.
    #[pyo3(signature = (start=None, stop=None, reverse=false))]
    fn keys(
        &self,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        reverse: bool,
    ) -> PyResult<RangeIterator> {
        let h = self.holder()?;
        Ok(range_iter(
            h.db.clone(),
            Some(h),
            start,
            stop,
            reverse,
            Yield::Keys,
        ))
    }

    /// Values of keys with `start <= key < stop`, as `items()`.
    #[pyo3(signature = (start=None, stop=None, reverse=false))]
    fn values(
        &self,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        reverse: bool,
    ) -> PyResult<RangeIterator> {
        let h = self.holder()?;
        Ok(range_iter(
            h.db.clone(),
            Some(h),
            start,
            stop,
            reverse,
            Yield::Values,
        ))
    }

    /// A raw iterator over the snapshot, optionally bounded.
    #[pyo3(signature = (lower_bound=None, upper_bound=None))]
    fn iterator(
        &self,
        lower_bound: Option<&[u8]>,
        upper_bound: Option<&[u8]>,
    ) -> PyResult<RawIterator> {
        let h = self.holder()?;
        let holder = IterHolder::new(h.db.clone(), Some(h), bounds(lower_bound, upper_bound));
        Ok(RawIterator {
            holder: Mutex::new(holder),
        })
    }

    /// The sequence number the snapshot reads at.
    #[getter]
    fn sequence(&self) -> PyResult<u64> {
        Ok(self.holder()?.snap.sequence())
    }

    /// Releases the snapshot (iterators made from it keep their view).
    fn close(&self) {
        self.snap.write().take();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close();
        false
    }
}

/// One batched MultiGet of `keys` (borrowed from the Python objects, not
/// copied) with the GIL released; values in the order of the keys.
fn multi_get(
    py: Python<'_>,
    db: &KvDB,
    ro: &ReadOptions,
    keys: &[Bound<'_, PyBytes>],
) -> PyResult<Vec<Option<Py<PyBytes>>>> {
    let keys: Vec<&[u8]> = keys.iter().map(|k| k.as_bytes()).collect();
    let got = py.detach(|| db.batched_multi_get_opt(keys.iter(), false, ro));
    got.into_iter()
        .map(|r| {
            r.map(|v| v.map(|v| PyBytes::new(py, &v).unbind()))
                .map_err(err)
        })
        .collect()
}

/// A Strata database.
///
/// `DB(path, *, create_if_missing=True, **options)` opens (or creates) the
/// database in directory `path`. Options are named as the `rocksdb` crate's
/// setters without `set_` (`write_buffer_size=64 << 20`,
/// `compression_type="zstd"`, `bloom_filter=10.0`, `block_cache=1 << 30`,
/// ...; the full list is `docs/options_file.md`); an unknown name is a
/// `TypeError`. Keys and values are `bytes`. A `DB` may be shared by threads;
/// it is closed by `close()` or at the end of a `with` block.
#[pyclass(module = "strata_kv", name = "DB")]
struct PyDB {
    db: RwLock<Option<Arc<KvDB>>>,
    path: String,
}

impl PyDB {
    fn db(&self) -> PyResult<Arc<KvDB>> {
        self.db.read().clone().ok_or_else(closed)
    }
}

#[pymethods]
impl PyDB {
    #[new]
    #[pyo3(signature = (path, *, create_if_missing=true, read_only=false, **options))]
    fn open(
        py: Python<'_>,
        path: std::path::PathBuf,
        create_if_missing: bool,
        read_only: bool,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyDB> {
        let opts = options_from_kwargs(create_if_missing, options)?;
        let db = py
            .detach(|| {
                if read_only {
                    KvDB::open_for_read_only(&opts, &path, false)
                } else {
                    KvDB::open(&opts, &path)
                }
            })
            .map_err(err)?;
        Ok(PyDB {
            db: RwLock::new(Some(Arc::new(db))),
            path: path.display().to_string(),
        })
    }

    /// The database directory.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// True once `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.db.read().is_none()
    }

    /// The value of `key`, or `default` (None) if absent.
    #[pyo3(signature = (key, default=None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &[u8],
        default: Option<Py<PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let db = self.db()?;
        let v = py.detach(|| db.get_pinned(key)).map_err(err)?;
        Ok(match v {
            Some(v) => Some(PyBytes::new(py, &v).into_any().unbind()),
            None => default,
        })
    }

    /// Sets `key` to `value`.
    #[pyo3(signature = (key, value, *, sync=false, disable_wal=false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &[u8],
        value: &[u8],
        sync: bool,
        disable_wal: bool,
    ) -> PyResult<()> {
        let db = self.db()?;
        let wo = write_options(sync, disable_wal);
        py.detach(|| db.put_opt(key, value, &wo)).map_err(err)
    }

    /// Deletes `key` (no error if absent).
    #[pyo3(signature = (key, *, sync=false, disable_wal=false))]
    fn delete(&self, py: Python<'_>, key: &[u8], sync: bool, disable_wal: bool) -> PyResult<()> {
        let db = self.db()?;
        let wo = write_options(sync, disable_wal);
        py.detach(|| db.delete_opt(key, &wo)).map_err(err)
    }

    /// Deletes every key in `[start, end)` with one write, however many
    /// keys the range holds. `start == end` deletes nothing; `start` after
    /// `end` raises InvalidArgumentError.
    #[pyo3(signature = (start, end, *, sync=false, disable_wal=false))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &[u8],
        end: &[u8],
        sync: bool,
        disable_wal: bool,
    ) -> PyResult<()> {
        let db = self.db()?;
        let wo = write_options(sync, disable_wal);
        py.detach(|| db.delete_range_opt(start, end, &wo))
            .map_err(err)
    }

    /// Merges `value` into `key` with the database's `merge_operator`
    /// (NotSupportedError without one).
    #[pyo3(signature = (key, value, *, sync=false, disable_wal=false))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &[u8],
        value: &[u8],
        sync: bool,
        disable_wal: bool,
    ) -> PyResult<()> {
        let db = self.db()?;
        let wo = write_options(sync, disable_wal);
        py.detach(|| db.merge_opt(key, value, &wo)).map_err(err)
    }

    fn __getitem__(&self, py: Python<'_>, key: &[u8]) -> PyResult<Py<PyAny>> {
        self.get(py, key, None)?
            .ok_or_else(|| PyKeyError::new_err(PyBytes::new(py, key).unbind()))
    }

    fn __setitem__(&self, py: Python<'_>, key: &[u8], value: &[u8]) -> PyResult<()> {
        self.put(py, key, value, false, false)
    }

    /// Deletes `key`; as `delete`, no error if absent (checking would cost a read).
    fn __delitem__(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        self.delete(py, key, false, false)
    }

    fn __contains__(&self, py: Python<'_>, key: &[u8]) -> PyResult<bool> {
        Ok(self.get(py, key, None)?.is_some())
    }

    /// Iterates over the keys, as `keys()`.
    fn __iter__(&self) -> PyResult<RangeIterator> {
        self.keys(None, None, false)
    }

    /// Applies `batch` atomically.
    #[pyo3(signature = (batch, *, sync=false, disable_wal=false))]
    fn write(
        &self,
        py: Python<'_>,
        batch: &WriteBatch,
        sync: bool,
        disable_wal: bool,
    ) -> PyResult<()> {
        let db = self.db()?;
        let b = batch.batch.lock().clone();
        let wo = write_options(sync, disable_wal);
        py.detach(|| db.write_opt(b, &wo)).map_err(err)
    }

    /// A batch that this database writes when its `with` block ends without
    /// an exception.
    #[pyo3(signature = (*, sync=false, disable_wal=false))]
    fn write_batch(&self, sync: bool, disable_wal: bool) -> PyResult<WriteBatch> {
        Ok(WriteBatch {
            batch: Mutex::new(KvBatch::default()),
            target: Mutex::new(Some((self.db()?, sync, disable_wal))),
        })
    }

    /// The values of `keys` (None where absent), in the order given; one
    /// batched lookup.
    fn multi_get(
        &self,
        py: Python<'_>,
        keys: Vec<Bound<'_, PyBytes>>,
    ) -> PyResult<Vec<Option<Py<PyBytes>>>> {
        let db = self.db()?;
        multi_get(py, &db, &ReadOptions::default(), &keys)
    }

    /// `(key, value)` pairs with `start <= key < stop` (either may be None),
    /// in key order, or reversed with `reverse=True`.
    #[pyo3(signature = (start=None, stop=None, reverse=false))]
    fn items(
        &self,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        reverse: bool,
    ) -> PyResult<RangeIterator> {
        Ok(range_iter(
            self.db()?,
            None,
            start,
            stop,
            reverse,
            Yield::Items,
        ))
    }

    /// Keys with `start <= key < stop`, as `items()`.
    #[pyo3(signature = (start=None, stop=None, reverse=false))]
    fn keys(
        &self,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        reverse: bool,
    ) -> PyResult<RangeIterator> {
        Ok(range_iter(
            self.db()?,
            None,
            start,
            stop,
            reverse,
            Yield::Keys,
        ))
    }

    /// Values of keys with `start <= key < stop`, as `items()`.
    #[pyo3(signature = (start=None, stop=None, reverse=false))]
    fn values(
        &self,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
        reverse: bool,
    ) -> PyResult<RangeIterator> {
        Ok(range_iter(
            self.db()?,
            None,
            start,
            stop,
            reverse,
            Yield::Values,
        ))
    }

    /// A raw iterator (`seek`, `next`, `prev`, `next_prefix`, ...),
    /// optionally bounded to `lower_bound <= key < upper_bound`.
    #[pyo3(signature = (lower_bound=None, upper_bound=None))]
    fn iterator(
        &self,
        lower_bound: Option<&[u8]>,
        upper_bound: Option<&[u8]>,
    ) -> PyResult<RawIterator> {
        let holder = IterHolder::new(self.db()?, None, bounds(lower_bound, upper_bound));
        Ok(RawIterator {
            holder: Mutex::new(holder),
        })
    }

    /// A consistent read-only view as of now.
    fn snapshot(&self) -> PyResult<PySnapshot> {
        Ok(PySnapshot {
            snap: RwLock::new(Some(Arc::new(SnapHolder::new(self.db()?)))),
        })
    }

    /// Writes the memtable to a table file and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.db()?;
        py.detach(|| db.flush()).map_err(err)
    }

    /// Compacts the keys in `[start, stop]` (None: unbounded) down the levels.
    #[pyo3(signature = (start=None, stop=None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        start: Option<&[u8]>,
        stop: Option<&[u8]>,
    ) -> PyResult<()> {
        let db = self.db()?;
        py.detach(|| db.compact_range(start, stop)).map_err(err)
    }

    /// The value of a database property (`"rocksdb.stats"`,
    /// `"rocksdb.num-files-at-level0"`, ...), or None if unknown.
    fn property(&self, py: Python<'_>, name: &str) -> PyResult<Option<String>> {
        let db = self.db()?;
        py.detach(|| db.property_value(name)).map_err(err)
    }

    /// Closes the database: later calls raise; iterators and snapshots
    /// already made keep it open until they are gone.
    fn close(&self, py: Python<'_>) {
        let db = self.db.write().take();
        // Dropping the last handle waits for background work: off the GIL.
        py.detach(move || drop(db));
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        format!("<strata_kv.DB {:?} ({state})>", self.path)
    }
}

/// Deletes the database in `path` (refuses a directory that holds files
/// but no database).
#[pyfunction]
fn destroy(py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
    py.detach(|| KvDB::destroy(&Options::default(), &path))
        .map_err(err)
}

#[pymodule]
fn _strata_kv(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyDB>()?;
    m.add_class::<WriteBatch>()?;
    m.add_class::<PySnapshot>()?;
    m.add_class::<RawIterator>()?;
    m.add_class::<RangeIterator>()?;
    m.add_function(wrap_pyfunction!(destroy, m)?)?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add("IOError", py.get_type::<IOError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("NotSupportedError", py.get_type::<NotSupportedError>())?;
    Ok(())
}
