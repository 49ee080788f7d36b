//! Bit flips in a table, a log and a manifest: each is detected as a
//! `Corruption` error that names the damaged file, or (for a log tail in a
//! mode that tolerates one) dropped as `docs/format/wal.md` says, and a
//! damaged byte is never returned as data.
//!
//! Flip positions come from a seeded generator; `STRATA_CORRUPTION_TRIALS`
//! raises the number of flips per file kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::{read_file_to_vec, FileSystem, MemFileSystem};
use strata_kv::{
    BlockBasedOptions, DBCompressionType, DBRecoveryMode, Error, IteratorMode, Options, DB,
};

const DB_DIR: &str = "/db";

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
/// Every file of a database and its bytes.
type Saved = Vec<(PathBuf, Vec<u8>)>;

fn trials(default: usize) -> usize {
    std::env::var("STRATA_CORRUPTION_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn options(fs: &MemFileSystem) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    opts.set_disable_auto_compactions(true);
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.disable_cache();
    opts.set_block_based_table_factory(&table);
    opts
}

fn files_ending(fs: &MemFileSystem, suffix: &str) -> Vec<PathBuf> {
    let mut names: Vec<String> = fs
        .list(Path::new(DB_DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(suffix) || n.starts_with(suffix))
        .collect();
    names.sort();
    names.iter().map(|n| Path::new(DB_DIR).join(n)).collect()
}

fn flip_bit(fs: &MemFileSystem, path: &Path, bit: u64) {
    let mut bytes = read_file_to_vec(fs, path).unwrap();
    bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
    let mut f = fs.create(path).unwrap();
    f.append(&bytes).unwrap();
    f.sync().unwrap();
}

/// A copy of every file of the database, to restore between trials.
fn save(fs: &MemFileSystem) -> Saved {
    fs.list(Path::new(DB_DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n != "LOCK")
        .map(|n| {
            let p = Path::new(DB_DIR).join(n);
            let bytes = read_file_to_vec(fs, &p).unwrap();
            (p, bytes)
        })
        .collect()
}

fn restore(saved: &[(PathBuf, Vec<u8>)]) -> MemFileSystem {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new(DB_DIR)).unwrap();
    for (p, bytes) in saved {
        let mut f = fs.create(p).unwrap();
        f.append(bytes).unwrap();
    }
    fs
}

fn assert_corruption_in(e: &Error, file: &Path, what: &str) {
    match e {
        Error::Corruption { file: named, .. } => assert!(
            named.ends_with(&*file.file_name().unwrap().to_string_lossy()),
            "{what}: corruption names {named}, not {}",
            file.display()
        ),
        e => panic!(
            "{what}: expected Corruption naming {}, got {e}",
            file.display()
        ),
    }
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:05}-{}", "x".repeat((i % 97) as usize)).into_bytes()
}

#[test]
fn table_bit_flips_are_detected_and_never_returned() {
    for compression in [DBCompressionType::None, DBCompressionType::Snappy] {
        let fs = MemFileSystem::new();
        let mut opts = options(&fs);
        opts.set_compression_type(compression);
        let mut model = Model::new();
        {
            let db = DB::open(&opts, DB_DIR).unwrap();
            for i in 0..600u32 {
                let k = format!("key{i:05}").into_bytes();
                db.put(&k, value(i)).unwrap();
                model.insert(k, value(i));
            }
            db.flush().unwrap();
        }
        let saved = save(&fs);
        let mut rng = StdRng::seed_from_u64(compression as u64);
        for trial in 0..trials(30) {
            let fs = restore(&saved);
            let table = files_ending(&fs, ".sst").pop().expect("one table");
            let bits = fs.file_size(&table).unwrap() * 8;
            let bit = rng.gen_range(0..bits);
            flip_bit(&fs, &table, bit);
            let what = format!("{compression:?}, trial {trial}, bit {bit} of {bits}");
            let opts = {
                let mut o = options(&fs);
                o.set_compression_type(compression);
                o
            };
            let db = DB::open(&opts, DB_DIR).unwrap_or_else(|e| panic!("{what}: open: {e}"));
            let mut detected = false;
            for (k, v) in &model {
                match db.get(k) {
                    Ok(got) => assert_eq!(got.as_ref(), Some(v), "{what}: wrong data"),
                    Err(e) => {
                        assert_corruption_in(&e, &table, &what);
                        detected = true;
                    }
                }
            }
            let mut expected = model.iter();
            for item in db.iterator(IteratorMode::Start) {
                match item {
                    Ok((k, v)) => {
                        // Entries before the damage come back in order and intact.
                        let (wk, wv) = expected.next().expect("no extra keys");
                        assert_eq!((&*k, &*v), (&wk[..], &wv[..]), "{what}: wrong data in scan");
                    }
                    Err(e) => {
                        assert_corruption_in(&e, &table, &what);
                        detected = true;
                    }
                }
            }
            assert!(detected, "{what}: flip not detected by gets or a full scan");
        }
    }
}

/// Writes 200 records to one log (one put each, closed without a flush)
/// and returns the model after each write and each record's end offset.
fn log_fixture() -> (Saved, Vec<Model>, Vec<u64>) {
    let fs = MemFileSystem::new();
    let mut opts = options(&fs);
    opts.set_write_buffer_size(64 << 20);
    let db = DB::open(&opts, DB_DIR).unwrap();
    let log = files_ending(&fs, ".log").pop().unwrap();
    let mut states = vec![Model::new()];
    let mut ends = Vec::new();
    for i in 0..200u32 {
        let k = format!("key{:03}", i % 50).into_bytes();
        db.put(&k, value(i)).unwrap();
        let mut m = states.last().unwrap().clone();
        m.insert(k, value(i));
        states.push(m);
        ends.push(fs.file_size(&log).unwrap());
    }
    drop(db);
    (save(&fs), states, ends)
}

fn contents(db: &DB) -> Model {
    db.iterator(IteratorMode::Start)
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

#[test]
fn log_bit_flips_follow_the_recovery_mode() {
    let (saved, states, ends) = log_fixture();
    let mut rng = StdRng::seed_from_u64(11);
    let modes = [
        DBRecoveryMode::TolerateCorruptedTailRecords,
        DBRecoveryMode::AbsoluteConsistency,
        DBRecoveryMode::PointInTimeRecovery,
    ];
    for trial in 0..trials(40) {
        let mode = modes[trial % modes.len()];
        let fs = restore(&saved);
        let log = files_ending(&fs, ".log").pop().unwrap();
        let size = fs.file_size(&log).unwrap();
        assert_eq!(size, *ends.last().unwrap());
        // About a third of the trials damage the last record.
        let last_start = ends[ends.len() - 2];
        let byte = if rng.gen_ratio(1, 3) {
            rng.gen_range(last_start..size)
        } else {
            rng.gen_range(0..last_start)
        };
        flip_bit(&fs, &log, byte * 8 + rng.gen_range(0..8));
        // Records wholly before the damaged one.
        let intact = ends.iter().take_while(|&&end| end <= byte).count();
        let what = format!("{mode:?}, trial {trial}, byte {byte} (record {intact})");
        let mut opts = options(&fs);
        opts.set_wal_recovery_mode(mode);
        let opened = DB::open(&opts, DB_DIR);
        let in_last = intact == ends.len() - 1;
        match (mode, opened) {
            (DBRecoveryMode::TolerateCorruptedTailRecords, Ok(db)) if in_last => {
                assert_eq!(
                    contents(&db),
                    states[intact],
                    "{what}: the torn tail is dropped"
                );
            }
            (DBRecoveryMode::TolerateCorruptedTailRecords, Err(e)) if !in_last => {
                assert_corruption_in(&e, &log, &what)
            }
            (DBRecoveryMode::AbsoluteConsistency, Err(e)) => assert_corruption_in(&e, &log, &what),
            (DBRecoveryMode::PointInTimeRecovery, Ok(db)) => {
                assert_eq!(
                    contents(&db),
                    states[intact],
                    "{what}: recovery stops at the damage"
                );
            }
            (_, Ok(_)) => panic!("{what}: opened without reporting the damage"),
            (_, Err(e)) => panic!("{what}: unexpected error {e}"),
        }
    }
}

#[test]
fn manifest_bit_flips_are_corruption() {
    let fs = MemFileSystem::new();
    let opts = options(&fs);
    {
        let db = DB::open(&opts, DB_DIR).unwrap();
        for round in 0..4u32 {
            for i in 0..100u32 {
                db.put(format!("key{i:03}"), value(round * 100 + i))
                    .unwrap();
            }
            db.flush().unwrap();
        }
        db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    }
    let saved = save(&fs);
    let manifest = files_ending(&fs, "MANIFEST-").pop().unwrap();
    let size = fs.file_size(&manifest).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    for trial in 0..trials(40) {
        let fs = restore(&saved);
        let bit = rng.gen_range(0..size * 8);
        // The length field of the last fragment (bytes 4 and 5 of its
        // header) is left alone: a flip that makes it longer than the file
        // reads exactly as a torn last write, which recovery must accept
        // (see version/manifest_tail.rs).
        if last_fragment_length_field(&fs, &manifest).contains(&(bit / 8)) {
            continue;
        }
        flip_bit(&fs, &manifest, bit);
        let what = format!("trial {trial}, bit {bit} of {}", size * 8);
        match DB::open(&options(&fs), DB_DIR) {
            Ok(_) => panic!("{what}: opened a damaged manifest"),
            Err(e) => assert_corruption_in(&e, &manifest, &what),
        }
    }
    // CURRENT too.
    let fs = restore(&saved);
    let current = Path::new(DB_DIR).join("CURRENT");
    flip_bit(&fs, &current, 8 * 9 + 1);
    let e = DB::open(&options(&fs), DB_DIR).unwrap_err();
    let named = e.to_string();
    assert!(e.is_corruption() && named.contains("CURRENT"), "{named}");
}

/// Byte offsets of the length field of the manifest's last fragment.
fn last_fragment_length_field(fs: &MemFileSystem, manifest: &Path) -> std::ops::Range<u64> {
    const BLOCK: u64 = 32 << 10;
    const HEADER: u64 = 7;
    let bytes = read_file_to_vec(fs, manifest).unwrap();
    let mut pos = 0u64;
    let mut last = 0u64;
    while pos + HEADER <= bytes.len() as u64 {
        if BLOCK - pos % BLOCK < HEADER {
            pos += BLOCK - pos % BLOCK;
            continue;
        }
        let h = &bytes[pos as usize..];
        let len = u64::from(u16::from_le_bytes([h[4], h[5]]));
        last = pos;
        pos += HEADER + len;
    }
    last + 4..last + 6
}

/// A flipped bit in the length field of a fragment that is not the last
/// one can make it reach past the end of the file, which looks like a torn
/// last write; the valid records after it show it is damage.
#[test]
fn log_length_field_flip_before_valid_records_is_corruption() {
    let (saved, _, ends) = log_fixture();
    for record in [0usize, 50, 150, 198] {
        let fs = restore(&saved);
        let log = files_ending(&fs, ".log").pop().unwrap();
        let start = if record == 0 { 0 } else { ends[record - 1] };
        // The high bit of the length's second byte: + 32768.
        flip_bit(&fs, &log, (start + 5) * 8 + 7);
        let mut opts = options(&fs);
        opts.set_wal_recovery_mode(DBRecoveryMode::TolerateCorruptedTailRecords);
        match DB::open(&opts, DB_DIR) {
            Ok(db) => panic!(
                "record {record}: damage before {} valid records was dropped as a torn tail; {} keys left",
                ends.len() - record - 1,
                contents(&db).len()
            ),
            Err(e) => assert_corruption_in(&e, &log, &format!("record {record}")),
        }
    }
}

#[test]
fn a_truncated_table_is_found_at_open_with_both_sizes() {
    let fs = MemFileSystem::new();
    {
        let db = DB::open(&options(&fs), DB_DIR).unwrap();
        for i in 0..2000u32 {
            db.put(i.to_be_bytes(), value(i)).unwrap();
        }
        db.flush().unwrap();
    }
    let table = files_ending(&fs, ".sst").pop().expect("a table");
    let bytes = read_file_to_vec(&fs, &table).unwrap();
    let cut = bytes.len() / 2;
    strata_kv::env::write_file_atomic(&fs, &table, &bytes[..cut]).unwrap();
    let e = DB::open(&options(&fs), DB_DIR).unwrap_err();
    assert_corruption_in(&e, &table, "open");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("truncated to {cut} of the {} bytes", bytes.len())),
        "{msg}"
    );
    // With the check skipped the database opens, and the damage is found
    // by the first read of that table instead, with the same message:
    // never a wrong answer.
    let mut opts = options(&fs);
    opts.set_skip_checking_sst_file_sizes_on_db_open(true);
    let db = DB::open(&opts, DB_DIR).unwrap();
    let e = db.get(7u32.to_be_bytes()).unwrap_err();
    assert_corruption_in(&e, &table, "first read");
    assert_eq!(e.to_string(), msg);
}

