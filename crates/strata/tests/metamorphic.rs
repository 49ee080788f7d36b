//! Metamorphic test (Pebble's idea): one random history of operations
//! (puts, deletes, range deletions, merges, batches, snapshots, gets,
//! MultiGets, bounded iterators both ways, flushes, compactions, reopens)
//! is run under many configurations (block sizes from 1 KiB to 64 KiB,
//! restart intervals, every compression, hash index and bloom on and off,
//! tiny write buffers and file targets, bounded and unbounded open files,
//! automatic compaction off, dynamic level sizes, several background jobs,
//! packed tables), and every configuration must give the same answer to
//! every read. No model decides what is right: the configurations check
//! each other.
//!
//! A failing history is shrunk (chunks of operations removed while the
//! two configurations still disagree) and written to
//! `target/metamorphic/<seed>.history`, one operation per line; replay it
//! with `STRATA_METAMORPHIC_FILE=<path>`. Scale with
//! `STRATA_METAMORPHIC_SEEDS`, `STRATA_METAMORPHIC_OPS`, or run for a time
//! with `STRATA_METAMORPHIC_SECONDS` (seeds from `STRATA_SEED`, default 0).

mod common;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::MemFileSystem;
use strata_kv::{
    BlockBasedOptions, DataBlockIndexType, Options, PackedTableOptions, ReadOptions, WriteBatch, DB,
};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One operation of a history. Keys and values are short ASCII words, so a
/// history prints as text and parses back.
#[derive(Clone, Debug, PartialEq)]
enum Op {
    Put(String, String),
    Delete(String),
    DeleteRange(String, String),
    Merge(String, String),
    /// Puts (`Some` value) and deletes, applied as one batch.
    Batch(Vec<(String, Option<String>)>),
    Snapshot(u32),
    Release(u32),
    Get(String, Option<u32>),
    MultiGet(Vec<String>, Option<u32>),
    /// lower, upper, reverse, snapshot, steps.
    Scan(Option<String>, Option<String>, bool, Option<u32>, u32),
    Flush,
    Compact(Option<String>, Option<String>),
    Reopen,
}

fn word(s: &str) -> String {
    s.to_string()
}

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("-")
}

fn snap(s: Option<u32>) -> String {
    s.map_or("-".into(), |s| s.to_string())
}

impl Op {
    fn line(&self) -> String {
        match self {
            Op::Put(k, v) => format!("put {k} {v}"),
            Op::Delete(k) => format!("delete {k}"),
            Op::DeleteRange(a, b) => format!("delete_range {a} {b}"),
            Op::Merge(k, v) => format!("merge {k} {v}"),
            Op::Batch(items) => {
                let mut s = "batch".to_string();
                for (k, v) in items {
                    let _ = write!(s, " {k}={}", v.as_deref().unwrap_or("-"));
                }
                s
            }
            Op::Snapshot(id) => format!("snapshot {id}"),
            Op::Release(id) => format!("release {id}"),
            Op::Get(k, s) => format!("get {k} {}", snap(*s)),
            Op::MultiGet(keys, s) => format!("multi_get {} {}", snap(*s), keys.join(" ")),
            Op::Scan(lo, hi, rev, s, steps) => format!(
                "scan {} {} {} {} {steps}",
                opt(lo),
                opt(hi),
                if *rev { "rev" } else { "fwd" },
                snap(*s)
            ),
            Op::Flush => "flush".into(),
            Op::Compact(a, b) => format!("compact {} {}", opt(a), opt(b)),
            Op::Reopen => "reopen".into(),
        }
    }

    fn parse(line: &str) -> Op {
        let t: Vec<&str> = line.split(' ').collect();
        let o = |s: &str| (s != "-").then(|| s.to_string());
        let sn = |s: &str| (s != "-").then(|| s.parse().unwrap());
        match t[0] {
            "put" => Op::Put(word(t[1]), word(t[2])),
            "delete" => Op::Delete(word(t[1])),
            "delete_range" => Op::DeleteRange(word(t[1]), word(t[2])),
            "merge" => Op::Merge(word(t[1]), word(t[2])),
            "batch" => Op::Batch(
                t[1..]
                    .iter()
                    .map(|kv| {
                        let (k, v) = kv.split_once('=').unwrap();
                        (word(k), o(v))
                    })
                    .collect(),
            ),
            "snapshot" => Op::Snapshot(t[1].parse().unwrap()),
            "release" => Op::Release(t[1].parse().unwrap()),
            "get" => Op::Get(word(t[1]), sn(t[2])),
            "multi_get" => Op::MultiGet(t[2..].iter().map(|k| word(k)).collect(), sn(t[1])),
            "scan" => Op::Scan(
                o(t[1]),
                o(t[2]),
                t[3] == "rev",
                sn(t[4]),
                t[5].parse().unwrap(),
            ),
            "flush" => Op::Flush,
            "compact" => Op::Compact(o(t[1]), o(t[2])),
            "reopen" => Op::Reopen,
            other => panic!("unknown operation {other:?} in {line:?}"),
        }
    }
}

