//! One test per case that `Error`'s documentation names, so the documented
//! variant is the one a caller gets. The byte-flip sweeps in `corruption.rs`
//! and the fault sweeps in `io_errors.rs` cover those two variants in depth.

mod common;

use std::path::Path;
use std::sync::Arc;

use strata_kv::env::{
    FaultInjectionFileSystem, FaultRule, FileLock, FileOp, FileSystem, MemFileSystem,
    RandomAccessFile, SequentialFile, WritableFile,
};
use strata_kv::limits::{KEY_SIZE_BYTES_MAX, LOG_RECORD_SIZE_BYTES_MAX, VALUE_SIZE_BYTES_MAX};
use strata_kv::{BlockBasedOptions, Error, Options, Result, WriteBatch, DB};

fn options(fs: Arc<dyn FileSystem>) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(fs);
    opts
}

fn open_err(opts: &Options, path: &str) -> Error {
    match DB::open(opts, path) {
        Ok(_) => panic!("open {path} succeeded"),
        Err(e) => e,
    }
}

#[test]
fn corruption_names_the_file_and_the_offset() {
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(fs.clone());
    {
        let db = DB::open(&opts, "/db").unwrap();
        for i in 0..100u32 {
            db.put(format!("k{i:03}"), [b'v'; 100]).unwrap();
        }
        db.flush().unwrap();
    }
    let table = common::files_ending(fs.as_ref(), "/db", ".sst")
        .pop()
        .expect("a table");
    let path = Path::new("/db").join(&table);
    let mut bytes = strata_kv::env::read_file_to_vec(fs.as_ref(), &path).unwrap();
    bytes[10] ^= 0x40; // inside the first data block
    strata_kv::env::write_file_atomic(fs.as_ref(), &path, &bytes).unwrap();
    let db = DB::open(&opts, "/db").unwrap();
    let e = db.get(b"k000").unwrap_err();
    let Error::Corruption { file, offset, .. } = &e else {
        panic!("expected Corruption, got {e}");
    };
    assert!(file.ends_with(&table), "{e}");
    assert_eq!(*offset, 0, "the block starts at 0: {e}");
    assert!(e.is_corruption());
}

#[test]
fn io_says_what_was_being_done() {
    let fs = FaultInjectionFileSystem::new(Arc::new(MemFileSystem::new()));
    let opts = options(Arc::new(fs.clone()));
    let db = DB::open(&opts, "/db").unwrap();
    fs.inject(
        FaultRule::new(&[FileOp::Append])
            .path_contains(".log")
            .times(1),
    );
    let e = db.put(b"k", b"v").unwrap_err();
    let Error::Io { context, .. } = &e else {
        panic!("expected Io, got {e}");
    };
    assert!(context.contains(".log"), "{e}");
}

