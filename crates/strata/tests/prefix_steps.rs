//! `DBRawIterator::next_prefix` and `prev_prefix` over MVCC data (an 8-byte
//! row and an 8-byte descending version) against a model: every level
//! populated, L0 files, memtable data, deleted versions, snapshots, bounds,
//! direction changes, rows whose versions span blocks and files; with the
//! fixed-prefix extractor (the fast paths) and a user extractor that strips
//! the version (the stepping path); both built-in orders.
//!
//! Every seed is printed; replay one with `STRATA_SEED=<seed>`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::{FileSystem, MemFileSystem};
use strata_kv::{
    BlockBasedOptions, Error, Options, ReadOptions, ReverseBytewiseComparator, SliceTransform, DB,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn strip_version(key: &[u8]) -> &[u8] {
    &key[..key.len() - 8]
}

fn has_version(key: &[u8]) -> bool {
    key.len() >= 8
}

struct Config {
    reverse: bool,
    fixed: bool,
}

fn options(rng: &mut StdRng, config: &Config) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(MemFileSystem::new()));
    opts.set_write_buffer_size(512 << 10);
    opts.set_target_file_size_base(rng.gen_range(4..16) << 10);
    opts.set_max_bytes_for_level_base(rng.gen_range(8..24) << 10);
    opts.set_max_bytes_for_level_multiplier(3.0);
    opts.set_level_zero_file_num_compaction_trigger(4);
    // The test wants files left in L0 at the end; cut flushes would reach
    // the L0 trigger in files and go down by trivial moves (the model test
    // runs the prefix steps with cutting on).
    opts.set_stream_aware_cutting(false);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(rng.gen_range(128..2048));
    t.set_block_restart_interval(rng.gen_range(1..17));
    opts.set_block_based_table_factory(&t);
    if config.reverse {
        opts.set_comparator_object(Arc::new(ReverseBytewiseComparator));
    }
    opts.set_prefix_extractor(if config.fixed {
        SliceTransform::create_fixed_prefix(8)
    } else {
        SliceTransform::create("strip-version", strip_version, Some(has_version))
    });
    opts
}

fn key(row: u64, version: u64) -> Vec<u8> {
    let mut k = row.to_be_bytes().to_vec();
    k.extend_from_slice(&(u64::MAX - version).to_be_bytes());
    k
}