fn random_key(rng: &mut StdRng) -> String {
    // A small key space, so that operations meet; lengths vary.
    let n = rng.gen_range(0..300u32);
    if rng.gen_bool(0.1) {
        format!("k{n:03}x{}", rng.gen_range(0..10))
    } else {
        format!("k{n:03}")
    }
}

fn random_value(rng: &mut StdRng, i: usize) -> String {
    let max = if rng.gen_bool(0.05) { 3000 } else { 60 };
    let pad = "v".repeat(rng.gen_range(0..max));
    format!("{i}{pad}")
}

/// A random history of `n` operations.
fn history(seed: u64, n: usize) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ops = Vec::with_capacity(n);
    let mut snaps: Vec<u32> = Vec::new();
    let mut next_snap = 0;
    let some_snap = |rng: &mut StdRng, snaps: &Vec<u32>| {
        (!snaps.is_empty() && rng.gen_bool(0.3)).then(|| snaps[rng.gen_range(0..snaps.len())])
    };
    let bound = |rng: &mut StdRng| rng.gen_bool(0.6).then(|| random_key(rng));
    for i in 0..n {
        let op = match rng.gen_range(0..100) {
            0..=29 => Op::Put(random_key(&mut rng), random_value(&mut rng, i)),
            30..=37 => Op::Delete(random_key(&mut rng)),
            38..=40 => {
                let (a, b) = (random_key(&mut rng), random_key(&mut rng));
                Op::DeleteRange(a.clone().min(b.clone()), a.max(b))
            }
            41..=46 => Op::Merge(random_key(&mut rng), format!("+m{i}")),
            47..=51 => Op::Batch(
                (0..rng.gen_range(1..6))
                    .map(|_| {
                        let v = rng.gen_bool(0.8).then(|| random_value(&mut rng, i));
                        (random_key(&mut rng), v)
                    })
                    .collect(),
            ),
            52..=54 => {
                next_snap += 1;
                snaps.push(next_snap);
                Op::Snapshot(next_snap)
            }
            55..=56 if !snaps.is_empty() => {
                let id = snaps.remove(rng.gen_range(0..snaps.len()));
                Op::Release(id)
            }
            57..=71 => Op::Get(random_key(&mut rng), some_snap(&mut rng, &snaps)),
            72..=75 => Op::MultiGet(
                (0..rng.gen_range(1..12))
                    .map(|_| random_key(&mut rng))
                    .collect(),
                some_snap(&mut rng, &snaps),
            ),
            76..=85 => Op::Scan(
                bound(&mut rng),
                bound(&mut rng),
                rng.gen_bool(0.4),
                some_snap(&mut rng, &snaps),
                rng.gen_range(1..60),
            ),
            86..=91 => Op::Flush,
            92..=94 => Op::Compact(bound(&mut rng), bound(&mut rng)),
            95..=96 => Op::Reopen,
            _ => Op::Put(random_key(&mut rng), random_value(&mut rng, i)),
        };
        ops.push(op);
    }
    ops
}

/// A configuration: a name and how it sets the options.
struct Config {
    name: &'static str,
    set: fn(&mut Options),
}

fn table(f: impl FnOnce(&mut BlockBasedOptions)) -> BlockBasedOptions {
    let mut t = BlockBasedOptions::default();
    f(&mut t);
    t
}

