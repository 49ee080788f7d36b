//! Direct I/O (`set_use_direct_reads`, `set_use_direct_io_for_flush_and_compaction`)
//! on the real file system of the temporary directory: tables written and
//! read with `O_DIRECT` hold what a `BTreeMap` model holds, through
//! flushes, compactions, reopens and scans both ways, and the open table
//! files really carry `O_DIRECT` (read from `/proc/self/fdinfo`).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::{BlockBasedOptions, DBRawIterator, Error, IteratorMode, Options, ReadOptions, DB};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-direct-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn options(reads: bool, writes: bool) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(32 << 10);
    opts.set_target_file_size_base(32 << 10);
    opts.set_max_bytes_for_level_base(128 << 10);
    opts.set_use_direct_reads(reads);
    opts.set_use_direct_io_for_flush_and_compaction(writes);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(1024);
    t.set_bloom_filter(10.0, false);
    t.set_block_cache(&strata_kv::Cache::new_lru_cache(64 << 10));
    opts.set_block_based_table_factory(&t);
    opts
}

/// The table files this process has open, with whether each was opened
/// with `O_DIRECT` (octal 040000 in its fdinfo flags on x86-64 and most
/// Linux ports).
fn open_tables() -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if target.extension().is_none_or(|e| e != "sst") {
            continue;
        }
        let fd = entry.file_name().to_string_lossy().into_owned();
        let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
            continue;
        };
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
            .expect("fdinfo has flags");
        out.push((target.display().to_string(), flags & 0o40000 != 0));
    }
    out
}