/// A table the manifest names but the directory lacks: with paranoid
/// checks (the default) the open is `Corruption` naming it; without, the
/// database opens, keys in other tables and the memtable read as before,
/// and a read that needs the missing table is an error, never "not found".
#[test]
fn a_missing_table_stops_a_paranoid_open_and_fails_only_its_reads_otherwise() {
    let fs = MemFileSystem::new();
    {
        let db = DB::open(&options(&fs), DB_DIR).unwrap();
        for i in 0..1000u32 {
            db.put(i.to_be_bytes(), value(i)).unwrap();
        }
        db.flush().unwrap();
        for i in 1000..2000u32 {
            db.put(i.to_be_bytes(), value(i)).unwrap();
        }
        db.flush().unwrap();
        db.put(5000u32.to_be_bytes(), value(5000)).unwrap();
    }
    let tables = files_ending(&fs, ".sst");
    assert_eq!(tables.len(), 2, "{tables:?}");
    // Tables are numbered in the order they were written: the first holds
    // keys 0..1000.
    fs.remove(&tables[0]).unwrap();
    let e = DB::open(&options(&fs), DB_DIR).unwrap_err();
    assert_corruption_in(&e, &tables[0], "paranoid open");
    assert!(e.to_string().contains("missing"), "{e}");
    let mut opts = options(&fs);
    opts.set_paranoid_checks(false);
    let db = DB::open(&opts, DB_DIR).unwrap();
    assert_eq!(db.get(1500u32.to_be_bytes()).unwrap(), Some(value(1500)));
    assert_eq!(db.get(5000u32.to_be_bytes()).unwrap(), Some(value(5000)));
    let e = db.get(7u32.to_be_bytes()).unwrap_err();
    let name = tables[0].file_name().unwrap().to_str().unwrap();
    assert!(e.to_string().contains(name), "{e}");
    let scan: Result<Vec<_>, _> = db.iterator(strata_kv::IteratorMode::Start).collect();
    assert!(scan.is_err(), "a scan over the missing table must fail");
}