fn configs() -> Vec<Config> {
    vec![
        Config {
            name: "defaults",
            set: |_| {},
        },
        Config {
            name: "tiny-everything",
            set: |o| {
                o.set_write_buffer_size(64 << 10);
                o.set_target_file_size_base(16 << 10);
                o.set_max_bytes_for_level_base(64 << 10);
                o.set_level_zero_file_num_compaction_trigger(2);
                o.set_block_based_table_factory(&table(|t| {
                    t.set_block_size(1024);
                    t.set_block_restart_interval(1);
                }));
            },
        },
        Config {
            name: "big-blocks-zstd-no-bloom",
            set: |o| {
                o.set_write_buffer_size(64 << 10);
                o.set_compression_type("zstd".parse().unwrap());
                o.set_block_based_table_factory(&table(|t| {
                    t.set_block_size(64 << 10);
                    t.set_block_restart_interval(32);
                    t.set_bloom_filter(0.0, false);
                }));
            },
        },
        Config {
            name: "hash-index-lz4-bloom",
            set: |o| {
                o.set_write_buffer_size(96 << 10);
                o.set_target_file_size_base(32 << 10);
                o.set_compression_type("lz4".parse().unwrap());
                o.set_block_based_table_factory(&table(|t| {
                    t.set_block_size(4096);
                    t.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
                    t.set_bloom_filter(10.0, false);
                }));
            },
        },
        Config {
            name: "no-compaction-bounded-files",
            set: |o| {
                o.set_write_buffer_size(64 << 10);
                o.set_disable_auto_compactions(true);
                o.set_max_open_files(20);
                o.set_compression_type("none".parse().unwrap());
            },
        },
        Config {
            name: "dynamic-levels-4-jobs-3-subcompactions-cached-meta",
            set: |o| {
                o.set_write_buffer_size(64 << 10);
                o.set_target_file_size_base(24 << 10);
                o.set_max_bytes_for_level_base(96 << 10);
                o.set_level_compaction_dynamic_level_bytes(true);
                o.set_max_background_jobs(4);
                o.set_max_subcompactions(3);
                o.set_block_based_table_factory(&table(|t| {
                    t.set_block_size(2048);
                    t.set_cache_index_and_filter_blocks(true);
                    t.set_block_cache(&strata_kv::Cache::new_lru_cache(32 << 10));
                }));
            },
        },
        Config {
            name: "packed-from-l1",
            set: |o| {
                o.set_write_buffer_size(64 << 10);
                o.set_target_file_size_base(32 << 10);
                o.set_max_bytes_for_level_base(128 << 10);
                let mut p = PackedTableOptions::default();
                p.set_from_level(1);
                o.set_packed_table_factory(&p);
            },
        },
        Config {
            name: "no-stream-cutting-partitioner",
            set: |o| {
                o.set_write_buffer_size(64 << 10);
                o.set_target_file_size_base(16 << 10);
                o.set_stream_aware_cutting(false);
                o.set_sst_partitioner_factory(strata_kv::SstPartitionerFactory::fixed_prefix(3));
                o.set_compression_type("snappy".parse().unwrap());
            },
        },
    ]
}

fn options(fs: &Arc<MemFileSystem>, config: &Config) -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    o.set_file_system(fs.clone());
    // Concatenation is associative, as an associative operator must be
    // (its partial merges use the same function): a separator added per
    // operand would be added again to an operand that is itself a partial
    // merge, and configurations that fold differently would disagree (the
    // operands carry their own "+" instead).
    o.set_merge_operator_associative("append", common::append);
    (config.set)(&mut o);
    o
}

fn shown(v: &Option<Vec<u8>>) -> String {
    match v {
        Some(v) => String::from_utf8_lossy(v).into_owned(),
        None => "<none>".into(),
    }
}

/// Runs `ops` under `config`; one line of output per read (with the
/// operation's index), and `Err` naming the operation that failed.
fn run(ops: &[Op], config: &Config) -> Result<Vec<String>, String> {
    let fs = Arc::new(MemFileSystem::new());
    let opts = options(&fs, config);
    let mut out = Vec::new();
    let mut at = 0;
    // One open per stretch between reopens; snapshots end at a reopen.
    while at < ops.len() {
        let db = DB::open(&opts, "/db").map_err(|e| format!("op {at}: open: {e}"))?;
        at = run_until_reopen(&db, ops, at, &mut out)?;
    }
    Ok(out)
}