#[test]
fn invalid_argument_for_each_documented_case() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
    let opts = options(fs.clone());
    let expect = |r: Result<()>, needle: &str, case: &str| match r {
        Err(Error::InvalidArgument(what)) => {
            assert!(what.contains(needle), "{case}: {what:?} lacks {needle:?}")
        }
        other => panic!("{case}: expected InvalidArgument, got {other:?}"),
    };
    // A bad option.
    let mut bad = opts.clone();
    bad.set_max_write_buffer_number(1);
    expect(
        DB::open(&bad, "/bad").map(drop),
        "max_write_buffer_number",
        "option",
    );

    // A block size deviation outside 0..=100, over or under.
    for deviation in [101, -1] {
        let mut bad = opts.clone();
        let mut table = BlockBasedOptions::default();
        table.set_block_size_deviation(deviation);
        bad.set_block_based_table_factory(&table);
        expect(
            DB::open(&bad, "/bad").map(drop),
            &format!("block_size_deviation {deviation} must be"),
            "block size deviation",
        );
    }

    // More subcompactions than threads the engine will start for one.
    let mut bad = opts.clone();
    bad.set_max_subcompactions(strata_kv::limits::SUBCOMPACTIONS_MAX + 1);
    expect(
        DB::open(&bad, "/bad").map(drop),
        "max_subcompactions",
        "subcompactions over the limit",
    );
    let mut most = opts.clone();
    most.set_max_subcompactions(strata_kv::limits::SUBCOMPACTIONS_MAX);
    DB::open(&most, "/most").unwrap();

    let db = DB::open(&opts, "/db").unwrap();
    // Oversized key, value and batch; nothing is stored.
    let key = vec![b'k'; KEY_SIZE_BYTES_MAX + 1];
    expect(db.put(&key, b"v"), "key", "oversized key");
    let value = vec![b'v'; VALUE_SIZE_BYTES_MAX + 1];
    expect(db.put(b"k", &value), "value", "oversized value");
    let mut batch = WriteBatch::default();
    batch.put(b"ok", b"v");
    batch.put(&key, b"v");
    expect(db.write(batch), "key", "batch holding an oversized key");
    assert_eq!(db.get(b"ok").unwrap(), None, "half a rejected batch landed");
    let mut batch = WriteBatch::default();
    let big = vec![b'v'; 60 << 20];
    for i in 0..5 {
        batch.put(format!("big{i}"), &big);
    }
    assert!(batch.size_in_bytes() > LOG_RECORD_SIZE_BYTES_MAX);
    expect(db.write(batch), "batch", "batch over the log record limit");
    assert_eq!(db.get(b"big0").unwrap(), None);
    assert_eq!(db.get(b"k").unwrap(), None);
    drop(db);

    // A path that is not a directory.
    fs.create(Path::new("/file")).unwrap().append(b"x").unwrap();
    expect(
        DB::open(&opts, "/file").map(drop),
        "not a directory",
        "regular file",
    );
    // A directory with no database and create_if_missing off.
    fs.create_dir_all(Path::new("/empty")).unwrap();
    let mut no_create = opts.clone();
    no_create.create_if_missing(false);
    expect(
        DB::open(&no_create, "/empty").map(drop),
        "create_if_missing",
        "no database",
    );
    // A directory that holds data (a log) but no database.
    fs.create_dir_all(Path::new("/orphan")).unwrap();
    fs.create(Path::new("/orphan/000007.log"))
        .unwrap()
        .append(b"data")
        .unwrap();
    expect(
        DB::open(&opts, "/orphan").map(drop),
        "no CURRENT file",
        "orphaned log",
    );
    expect(
        DB::destroy(&opts, "/orphan"),
        "no database",
        "destroy without CURRENT",
    );
    assert!(
        fs.exists(Path::new("/orphan/000007.log")),
        "destroy deleted data"
    );
}

/// Says `CURRENT` exists after it was removed: the file vanishing between
/// open's first look and its read.
#[derive(Debug)]
struct CurrentVanishes(MemFileSystem);

impl FileSystem for CurrentVanishes {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.create(path)
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.open_append(path)
    }
    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        self.0.open_sequential(path)
    }
    fn open_random_access(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.0.open_random_access(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.0.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.0.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.0.create_dir_all(dir)
    }
    fn remove_dir(&self, dir: &Path) -> Result<()> {
        self.0.remove_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        path.ends_with("CURRENT") || self.0.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.0.is_dir(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.0.file_size(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.0.lock(path)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.0.sync_dir(dir)
    }
}

#[test]
fn not_found_when_current_vanishes_during_open() {
    let mem = MemFileSystem::new();
    mem.create_dir_all(Path::new("/db")).unwrap();
    let opts = options(Arc::new(CurrentVanishes(mem)));
    let e = open_err(&opts, "/db");
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    assert!(e.is_not_found());
    assert!(e.to_string().contains("CURRENT"), "{e}");
}

#[test]
fn busy_when_the_database_is_open_elsewhere() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFileSystem::new());
    let opts = options(fs);
    let db = DB::open(&opts, "/db").unwrap();
    db.put(b"k", b"v").unwrap();
    let e = open_err(&opts, "/db");
    assert!(matches!(e, Error::Busy(_)), "{e}");
    assert!(e.to_string().contains("LOCK"), "{e}");
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

// `NotSupported` (RocksDB compression names Strata lacks) is
// `db_basic.rs`'s `compression_names_strata_lacks_are_not_supported`; for a
// merge without a merge operator, `merge.rs`'s
// `merge_without_an_operator_is_not_supported`. `MergeFailed` is `merge.rs`'s
// `a_failing_merge_fails_reads_and_compaction_and_loses_nothing`.
