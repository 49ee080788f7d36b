//! The packed table reader on hostile bytes. The first input byte picks the
//! mode:
//!
//! - even: the rest is a whole file;
//! - odd: the rest is a recipe: entries built into a valid table by the
//!   project's own writer, then damaged at positions the input names.
//!
//! Either way every open, get, seek and step must give an answer or an
//! error, never a panic, a read outside the file or an endless loop; an
//! undamaged table must read back exactly what was written.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use strata_kv::env::{FileSystem, MemFileSystem};
use strata_kv::iter::InternalIterator;
use strata_kv::sst::packed::{PackedTableBuilder, PackedTableReader};
use strata_kv::key::{InternalKey, ValueKind};
use strata_kv::{BytewiseComparator, Comparator};

fn open(bytes: &[u8], lazy: bool) -> Option<Arc<PackedTableReader>> {
    let fs = MemFileSystem::new();
    let path = Path::new("/f/t.sst");
    fs.create_dir_all(Path::new("/f")).unwrap();
    strata_kv::env::write_file_atomic(&fs, path, bytes).unwrap();
    let file = fs.open_random_access(path).unwrap();
    let cmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
    PackedTableReader::open(&*file, "t.sst", cmp, lazy).ok().map(Arc::new)
}

fn lookup(user: &[u8]) -> Vec<u8> {
    InternalKey::new(user, 1 << 40, ValueKind::FOR_SEEK).encoded().to_vec()
}

/// Reads everything a bounded number of ways; returns the forward scan.
fn exercise(t: &Arc<PackedTableReader>, probes: &[Vec<u8>]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let _ = t.verify();
    let mut it = t.iter();
    let mut scan = Vec::new();
    it.seek_to_first();
    while it.valid() && scan.len() < 100_000 {
        scan.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    let ok = it.status().is_ok();
    it.seek_to_last();
    let mut steps = 0;
    while it.valid() && steps < 100_000 {
        it.prev();
        steps += 1;
    }
    for p in probes {
        let _ = t.get(&lookup(p));
        it.seek(&lookup(p));
        it.seek_for_prev(&lookup(p));
    }
    ok.then_some(scan)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let probes: Vec<Vec<u8>> = rest.chunks(9).take(8).map(|c| c.to_vec()).collect();
    if mode % 2 == 0 {
        for lazy in [false, true] {
            if let Some(t) = open(rest, lazy) {
                exercise(&t, &probes);
            }
        }
        return;
    }
    // Recipe: pairs of (key byte, value length), keys made increasing; a
    // key byte below 16 adds an older version of the previous key.
    let (recipe, damage) = rest.split_at(rest.len().min(64));
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/f")).unwrap();
    let path = Path::new("/f/built.sst");
    let cmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
    let mut b = PackedTableBuilder::new(cmp, fs.create(path).unwrap(), "built.sst");
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let (mut key, mut seq) = (0u64, 1u64 << 30);
    for pair in recipe.chunks_exact(2) {
        let new_key = pair[0] >= 16 || entries.is_empty();
        if new_key {
            key += u64::from(pair[0] % 4) + 1;
        }
        seq -= 1;
        let kind = if pair[1] == 0 { ValueKind::Deletion } else { ValueKind::Value };
        let user = if mode & 2 == 0 { key.to_be_bytes().to_vec() } else { format!("k{key}").into_bytes() };
        let k = InternalKey::new(&user, if mode & 4 == 0 { seq } else { 0 }, kind);
        let v = vec![pair[1]; usize::from(pair[1] % 32)];
        if b.add(k.encoded(), &v).is_ok() {
            entries.push((k.encoded().to_vec(), v));
        }
    }
    b.finish().unwrap();
    let mut bytes = strata_kv::env::read_file_to_vec(&fs, path).unwrap();
    if let Some(t) = open(&bytes, false) {
        assert_eq!(exercise(&t, &probes).as_ref(), Some(&entries), "an undamaged table reads back");
    } else {
        panic!("a table the builder wrote does not open");
    }
    for d in damage.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([d[0], d[1]])) % bytes.len().max(1);
        bytes[at] ^= d[2] | 1;
    }
    for lazy in [false, true] {
        if let Some(t) = open(&bytes, lazy) {
            if let Some(scan) = exercise(&t, &probes) {
                // Damage that no check caught must not change the data.
                if t.verify().is_ok() && !damage.is_empty() {
                    assert_eq!(scan, entries, "undetected damage changed the data");
                }
            }
        }
    }
});