/// Runs `ops[from..]` on `db` up to and including the next reopen;
/// returns where the next stretch starts.
fn run_until_reopen(
    db: &DB,
    ops: &[Op],
    from: usize,
    out: &mut Vec<String>,
) -> Result<usize, String> {
    let mut snaps: HashMap<u32, strata_kv::Snapshot<'_>> = HashMap::new();
    for (i, op) in ops.iter().enumerate().skip(from) {
        let fail = |e: strata_kv::Error| format!("op {i} ({}): {e}", op.line());
        let ro_for = |s: &Option<u32>, snaps: &HashMap<u32, strata_kv::Snapshot<'_>>| {
            let mut ro = ReadOptions::default();
            if let Some(s) = s.and_then(|s| snaps.get(&s)) {
                ro.set_snapshot(s);
            }
            ro
        };
        match op {
            Op::Put(k, v) => db.put(k, v).map_err(fail)?,
            Op::Delete(k) => db.delete(k).map_err(fail)?,
            Op::DeleteRange(a, b) => db.delete_range(a, b).map_err(fail)?,
            Op::Merge(k, v) => db.merge(k, v).map_err(fail)?,
            Op::Batch(items) => {
                let mut b = WriteBatch::default();
                for (k, v) in items {
                    match v {
                        Some(v) => b.put(k, v),
                        None => b.delete(k),
                    }
                }
                db.write(b).map_err(fail)?;
            }
            Op::Snapshot(id) => {
                snaps.insert(*id, db.snapshot());
            }
            Op::Release(id) => {
                snaps.remove(id);
            }
            Op::Get(k, s) => {
                let v = db.get_opt(k, &ro_for(s, &snaps)).map_err(fail)?;
                out.push(format!("{i} get {k} {}", shown(&v)));
            }
            Op::MultiGet(keys, s) => {
                let got = db.multi_get_opt(keys, &ro_for(s, &snaps));
                let mut line = format!("{i} multi_get");
                for r in got {
                    let v = r.map_err(fail)?;
                    let _ = write!(line, " {}", shown(&v));
                }
                out.push(line);
            }
            Op::Scan(lo, hi, rev, s, steps) => {
                let mut ro = ro_for(s, &snaps);
                if let Some(lo) = lo {
                    ro.set_iterate_lower_bound(lo.as_bytes().to_vec());
                }
                if let Some(hi) = hi {
                    ro.set_iterate_upper_bound(hi.as_bytes().to_vec());
                }
                let mut it = db.raw_iterator_opt(ro);
                if *rev {
                    it.seek_to_last();
                } else {
                    it.seek_to_first();
                }
                let mut line = format!("{i} scan");
                for _ in 0..*steps {
                    if !it.valid() {
                        break;
                    }
                    let _ = write!(
                        line,
                        " {}={}",
                        String::from_utf8_lossy(it.key().unwrap()),
                        String::from_utf8_lossy(it.value().unwrap())
                    );
                    if *rev {
                        it.prev();
                    } else {
                        it.next();
                    }
                }
                it.status().map_err(fail)?;
                out.push(line);
            }
            Op::Flush => db.flush().map_err(fail)?,
            Op::Compact(a, b) => db.compact_range(a.as_ref(), b.as_ref()).map_err(fail)?,
            Op::Reopen => return Ok(i + 1),
        }
    }
    Ok(ops.len())
}

/// Where `a` and `b` (two configurations' outputs) first differ, if they do.
fn first_difference(
    a: &Result<Vec<String>, String>,
    b: &Result<Vec<String>, String>,
) -> Option<String> {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            let at = a.iter().zip(b).position(|(x, y)| x != y);
            match at {
                Some(i) => Some(format!("{}\n  vs\n{}", a[i], b[i])),
                None if a.len() != b.len() => Some(format!("{} vs {} reads", a.len(), b.len())),
                None => None,
            }
        }
        (Err(e), _) | (_, Err(e)) => Some(format!("error: {e}")),
    }
}

/// Removes chunks of `ops` while `fails` still holds (delta debugging,
/// halving the chunk size down to one).
fn shrink(mut ops: Vec<Op>, fails: impl Fn(&[Op]) -> bool) -> Vec<Op> {
    let mut chunk = ops.len() / 2;
    while chunk >= 1 {
        let mut at = 0;
        while at < ops.len() {
            let end = (at + chunk).min(ops.len());
            let mut candidate = ops[..at].to_vec();
            candidate.extend_from_slice(&ops[end..]);
            if fails(&candidate) {
                ops = candidate;
            } else {
                at = end;
            }
        }
        chunk /= 2;
    }
    ops
}

fn failure_path(seed: u64) -> PathBuf {
    // The workspace's target directory.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let dir = root.join("target/metamorphic");
    let _ = std::fs::create_dir_all(&dir);
    dir.join(format!("{seed}.history"))
}

