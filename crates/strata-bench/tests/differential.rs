//! Differential test: the same random operations (puts, deletes, range
//! deletions, batches and merges with a string-append operator) applied to every engine of
//! the build (the BTreeMap model, Strata, and RocksDB with the `rocksdb`
//! feature) must give the same answers: point reads, multi-gets, iterator
//! walks in both directions, full scans; across flushes, compactions and
//! reopens. Small memtables and files make every run reach several levels.
//!
//! Seeds are printed; `DIFF_SEED=n cargo test -p strata-bench --test
//! differential` replays one.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_bench::engine::merge_ops::MergeOperatorKind;
use strata_bench::engine::model::ModelEngine;
use strata_bench::engine::{self, Batch, Engine, EngineConfig, WriteMode};

/// Key space small enough for overwrites, deletes and misses to be common.
const KEY_SPACE: u64 = 600;
const OPS_PER_SEED: usize = 3_000;

fn key(i: u64) -> Vec<u8> {
    // Variable-length keys, so prefixes of other keys occur too.
    let mut k = format!("k{:04}", i).into_bytes();
    if i.is_multiple_of(7) {
        k.truncate(4);
    }
    k
}

fn value(rng: &mut StdRng, seq: usize) -> Vec<u8> {
    let len = rng.gen_range(0..300);
    let mut v = format!("v{seq}-").into_bytes();
    v.resize(len.max(v.len()), b'a' + (seq % 26) as u8);
    v
}

struct Engines {
    /// Label of each engine (`model`, `strata`, `strata+hash`, `rocksdb`).
    names: Vec<String>,
    /// Engine name and options of each, for reopening.
    kinds: Vec<(&'static str, EngineConfig)>,
    dirs: Vec<PathBuf>,
    engines: Vec<Box<dyn Engine>>,
}

impl Engines {
    fn new(root: &Path) -> Engines {
        let mut cfg = EngineConfig::small_for_tests();
        cfg.merge_operator = Some(MergeOperatorKind::StringAppend);
        // Strata twice: with binary search in data blocks, and with the
        // hash index too.
        let mut hash = cfg.clone();
        hash.use_data_block_hash_index = true;
        let mut kinds = vec![("strata", cfg.clone()), ("strata", hash)];
        kinds.extend(
            engine::engine_names()
                .iter()
                .filter(|n| **n != "strata")
                .map(|n| (*n, cfg.clone())),
        );
        let mut es = Engines {
            names: vec!["model".into()],
            kinds: vec![("model", cfg)],
            dirs: vec![root.join("model")],
            engines: vec![Box::new(ModelEngine::with_merge_operator(
                MergeOperatorKind::StringAppend,
            ))],
        };
        for (name, cfg) in kinds {
            let label = if cfg.use_data_block_hash_index {
                format!("{name}+hash")
            } else {
                name.to_string()
            };
            let dir = root.join(&label);
            es.engines
                .push(engine::open(name, &cfg, &dir, true).expect("open"));
            es.names.push(label);
            es.kinds.push((name, cfg));
            es.dirs.push(dir);
        }
        es
    }