/// Writes rows with random version counts (some in the hundreds), and
/// deletes some versions; `versions` counts each row's versions so far.
/// A `small` round stays below L0's compaction triggers when flushed.
fn write_round(db: &DB, model: &mut Model, rng: &mut StdRng, versions: &mut [u64], small: bool) {
    let rows = if small { 2..6 } else { 10..40 };
    for _ in 0..rng.gen_range(rows) {
        let row = rng.gen_range(0..versions.len());
        let n = if !small && rng.gen_bool(0.15) {
            rng.gen_range(50..400)
        } else {
            rng.gen_range(1..6)
        };
        for _ in 0..n {
            versions[row] += 1;
            let k = key(row as u64, versions[row]);
            let v = format!("r{row}v{}", versions[row]).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    // Deletions: some newest versions (the next visible one then is an
    // older version), some at random, some of keys never written.
    for _ in 0..rng.gen_range(0..if small { 5 } else { 30 }) {
        let row = rng.gen_range(0..versions.len());
        let version = match rng.gen_range(0..3) {
            0 => versions[row],
            1 => rng.gen_range(0..=versions[row]),
            _ => versions[row] + 1000,
        };
        let k = key(row as u64, version);
        db.delete(&k).unwrap();
        model.remove(&k);
    }
}

/// The model's visible entries within the bounds, in the database's order.
fn visible(
    model: &Model,
    reverse: bool,
    lower: &Option<Vec<u8>>,
    upper: &Option<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let cmp = |a: &[u8], b: &[u8]| if reverse { b.cmp(a) } else { a.cmp(b) };
    let mut out: Vec<_> = model
        .iter()
        .filter(|(k, _)| lower.as_ref().is_none_or(|l| cmp(k, l) != Ordering::Less))
        .filter(|(k, _)| upper.as_ref().is_none_or(|u| cmp(k, u) == Ordering::Less))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if reverse {
        out.reverse();
    }
    out
}

fn row_of(k: &[u8]) -> &[u8] {
    &k[..8]
}

fn check_walks(
    db: &DB,
    ro_for: &dyn Fn() -> ReadOptions,
    model: &Model,
    config: &Config,
    rng: &mut StdRng,
    ctx: &str,
) {
    for _ in 0..6 {
        let bound = |rng: &mut StdRng| {
            rng.gen_bool(0.3)
                .then(|| key(rng.gen_range(0..60), rng.gen_range(0..50)))
        };
        let (lower, upper) = (bound(rng), bound(rng));
        let want = visible(model, config.reverse, &lower, &upper);
        let mut ro = ro_for();
        if let Some(l) = &lower {
            ro.set_iterate_lower_bound(l.clone());
        }
        if let Some(u) = &upper {
            ro.set_iterate_upper_bound(u.clone());
        }
        let mut it = db.raw_iterator_opt(ro);
        let at =
            |it: &strata_kv::DBRawIterator<'_>| it.item().map(|(k, v)| (k.to_vec(), v.to_vec()));

        // A whole scan of the newest version of each row, both ways.
        let firsts: Vec<usize> = (0..want.len())
            .filter(|&i| i == 0 || row_of(&want[i - 1].0) != row_of(&want[i].0))
            .collect();
        let mut got = Vec::new();
        it.seek_to_first();
        while let Some(e) = at(&it) {
            got.push(e);
            it.next_prefix();
        }
        it.status().unwrap();
        let expected: Vec<_> = firsts.iter().map(|&i| want[i].clone()).collect();
        assert_eq!(
            got, expected,
            "{ctx} lower {lower:?} upper {upper:?}: next_prefix scan"
        );
        if let Some(&last_first) = firsts.last() {
            it.seek_to_last();
            it.prev();
            // From inside the last row (or the row before it), prev_prefix
            // walks the rows' first entries backward.
            got.clear();
            it.seek_for_prev(&want[last_first].0);
            while let Some(e) = at(&it) {
                got.push(e);
                it.prev_prefix();
            }
            it.status().unwrap();
            got.reverse();
            assert_eq!(
                got, expected,
                "{ctx} lower {lower:?} upper {upper:?}: prev_prefix scan"
            );
        }

        // Random walks mixing every step.
        for _ in 0..4 {
            if want.is_empty() {
                break;
            }
            let mut pos = Some(rng.gen_range(0..want.len()));
            it.seek(&want[pos.unwrap()].0);
            for step in 0..40 {
                let Some(p) = pos else { break };
                let first_of = |mut i: usize| {
                    while i > 0 && row_of(&want[i - 1].0) == row_of(&want[i].0) {
                        i -= 1;
                    }
                    i
                };
                let name = match rng.gen_range(0..5) {
                    0 | 1 => {
                        it.next_prefix();
                        pos =
                            (p + 1..want.len()).find(|&q| row_of(&want[q].0) != row_of(&want[p].0));
                        "next_prefix"
                    }
                    2 => {
                        it.prev_prefix();
                        pos = first_of(p).checked_sub(1).map(first_of);
                        "prev_prefix"
                    }
                    3 => {
                        it.next();
                        pos = (p + 1 < want.len()).then_some(p + 1);
                        "next"
                    }
                    _ => {
                        it.prev();
                        pos = p.checked_sub(1);
                        "prev"
                    }
                };
                assert_eq!(
                    at(&it),
                    pos.map(|q| want[q].clone()),
                    "{ctx}: step {step} {name} from {:?}",
                    want[p].0
                );
            }
            it.status().unwrap();
        }
    }
}

fn run_seed(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let config = Config {
        reverse: rng.gen_bool(0.3),
        fixed: rng.gen_bool(0.7),
    };
    let ctx = format!(
        "seed {seed} reverse {} fixed {}",
        config.reverse, config.fixed
    );
    let opts = options(&mut rng, &config);
    let dir = format!("/prefix-steps-{seed}");
    let db = DB::open(&opts, &dir).unwrap();
    let mut model = Model::new();
    let mut versions = vec![0u64; 50];

    // Several levels (each full compaction pushes older data down), then
    // a partial compaction, L0 files and the memtable.
    for _ in 0..12 {
        write_round(&db, &mut model, &mut rng, &mut versions, false);
        db.flush().unwrap();
        db.wait_for_compact().unwrap();
    }
    let old_model = model.clone();
    let snapshot = db.snapshot();
    write_round(&db, &mut model, &mut rng, &mut versions, false);
    db.flush().unwrap();
    let mut from = key(rng.gen_range(0..25), 0);
    let mut to = key(rng.gen_range(25..50), 0);
    // In the comparator's order: a reversed range would compact nothing,
    // and the L0 files left would let an automatic compaction take the
    // flushes below with them, or not, as the threads' timing fell.
    if config.reverse {
        std::mem::swap(&mut from, &mut to);
    }
    db.compact_range(Some(&from), Some(&to)).unwrap();
    for _ in 0..rng.gen_range(1..=2) {
        write_round(&db, &mut model, &mut rng, &mut versions, true);
        db.flush().unwrap();
    }
    write_round(&db, &mut model, &mut rng, &mut versions, false);
    db.wait_for_compact().unwrap();
    let levels = files_per_level(&db);
    let ctx = format!("{ctx} files per level {levels:?}");
    let deeper = levels[1..].iter().filter(|n| n.as_str() != "0").count();
    assert!(
        deeper >= 2 && levels[0] != "0",
        "{ctx}: want L0 and two deeper levels"
    );

    let snap_ro = || {
        let mut ro = ReadOptions::default();
        ro.set_snapshot(&snapshot);
        ro
    };
    // The latest view and the snapshot's.
    let mut check_both = |ctx: &str| {
        check_walks(&db, &ReadOptions::default, &model, &config, &mut rng, ctx);
        let ctx = format!("{ctx} (snapshot)");
        check_walks(&db, &snap_ro, &old_model, &config, &mut rng, &ctx);
    };
    check_both(&ctx);

    // Everything in one level, the snapshot still held (so the versions
    // it sees and the deletions stay): one source under the iterator, so
    // prev_prefix steps to the row before from restart keys where blocks
    // restart at every row, and must still land where the model says.
    // (A full compaction can leave the last level over its target, and
    // the automatic compaction after it spill into the next: repeat.)
    let mut levels = Vec::new();
    for _ in 0..7 {
        db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
        db.wait_for_compact().unwrap();
        levels = files_per_level(&db);
        if levels.iter().filter(|n| n.as_str() != "0").count() == 1 {
            break;
        }
    }
    let populated = levels.iter().filter(|n| n.as_str() != "0").count();
    assert_eq!(populated, 1, "{ctx}: after full compactions {levels:?}");
    check_both(&format!("{ctx} compacted"));
}

/// The number of table files at each level, as the property gives it.
fn files_per_level(db: &DB) -> Vec<String> {
    (0..7)
        .map(|l| {
            db.property_value(&format!("strata.num-files-at-level{l}"))
                .unwrap()
                .unwrap_or_default()
        })
        .collect()
}

fn seeds(default: u64) -> Vec<u64> {
    match std::env::var("STRATA_SEED") {
        Ok(s) => vec![s.parse().expect("STRATA_SEED must be a number")],
        Err(_) => (0..default).collect(),
    }
}

#[test]
fn prefix_steps_match_the_model() {
    for seed in seeds(12) {
        eprintln!("prefix_steps seed {seed}");
        run_seed(seed);
    }
}

#[test]
fn prefix_steps_without_an_extractor_are_invalid_argument() {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(MemFileSystem::new()));
    let db = DB::open(&opts, "/no-extractor").unwrap();
    db.put(key(1, 1), b"a").unwrap();
    db.put(key(2, 1), b"b").unwrap();
    for prev in [false, true] {
        let mut it = db.raw_iterator();
        it.seek_to_first();
        it.next();
        if prev {
            it.prev_prefix();
        } else {
            it.next_prefix();
        }
        assert!(!it.valid());
        assert!(
            matches!(it.status(), Err(Error::InvalidArgument(_))),
            "{:?}",
            it.status()
        );
    }
}

/// A damaged table under `prev_prefix`'s direct step (rows long enough
/// for blocks that restart at every row, all in one level): with
/// checksums checked, a scan gives the right rows or Corruption; with
/// them off, damaged restart keys and entries reach the decoders, and the
/// scan must still end (every step moves to an earlier entry) without a
/// panic, its errors Corruption.
#[test]
fn prev_prefix_over_damaged_tables_never_panics_or_loops() {
    let fs = Arc::new(MemFileSystem::new());
    let open = |fs: &Arc<MemFileSystem>| {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_file_system(fs.clone());
        let mut t = BlockBasedOptions::default();
        t.set_block_size(512);
        opts.set_block_based_table_factory(&t);
        opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(8));
        DB::open(&opts, "/damaged")
    };
    const ROWS: u64 = 300;
    const ENTRIES: usize = ROWS as usize * 12;
    {
        let db = open(&fs).unwrap();
        for row in 0..ROWS {
            for version in 0..12 {
                db.put(key(row, version), format!("r{row}v{version}"))
                    .unwrap();
            }
        }
        db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
    }
    let dir = std::path::Path::new("/damaged");
    let tables: Vec<_> = fs
        .list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| dir.join(n))
        .collect();
    assert!(!tables.is_empty());
    let pristine: Vec<Vec<u8>> = tables
        .iter()
        .map(|p| strata_kv::env::read_file_to_vec(fs.as_ref(), p).unwrap())
        .collect();
    let want: Vec<Vec<u8>> = (0..ROWS).rev().map(|r| key(r, 11)).collect();
    let mut rng = StdRng::seed_from_u64(7);
    for trial in 0..1000 {
        let t = rng.gen_range(0..tables.len());
        let mut bytes = pristine[t].clone();
        // Inside the data blocks (the front of the file), where the
        // restart keys and entries are.
        let at = rng.gen_range(0..bytes.len() * 3 / 4);
        bytes[at] ^= 1 << rng.gen_range(0..8);
        let write = |b: &[u8]| {
            let mut f = fs.create(&tables[t]).unwrap();
            f.append(b).unwrap();
            f.sync().unwrap();
        };
        write(&bytes);
        if let Ok(db) = open(&fs) {
            for verify in [true, false] {
                let mut ro = ReadOptions::default();
                ro.set_verify_checksums(verify);
                let mut it = db.raw_iterator_opt(ro);
                it.seek_for_prev(key(ROWS - 1, 11));
                let mut got = Vec::new();
                while it.valid() && got.len() <= ENTRIES {
                    got.push(it.key().unwrap().to_vec());
                    it.prev_prefix();
                }
                let ctx = format!(
                    "trial {trial}: byte {at} of {:?}, checksums {verify}",
                    tables[t]
                );
                // Damage may change rows (a flipped key byte makes a row of
                // its own), but each step moves to an earlier entry.
                assert!(got.len() <= ENTRIES, "{ctx}: the scan does not end");
                if verify && it.status().is_ok() {
                    assert_eq!(got, want, "{ctx}");
                }
                if let Err(e) = it.status() {
                    assert!(matches!(e, Error::Corruption { .. }), "{ctx}: {e}");
                }
            }
        }
        write(&pristine[t]);
    }
}