/// Runs `ops` under every configuration; on a disagreement, shrinks the
/// history, writes it out and panics naming the file.
fn check(seed: u64, ops: Vec<Op>) {
    let configs = configs();
    let reference = run(&ops, &configs[0]);
    if let Err(e) = &reference {
        panic!("seed {seed}: {} failed: {e}", configs[0].name);
    }
    for c in &configs[1..] {
        let got = run(&ops, c);
        if first_difference(&reference, &got).is_none() {
            continue;
        }
        let small = shrink(ops.clone(), |ops| {
            first_difference(&run(ops, &configs[0]), &run(ops, c)).is_some()
        });
        let diff = first_difference(&run(&small, &configs[0]), &run(&small, c))
            .unwrap_or_else(|| "(the shrunk history passes: flaky?)".into());
        let path = failure_path(seed);
        let text: String = small.iter().map(|op| op.line() + "\n").collect();
        std::fs::write(&path, text).unwrap();
        panic!(
            "seed {seed}: {} and {} disagree after {} operations (shrunk from {}):\n{diff}\nhistory: {} (replay: STRATA_METAMORPHIC_FILE={})",
            configs[0].name,
            c.name,
            small.len(),
            ops.len(),
            path.display(),
            path.display()
        );
    }
}

#[test]
fn every_configuration_gives_the_same_answers() {
    if let Ok(file) = std::env::var("STRATA_METAMORPHIC_FILE") {
        let text = std::fs::read_to_string(&file).unwrap();
        let ops: Vec<Op> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(Op::parse)
            .collect();
        check(0, ops);
        return;
    }
    let n = env_or("STRATA_METAMORPHIC_OPS", 1500) as usize;
    let first = env_or("STRATA_SEED", 0);
    let seconds = env_or("STRATA_METAMORPHIC_SECONDS", 0);
    let start = std::time::Instant::now();
    let mut seed = first;
    let seeds = env_or("STRATA_METAMORPHIC_SEEDS", 4);
    loop {
        let ops = history(seed, n);
        // The printed form parses back to the same history.
        for op in &ops {
            assert_eq!(Op::parse(&op.line()), *op);
        }
        check(seed, ops);
        seed += 1;
        let done = if seconds > 0 {
            start.elapsed().as_secs() >= seconds
        } else {
            seed - first >= seeds
        };
        if done {
            break;
        }
    }
    println!(
        "{} histories of {n} operations, {} configurations each, {:.1} s",
        seed - first,
        configs().len(),
        start.elapsed().as_secs_f64()
    );
}

/// The shrinker keeps exactly what a failure needs: here the failure is
/// "a put of k001 followed, later, by a get of it", planted in a random
/// history.
#[test]
fn shrinking_keeps_the_operations_a_failure_needs() {
    let mut ops = history(5, 300);
    ops.insert(40, Op::Put("k001".into(), "planted".into()));
    ops.push(Op::Get("k001".into(), None));
    let fails = |ops: &[Op]| {
        let put = ops
            .iter()
            .position(|o| matches!(o, Op::Put(k, v) if k == "k001" && v == "planted"));
        put.is_some_and(|p| {
            ops[p..]
                .iter()
                .any(|o| matches!(o, Op::Get(k, None) if k == "k001"))
        })
    };
    let small = shrink(ops, fails);
    assert_eq!(
        small,
        [
            Op::Put("k001".into(), "planted".into()),
            Op::Get("k001".into(), None)
        ]
    );
}

/// Every configuration agrees with a `BTreeMap` on a history without
/// snapshots or merges: the check that the configurations are compared
/// on real answers, not on errors or empty output.
#[test]
fn the_reference_configuration_matches_a_model() {
    let ops: Vec<Op> = history(11, 800)
        .into_iter()
        .filter(|o| !matches!(o, Op::Merge(..) | Op::Snapshot(_) | Op::Release(_)))
        .map(|o| match o {
            Op::Get(k, _) => Op::Get(k, None),
            o => o,
        })
        .collect();
    let out = run(&ops, &configs()[0]).unwrap();
    let mut model = std::collections::BTreeMap::<String, String>::new();
    let mut reads = out.iter();
    let mut found = 0;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Put(k, v) => {
                model.insert(k.clone(), v.clone());
            }
            Op::Delete(k) => {
                model.remove(k);
            }
            Op::DeleteRange(a, b) => model.retain(|k, _| !(k >= a && k < b)),
            Op::Batch(items) => {
                for (k, v) in items {
                    match v {
                        Some(v) => model.insert(k.clone(), v.clone()),
                        None => model.remove(k),
                    };
                }
            }
            Op::Get(k, _) => {
                let want = model.get(k).cloned().unwrap_or("<none>".into());
                found += usize::from(model.contains_key(k));
                assert_eq!(reads.next().unwrap(), &format!("{i} get {k} {want}"));
            }
            Op::MultiGet(..) | Op::Scan(..) => {
                reads.next().unwrap();
            }
            _ => {}
        }
    }
    assert!(
        found > 10,
        "the history reads too few existing keys: {found}"
    );
}