    fn reopen(&mut self) {
        for i in 1..self.engines.len() {
            let (name, cfg) = &self.kinds[i];
            // Close before opening again: the directory is locked.
            self.engines[i] = Box::new(ModelEngine::new());
            self.engines[i] = engine::open(name, cfg, &self.dirs[i], false).expect("reopen");
        }
    }
}

fn get(e: &dyn Engine, k: &[u8]) -> Option<Vec<u8>> {
    let mut out = None;
    let found = e.get(k, &mut |v| out = Some(v.to_vec())).expect("get");
    assert_eq!(found, out.is_some());
    out
}

fn multi_get(e: &dyn Engine, keys: &[Vec<u8>], batched: bool) -> Vec<Option<Vec<u8>>> {
    let mut out = vec![None; keys.len()];
    let n = e
        .multi_get(keys, batched, &mut |i, v| out[i] = Some(v.to_vec()))
        .expect("multi_get");
    assert_eq!(n, out.iter().filter(|v| v.is_some()).count());
    out
}

/// Seek to `start`, then take `steps` steps (true: next), recording what
/// the iterator shows after each move.
fn walk(e: &dyn Engine, start: &[u8], steps: &[bool]) -> Vec<Option<(Vec<u8>, Vec<u8>)>> {
    let mut it = e.iterator().expect("iterator");
    it.seek(start);
    let mut trace = Vec::new();
    let at = |it: &dyn strata_bench::engine::EngineIterator| {
        it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
    };
    trace.push(at(&*it));
    for &forward in steps {
        if !it.valid() {
            break;
        }
        if forward {
            it.next();
        } else {
            it.prev();
        }
        trace.push(at(&*it));
    }
    it.status().expect("iterator status");
    trace
}

fn scan(e: &dyn Engine, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = e.iterator().expect("iterator");
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    let mut all = Vec::new();
    while it.valid() {
        all.push((it.key().to_vec(), it.value().to_vec()));
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().expect("iterator status");
    all
}

fn check_same<T: PartialEq + std::fmt::Debug>(
    seed: u64,
    op: usize,
    what: &str,
    es: &Engines,
    answers: Vec<T>,
) {
    for (i, a) in answers.iter().enumerate().skip(1) {
        assert_eq!(
            &answers[0], a,
            "seed {seed}, op {op}: {what}: {} disagrees with {}",
            es.names[i], es.names[0]
        );
    }
}

fn run_seed(seed: u64) {
    println!("differential seed {seed} (replay: DIFF_SEED={seed})");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut es = Engines::new(dir.path());
    let mut rng = StdRng::seed_from_u64(seed);
    let mode = WriteMode::default();
    for op in 0..OPS_PER_SEED {
        let roll = rng.gen_range(0..1000);
        match roll {
            0..=299 => {
                let (k, v) = (key(rng.gen_range(0..KEY_SPACE)), value(&mut rng, op));
                es.engines
                    .iter()
                    .for_each(|e| e.put(&k, &v, mode).expect("put"));
            }
            300..=349 => {
                // Short operands: appended values stay small.
                let k = key(rng.gen_range(0..KEY_SPACE));
                let v = format!("m{op}");
                es.engines
                    .iter()
                    .for_each(|e| e.merge(&k, v.as_bytes(), mode).expect("merge"));
            }
            350..=449 => {
                let k = key(rng.gen_range(0..KEY_SPACE));
                es.engines
                    .iter()
                    .for_each(|e| e.delete(&k, mode).expect("delete"));
            }
            450..=519 => {
                let mut b = Batch::default();
                for _ in 0..rng.gen_range(1..20) {
                    let i = rng.gen_range(0..KEY_SPACE);
                    let k = key(i);
                    let roll = rng.gen_range(0..10);
                    if roll < 7 {
                        b.put(&k, &value(&mut rng, op));
                    } else if roll < 9 {
                        b.delete(&k);
                    } else {
                        // A range deletion, a few keys wide (bounds in
                        // order: keys vary in length).
                        let k2 = key(i + rng.gen_range(0..8));
                        let (from, to) = if k <= k2 { (&k, &k2) } else { (&k2, &k) };
                        b.delete_range(from, to);
                    }
                }
                es.engines
                    .iter()
                    .for_each(|e| e.write(&b, mode).expect("write"));
            }
            520..=719 => {
                let k = key(rng.gen_range(0..KEY_SPACE + 50));
                let answers = es.engines.iter().map(|e| get(e.as_ref(), &k)).collect();
                check_same(
                    seed,
                    op,
                    &format!("get {:?}", String::from_utf8_lossy(&k)),
                    &es,
                    answers,
                );
            }
            720..=779 => {
                let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..16))
                    .map(|_| key(rng.gen_range(0..KEY_SPACE + 50)))
                    .collect();
                let batched = rng.gen_bool(0.5);
                let answers = es
                    .engines
                    .iter()
                    .map(|e| multi_get(e.as_ref(), &keys, batched))
                    .collect();
                check_same(seed, op, "multi_get", &es, answers);
            }
            780..=929 => {
                let start = key(rng.gen_range(0..KEY_SPACE + 50));
                let steps: Vec<bool> = (0..rng.gen_range(0..30))
                    .map(|_| rng.gen_bool(0.7))
                    .collect();
                let answers = es
                    .engines
                    .iter()
                    .map(|e| walk(e.as_ref(), &start, &steps))
                    .collect();
                check_same(
                    seed,
                    op,
                    &format!("walk from {:?} {steps:?}", String::from_utf8_lossy(&start)),
                    &es,
                    answers,
                );
            }
            930..=949 => {
                let reverse = rng.gen_bool(0.5);
                let answers = es
                    .engines
                    .iter()
                    .map(|e| scan(e.as_ref(), reverse))
                    .collect();
                check_same(seed, op, "full scan", &es, answers);
            }
            950..=974 => es.engines.iter().for_each(|e| e.flush().expect("flush")),
            975..=984 => es
                .engines
                .iter()
                .for_each(|e| e.compact_all().expect("compact")),
            985..=992 => es
                .engines
                .iter()
                .for_each(|e| e.wait_for_compaction().expect("wait")),
            _ => es.reopen(),
        }
    }
    let answers = es.engines.iter().map(|e| scan(e.as_ref(), false)).collect();
    check_same(seed, OPS_PER_SEED, "final scan", &es, answers);
}

#[test]
fn engines_agree_with_the_model() {
    if let Some(seed) = std::env::var("DIFF_SEED").ok().and_then(|s| s.parse().ok()) {
        run_seed(seed);
        return;
    }
    let base: u64 = rand::random::<u32>().into();
    for i in 0..3 {
        run_seed(base + i);
    }
}
