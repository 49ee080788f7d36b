//! Any bytes as a write-ahead log and as a manifest: every record decoded
//! or an error, never a panic, an allocation beyond the format's limits or
//! an endless loop.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use strata_kv::env::{FileSystem, MemFileSystem};

fuzz_target!(|data: &[u8]| {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/f")).unwrap();
    let path = Path::new("/f/000003.log");
    strata_kv::env::write_file_atomic(&fs, path, data).unwrap();
    let _ = strata_kv::dump::wal_records(&fs, path);
    let _ = strata_kv::dump::manifest_records(&fs, path);
});
