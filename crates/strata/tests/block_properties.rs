//! Block property collectors and filters (time-bound scans): a collector
//! records the range of the 8-byte version suffix in every block and
//! table; an iterator with a filter on a version range must return every
//! entry whose version is in the range (never hide a match), nothing that
//! was not written, in order both ways, and read fewer entries than a full
//! scan. Tables written before the collector existed are read whole.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::{FileSystem, MemFileSystem};
use strata_kv::{
    BlockBasedOptions, BlockPropertyCollector, BlockPropertyFilter, Options, ReadOptions, DB,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn version_of(key: &[u8]) -> Option<u64> {
    let at = key.len().checked_sub(8)?;
    Some(u64::from_be_bytes(key[at..].try_into().ok()?))
}

fn widen(range: &mut Option<(u64, u64)>, v: u64) {
    let (lo, hi) = range.get_or_insert((v, v));
    *lo = (*lo).min(v);
    *hi = (*hi).max(v);
}

fn encode(range: Option<(u64, u64)>) -> Vec<u8> {
    range.map_or(Vec::new(), |(lo, hi)| {
        [lo.to_be_bytes(), hi.to_be_bytes()].concat()
    })
}

#[derive(Default)]
struct Versions {
    block: Option<(u64, u64)>,
    table: Option<(u64, u64)>,
}

impl BlockPropertyCollector for Versions {
    fn name(&self) -> &str {
        "versions"
    }
    fn add(&mut self, key: &[u8], _value: &[u8]) {
        if let Some(v) = version_of(key) {
            widen(&mut self.block, v);
            widen(&mut self.table, v);
        }
    }
    fn finish_data_block(&mut self) -> Vec<u8> {
        encode(self.block.take())
    }
    fn finish_table(&mut self) -> Vec<u8> {
        encode(self.table)
    }
}

struct VersionRange(u64, u64);

impl BlockPropertyFilter for VersionRange {
    fn name(&self) -> &str {
        "versions"
    }
    fn intersects(&self, property: &[u8]) -> bool {
        if property.len() != 16 {
            return true; // no versions recorded: cannot rule anything out
        }
        let lo = u64::from_be_bytes(property[..8].try_into().unwrap());
        let hi = u64::from_be_bytes(property[8..].try_into().unwrap());
        lo <= self.1 && self.0 <= hi
    }
}

fn options(fs: &MemFileSystem, with_collector: bool) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    opts.set_write_buffer_size(32 << 10);
    opts.set_target_file_size_base(16 << 10);
    opts.set_max_bytes_for_level_base(64 << 10);
    opts.set_disable_auto_compactions(true);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(512);
    opts.set_block_based_table_factory(&t);
    if with_collector {
        opts.add_block_property_collector(|| Box::new(Versions::default()));
    }
    opts
}

fn key(row: u64, version: u64) -> Vec<u8> {
    [row.to_be_bytes(), version.to_be_bytes()].concat()
}

