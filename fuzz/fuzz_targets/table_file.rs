//! Any bytes as a table file of either format: describing, verifying and
//! scanning it give an answer or an error, never a panic or an endless
//! loop.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata_kv::env::{FileSystem, MemFileSystem};
use strata_kv::{BytewiseComparator, Comparator};

fuzz_target!(|data: &[u8]| {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/f")).unwrap();
    let path = Path::new("/f/000001.sst");
    strata_kv::env::write_file_atomic(&fs, path, data).unwrap();
    let cmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
    let file = || fs.open_random_access(path).unwrap();
    let _ = strata_kv::sst::describe_table(file(), "t", cmp.clone());
    let _ = strata_kv::sst::verify_table(file(), "t", cmp.clone());
    if let Ok(mut it) = strata_kv::sst::table_entries(file(), "t", cmp) {
        it.seek_to_first();
        let mut n = 0;
        while it.valid() && n < 100_000 {
            let _ = (it.key(), it.value());
            it.next();
            n += 1;
        }
        let _ = it.status();
        it.seek_to_last();
        while it.valid() && n < 200_000 {
            it.prev();
            n += 1;
        }
    }
});