/// `ReadOptions::set_verify_checksums(false)` skips the check of the data
/// blocks a read takes from files: a flipped value byte is then read as it
/// is, where the default read reports `Corruption` naming the file.
#[test]
fn verify_checksums_false_skips_the_data_block_check() {
    let dir = std::env::temp_dir().join(format!("strata-verify-off-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut opts = strata_kv::Options::default();
    opts.create_if_missing(true);
    opts.set_compression_type(strata_kv::DBCompressionType::None);
    let value = vec![b'a'; 100];
    {
        let db = strata_kv::DB::open(&opts, &dir).unwrap();
        db.put(b"key", &value).unwrap();
        db.flush().unwrap();
    }
    let table = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    let at = bytes.windows(100).position(|w| w == &value[..]).unwrap();
    bytes[at + 50] = b'b';
    std::fs::write(&table, bytes).unwrap();
    let db = strata_kv::DB::open(&opts, &dir).unwrap();
    let mut no_check = strata_kv::ReadOptions::default();
    no_check.set_verify_checksums(false);
    // With the cache filled as by default: an unchecked block must not go
    // in, or the checked read below would take it from there.
    let got = db.get_opt(b"key", &no_check).unwrap().unwrap();
    assert_eq!(got[50], b'b');
    let mut it = db.raw_iterator_opt(no_check);
    it.seek_to_first();
    assert_eq!(it.value().map(|v| v[50]), Some(b'b'));
    drop(it);
    match db.get(b"key") {
        Err(strata_kv::Error::Corruption { file, .. }) => assert!(file.contains(".sst"), "{file}"),
        other => panic!("expected Corruption, got {other:?}"),
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