/// `n` random writes to `db` and `model`: keys `step` times one of 0 to
/// 40,000 (eight digits), deleted with odds `deletes`, otherwise given
/// values of up to `max_value` random bytes.
fn write_random(
    db: &DB,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut StdRng,
    n: usize,
    step: u32,
    deletes: f64,
    max_value: usize,
) {
    for _ in 0..n {
        let k = format!("{:08}", rng.gen_range(0..40_000u32) * step).into_bytes();
        if rng.gen_bool(deletes) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v: Vec<u8> = (0..rng.gen_range(0..max_value))
                .map(|_| rng.gen())
                .collect();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

fn check(db: &DB, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut StdRng, what: &str) {
    let forward: Vec<(Vec<u8>, Vec<u8>)> = db
        .iterator(IteratorMode::Start)
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert!(
        forward == model.clone().into_iter().collect::<Vec<_>>(),
        "{what}: forward scan"
    );
    let backward = db.iterator(IteratorMode::End).count();
    assert_eq!(backward, model.len(), "{what}: backward scan");
    for _ in 0..2000 {
        let k = format!("{:08}", rng.gen_range(0..40_000u32)).into_bytes();
        assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "{what}");
    }
}

fn supports_direct_io(dir: &Path) -> bool {
    // Creating a database with direct I/O fails at open where the file
    // system refuses O_DIRECT, with NotSupported naming the file.
    match DB::open(&options(true, true), dir) {
        Ok(_) => true,
        Err(Error::NotSupported(what)) => {
            assert!(what.contains("O_DIRECT"), "{what}");
            eprintln!("{}: no O_DIRECT here: {what}", dir.display());
            false
        }
        Err(e) => panic!("{e}"),
    }
}

/// A fresh scratch directory named `name`, or None (and nothing left
/// behind) where its file system refuses `O_DIRECT` (tmpfs).
fn direct_dir(name: &str) -> Option<PathBuf> {
    let dir = scratch(name);
    if supports_direct_io(&dir) {
        return Some(dir);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    None
}

#[test]
fn direct_reads_and_writes_keep_the_model() {
    let Some(dir) = direct_dir("model") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = BTreeMap::new();
    // Written with direct I/O, read without; then the other way round;
    // then both.
    for (round, (reads, writes)) in [(false, true), (true, false), (true, true)]
        .into_iter()
        .enumerate()
    {
        let db = DB::open(&options(reads, writes), &dir).unwrap();
        write_random(&db, &mut model, &mut rng, 15_000, 1, 0.2, 120);
        db.flush().unwrap();
        db.wait_for_compact().unwrap();
        check(&db, &model, &mut rng, &format!("round {round}"));
        let tables = open_tables();
        let mine: Vec<&(String, bool)> = tables
            .iter()
            .filter(|(p, _)| p.starts_with(&*dir.to_string_lossy()))
            .collect();
        assert!(!mine.is_empty(), "round {round}: no table open");
        for (path, direct) in mine {
            assert_eq!(
                *direct, reads,
                "round {round}: {path} opened with O_DIRECT = {direct}"
            );
        }
        drop(db);
    }
    let mut opts = options(true, true);
    opts.set_compaction_readahead_size(256 << 10);
    let db = DB::open(&opts, &dir).unwrap();
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.ends_with(".dbtmp")),
        "the open's probe was left: {names:?}"
    );
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    check(&db, &model, &mut rng, "after compact_range");
    drop(db);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// [`layered`]'s options: direct I/O, 512-byte blocks, a 32 KiB cache, no
/// bloom filter, compactions off.
fn layered_options() -> Options {
    layered_options_with(|_| {})
}

/// [`layered_options`] with `more` applied to its table options.
fn layered_options_with(more: impl FnOnce(&mut BlockBasedOptions)) -> Options {
    let mut opts = options(true, true);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(512);
    t.set_block_cache(&strata_kv::Cache::new_lru_cache(32 << 10));
    more(&mut t);
    opts.set_block_based_table_factory(&t);
    opts.set_disable_auto_compactions(true);
    opts
}

/// A database whose keys lie in L0 files and in two or more deeper levels,
/// read with direct I/O, no bloom filter (db_bench's default) and a small
/// cache: each seek and get then reads blocks of several levels, which it
/// reads at once before it seeks (`SeekReads`).
fn layered(dir: &Path, rng: &mut StdRng) -> BTreeMap<Vec<u8>, Vec<u8>> {
    layered_with(dir, rng, layered_options())
}

/// [`layered_options`] with 7-byte prefixes (ten keys of `{:08}` each) and
/// a bloom filter, which then holds the prefixes.
fn prefix_options() -> Options {
    let mut opts = layered_options_with(|t| t.set_bloom_filter(10.0, false));
    opts.set_prefix_extractor(strata_kv::SliceTransform::create_fixed_prefix(7));
    opts
}

/// [`layered`] with the given options.
fn layered_with(dir: &Path, rng: &mut StdRng, mut opts: Options) -> BTreeMap<Vec<u8>, Vec<u8>> {
    opts.set_disable_auto_compactions(false);
    let mut model = BTreeMap::new();
    let db = DB::open(&opts, dir).unwrap();
    write_random(&db, &mut model, rng, 30_000, 2, 0.1, 60);
    db.flush().unwrap();
    db.wait_for_compact().unwrap();
    drop(db);
    // Then L0 files that stay: no compaction runs.
    opts.set_disable_auto_compactions(true);
    let db = DB::open(&opts, dir).unwrap();
    for _ in 0..3 {
        write_random(&db, &mut model, rng, 2_000, 2, 0.1, 60);
        db.flush().unwrap();
    }
    let levels = common::files_per_level(&db);
    assert!(levels[0] >= 3, "files per level: {levels:?}");
    assert!(
        levels[1..].iter().filter(|&&n| n > 0).count() >= 2,
        "files per level: {levels:?}"
    );
    model
}

/// Checks that `it` is at the first entry of `expect` (or invalid when
/// there is none), then `steps` times that `step` moves it to the next.
fn check_steps<'m, 'd>(
    it: &mut DBRawIterator<'d>,
    mut expect: impl Iterator<Item = (&'m Vec<u8>, &'m Vec<u8>)>,
    steps: usize,
    step: fn(&mut DBRawIterator<'d>),
    what: &str,
    round: usize,
) {
    for i in 0..=steps {
        if i > 0 {
            step(it);
        }
        it.status().unwrap();
        let want = expect.next();
        assert_eq!(
            it.key().map(|k| k.to_vec()),
            want.map(|(k, _)| k.clone()),
            "{what} {round}, step {i}"
        );
        match want {
            Some((_, v)) => assert_eq!(it.value(), Some(&v[..]), "{what} {round}, step {i}"),
            None => return,
        }
    }
}

#[test]
fn seeks_and_gets_that_read_levels_at_once_keep_the_model() {
    let Some(dir) = direct_dir("levels") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(29);
    let model = layered(&dir, &mut rng);
    let opts = layered_options();
    let db = DB::open(&opts, &dir).unwrap();
    let mut it = db.raw_iterator();
    for round in 0..4000 {
        // Present keys are even, absent ones odd; some past the end.
        let k = format!("{:08}", rng.gen_range(0..80_400u32)).into_bytes();
        assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "get {round}");
        it.seek(&k);
        let steps = rng.gen_range(0..4);
        // A few steps on, across blocks and files.
        let expect = model.range(k.clone()..);
        check_steps(&mut it, expect, steps, DBRawIterator::next, "seek", round);
        // The reverse seek reads the same blocks at once.
        it.seek_for_prev(&k);
        let expect = model.range(..=k.clone()).rev();
        check_steps(
            &mut it,
            expect,
            steps,
            DBRawIterator::prev,
            "seek_for_prev",
            round,
        );
    }
    // MultiGet reads each table's missing blocks of a batch at once.
    for round in 0..300 {
        // Random keys, or a run of neighbours (blocks back to back).
        let n = rng.gen_range(1..64);
        let start = rng.gen_range(0..80_400u32);
        let keys: Vec<Vec<u8>> = (0..n)
            .map(|i| match round % 2 {
                0 => rng.gen_range(0..80_400u32),
                _ => start + 2 * i,
            })
            .map(|k| format!("{k:08}").into_bytes())
            .collect();
        let got = db.batched_multi_get(keys.iter(), false);
        for (k, r) in keys.iter().zip(got) {
            let r = r.unwrap().map(|v| v.to_vec());
            assert_eq!(r, model.get(k).cloned(), "multi_get {round}");
        }
    }
    drop(it);
    drop(db);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Prefix seeks (`prefix_same_as_start`) read the blocks of the tables
/// whose filters let the prefix through at once, and see exactly the
/// model's keys of the prefix from the target on.
#[test]
fn prefix_seeks_that_read_levels_at_once_keep_the_model() {
    let Some(dir) = direct_dir("prefix") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(37);
    let model = layered_with(&dir, &mut rng, prefix_options());
    let db = DB::open(&prefix_options(), &dir).unwrap();
    let mut ro = ReadOptions::default();
    ro.set_prefix_same_as_start(true);
    let mut it = db.raw_iterator_opt(ro);
    let mut seen = 0;
    for round in 0..3000 {
        let k = format!("{:08}", rng.gen_range(0..80_400u32)).into_bytes();
        it.seek(&k);
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .range(k.clone()..)
            .take_while(|(m, _)| m[..7] == k[..7])
            .map(|(m, v)| (m.clone(), v.clone()))
            .collect();
        let mut got = Vec::new();
        while it.valid() {
            got.push((it.key().unwrap().to_vec(), it.value().unwrap().to_vec()));
            it.next();
        }
        it.status().unwrap();
        assert_eq!(got, want, "prefix seek {round}");
        seen += got.len();
    }
    assert!(seen > 1000, "the seeks found {seen} entries");
    drop(it);
    drop(db);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A data block that fails its checksum is never read around: a seek or a
/// get that needs it reports `Corruption` naming the table, whether the
/// block was read ahead with others or alone; every other answer is the
/// model's.
#[test]
fn a_corrupt_block_read_with_others_is_an_error_not_an_answer() {
    let Some(dir) = direct_dir("corrupt") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(31);
    let model = layered(&dir, &mut rng);
    // The largest table: a deeper level's. One byte of its first data
    // block flipped.
    let table = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[40] ^= 0x55;
    std::fs::write(&table, &bytes).unwrap();
    let name = table.file_name().unwrap().to_string_lossy().into_owned();
    let opts = layered_options();
    let db = DB::open(&opts, &dir).unwrap();
    let corrupt = |e: &Error, what: &str| {
        assert!(
            matches!(e, Error::Corruption { .. }) && e.to_string().contains(&name),
            "{what}: {e}"
        );
    };
    let (mut get_errors, mut seek_errors) = (0, 0);
    let mut it = db.raw_iterator();
    for k in (0..80_000u32)
        .step_by(2)
        .map(|k| format!("{k:08}").into_bytes())
    {
        match db.get(&k) {
            Ok(v) => assert_eq!(v, model.get(&k).cloned(), "get"),
            Err(e) => {
                corrupt(&e, "get");
                get_errors += 1;
            }
        }
        it.seek(&k);
        match it.status() {
            Ok(()) => assert_eq!(
                it.key().map(|k| k.to_vec()),
                model.range(k.clone()..).next().map(|(k, _)| k.clone()),
                "seek"
            ),
            Err(e) => {
                corrupt(&e, "seek");
                seek_errors += 1;
            }
        }
    }
    assert!(
        get_errors > 0 && seek_errors > 0,
        "gets {get_errors}, seeks {seek_errors}"
    );
    drop(it);
    drop(db);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With direct reads, data blocks are cached as stored, compressed, by
/// default (`set_cache_compressed_under_direct_reads`): gets, MultiGet and
/// scans both ways of compressible data keep the model with the setting on
/// and off, and the cache takes well under the memory for the same blocks
/// with it on.
#[test]
fn blocks_cached_compressed_under_direct_reads_keep_the_model() {
    let Some(dir) = direct_dir("stored") else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(41);
    let mut model = BTreeMap::new();
    {
        let db = DB::open(&options(true, true), &dir).unwrap();
        for _ in 0..30_000 {
            let k = rng.gen_range(0..40_000u32);
            let v = format!("value {k} ").repeat(rng.gen_range(1..8));
            db.put(format!("{k:08}"), &v).unwrap();
            model.insert(format!("{k:08}").into_bytes(), v.into_bytes());
        }
        db.flush().unwrap();
        db.wait_for_compact().unwrap();
    }
    let mut usage = Vec::new();
    for on in [true, false] {
        let what = format!("stored {on}");
        let mut opts = options(true, true);
        let cache = strata_kv::Cache::new_lru_cache(64 << 20);
        let mut t = BlockBasedOptions::default();
        t.set_block_size(1024);
        t.set_bloom_filter(10.0, false);
        t.set_block_cache(&cache);
        t.set_cache_compressed_under_direct_reads(on);
        opts.set_block_based_table_factory(&t);
        let db = DB::open(&opts, &dir).unwrap();
        // Twice: first into the cache, then from it.
        for _ in 0..2 {
            check(&db, &model, &mut rng, &what);
            let keys: Vec<String> = (0..100)
                .map(|_| format!("{:08}", rng.gen_range(0..40_000u32)))
                .collect();
            for (k, r) in keys.iter().zip(db.batched_multi_get(keys.iter(), false)) {
                let got = r.unwrap().map(|v| v.to_vec());
                assert_eq!(got, model.get(k.as_bytes()).cloned(), "{what}: {k}");
            }
        }
        usage.push(cache.get_usage());
    }
    assert!(
        usage[0] * 4 < usage[1] * 3,
        "cache usage on, off: {usage:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With direct reads, a get reads from the device only from the first
/// table whose block the cache lacks (with the deeper tables' blocks at
/// once): a key found in a cached block of a newer table reads no block
/// of the older tables, and a key that is not there still reads them.
#[test]
fn a_get_answered_from_a_cached_block_reads_no_older_block() {
    let Some(dir) = direct_dir("cached-first") else {
        return;
    };
    let old = |k: u32| format!("old {k} ").repeat(4).into_bytes();
    {
        let db = DB::open(&layered_options(), &dir).unwrap();
        for k in 0..5000u32 {
            db.put(format!("{k:08}"), old(k)).unwrap();
        }
        db.flush().unwrap();
        // A newer table of one block, over most of the older tables' keys.
        db.put("00000010", "new 10").unwrap();
        db.put("00004000", "new 4000").unwrap();
        db.flush().unwrap();
        let levels = common::files_per_level(&db);
        assert!(levels[0] >= 2, "files per level: {levels:?}");
    }
    let cache = strata_kv::Cache::new_lru_cache(4 << 20);
    let opts = layered_options_with(|t| t.set_block_cache(&cache));
    let db = DB::open(&opts, &dir).unwrap();
    let get = |k: &str| db.get(k).unwrap();
    // Reads the newer table's block (and, at once, the older one's).
    assert_eq!(get("00000010"), Some(b"new 10".to_vec()));
    let usage = cache.get_usage();
    assert!(usage > 0);
    // Found in the cached block: the older table holding 4000 is not read.
    assert_eq!(get("00004000"), Some(b"new 4000".to_vec()));
    assert_eq!(
        cache.get_usage(),
        usage,
        "a get found in the cache read more"
    );
    // Not in the newer table: the older table's block is read.
    assert_eq!(get("00002000"), Some(old(2000)));
    assert!(cache.get_usage() > usage);
    assert_eq!(get("00002001"), Some(old(2001)));
    assert_eq!(get("00009999"), None);
    drop(db);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Scans over tables of several 256 KiB windows read with direct I/O, whose
/// next windows are read in the background: whole scans, scans from random
/// seeks, scans over partly cached tables, and iterators dropped halfway
/// give the model's entries.
#[test]
fn scans_that_read_ahead_in_the_background_keep_the_model() {
    let Some(dir) = direct_dir("background") else {
        return;
    };
    let mut opts = options(true, false);
    opts.set_write_buffer_size(4 << 20);
    opts.set_target_file_size_base(8 << 20);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(4096);
    t.set_block_cache(&strata_kv::Cache::new_lru_cache(1 << 20));
    opts.set_block_based_table_factory(&t);
    let mut rng = StdRng::seed_from_u64(17);
    let mut model = BTreeMap::new();
    let db = DB::open(&opts, &dir).unwrap();
    write_random(&db, &mut model, &mut rng, 30_000, 1, 0.05, 300);
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    let tables = open_tables();
    let big = tables
        .iter()
        .filter(|(p, direct)| p.starts_with(&*dir.to_string_lossy()) && *direct)
        .filter(|(p, _)| std::fs::metadata(p).unwrap().len() > 3 * (256 << 10))
        .count();
    assert!(big > 0, "no table of several windows: {tables:?}");
    for round in 0..3 {
        check(&db, &model, &mut rng, &format!("round {round}"));
        // Seeks, each followed by a run of steps long enough to cross
        // windows; every other iterator dropped halfway through its run.
        let mut it = db.raw_iterator();
        for seek in 0..20 {
            let k = format!("{:08}", rng.gen_range(0..40_000u32)).into_bytes();
            it.seek(&k);
            let steps = if seek % 2 == 0 { 3_000 } else { 300 };
            check_steps(
                &mut it,
                model.range(k..),
                steps,
                |i| i.next(),
                "seek",
                round,
            );
        }
        drop(it);
        // Some blocks cached by random gets before the next round's scan.
        for _ in 0..3_000 {
            let k = format!("{:08}", rng.gen_range(0..40_000u32)).into_bytes();
            assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned());
        }
    }
    assert!(
        thread_names().iter().any(|n| n.starts_with("strata-read")),
        "no background read was made: {:?}",
        thread_names()
    );
    drop(db);
    std::fs::remove_dir_all(&dir).unwrap();
}