/// Round `r` writes versions `r * 1000 ..`, each key once (as MVCC
/// versions are): time-ordered data, so old rounds sit in older tables and
/// blocks. (A filter hides every entry of a block it rules out, a newer
/// value of a key too, so overwritten keys are outside its contract.)
fn write_round(db: &DB, model: &mut Model, rng: &mut StdRng, round: u64) {
    for i in 0..1000u64 {
        let k = key(rng.gen_range(0..300), round * 1000 + i);
        let v = format!("r{round}-{i}").into_bytes();
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
}

fn scan(db: &DB, filter: Option<(u64, u64)>, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut ro = ReadOptions::default();
    if let Some((lo, hi)) = filter {
        ro.add_block_property_filter(Arc::new(VersionRange(lo, hi)));
    }
    let mut it = db.raw_iterator_opt(ro);
    let mut out = Vec::new();
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    while let Some((k, v)) = it.item() {
        out.push((k.to_vec(), v.to_vec()));
        if reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().unwrap();
    if reverse {
        out.reverse();
    }
    out
}

#[test]
fn filters_never_hide_a_matching_entry_and_skip_the_rest() {
    let mut rng = StdRng::seed_from_u64(91);
    let fs = MemFileSystem::new();
    let mut model = Model::new();
    // Rounds 0-1 without the collector (compacted into L1), rounds 2-9
    // with it, each an L0 table.
    let db = DB::open(&options(&fs, false), "/db").unwrap();
    for round in 0..2 {
        write_round(&db, &mut model, &mut rng, round);
    }
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    drop(db);
    let db = DB::open(&options(&fs, true), "/db").unwrap();
    for round in 2..10 {
        write_round(&db, &mut model, &mut rng, round);
    }
    let all = scan(&db, None, false);
    assert_eq!(all.len(), model.len());
    let mut skipped_somewhere = false;
    for trial in 0..40 {
        let lo = rng.gen_range(0..10_000);
        let hi = lo + rng.gen_range(0..2000);
        for reverse in [false, true] {
            let got = scan(&db, Some((lo, hi)), reverse);
            let ctx = format!("trial {trial} [{lo}, {hi}] reverse {reverse}");
            // Sorted, and each a real entry.
            assert!(
                got.windows(2).all(|w| w[0].0 < w[1].0),
                "{ctx}: out of order"
            );
            for (k, v) in &got {
                assert_eq!(model.get(k), Some(v), "{ctx}: {k:?} was never written");
            }
            // Every match is there.
            let got_keys: std::collections::BTreeSet<&Vec<u8>> =
                got.iter().map(|(k, _)| k).collect();
            for k in model.keys() {
                let v = version_of(k).unwrap();
                if (lo..=hi).contains(&v) {
                    assert!(got_keys.contains(k), "{ctx}: version {v} hidden");
                }
            }
            // Rounds 0-1 (no collector) are read whole.
            for k in model.keys().filter(|k| version_of(k).unwrap() < 2000) {
                assert!(
                    got_keys.contains(k),
                    "{ctx}: an entry of a table without the collector hidden"
                );
            }
            skipped_somewhere |= got.len() < model.len();
        }
    }
    assert!(skipped_somewhere, "no filter skipped anything");
    // After a full compaction every table has the collector (blocks then
    // mix all versions, so little is skipped), and no match is hidden.
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    let got: std::collections::BTreeSet<Vec<u8>> = scan(&db, Some((5000, 5999)), false)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    for k in model
        .keys()
        .filter(|k| (5000..=5999).contains(&version_of(k).unwrap()))
    {
        assert!(got.contains(k), "after compaction: {k:?} hidden");
    }
}

/// Inside one table: keys written in order with rising versions give each
/// block a narrow version range, so a filter passes most blocks of a table
/// it cannot rule out whole.
#[test]
fn filters_pass_blocks_inside_a_table() {
    let fs = MemFileSystem::new();
    let db = DB::open(&options(&fs, true), "/db").unwrap();
    let mut model = Model::new();
    for i in 0..600u64 {
        let k = key(i, 10_000 + i);
        db.put(&k, b"v").unwrap();
        model.insert(k, b"v".to_vec());
    }
    db.flush().unwrap();
    let files: u64 = db
        .property_value("strata.num-files-at-level0")
        .unwrap()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(files, 1);
    for reverse in [false, true] {
        let got = scan(&db, Some((10_100, 10_110)), reverse);
        let keys: Vec<u64> = got.iter().map(|(k, _)| version_of(k).unwrap()).collect();
        for v in 10_100..=10_110 {
            assert!(keys.contains(&v), "reverse {reverse}: version {v} hidden");
        }
        assert!(
            got.len() < 100,
            "reverse {reverse}: {} of 600 entries read",
            got.len()
        );
    }
}

/// Two collectors of one name are refused at open, and nothing is
/// written: filters find properties by name.
#[test]
fn collectors_with_one_name_are_refused() {
    let fs = MemFileSystem::new();
    let mut opts = options(&fs, true);
    opts.add_block_property_collector(|| Box::new(Versions::default()));
    let Err(e) = DB::open(&opts, "/db") else {
        panic!("open must fail");
    };
    assert!(e.to_string().contains("named \"versions\""), "{e}");
    assert!(!fs.exists(std::path::Path::new("/db/CURRENT")));
}
