//! Prefix bloom filters and prefix seeks against a model: random keys,
//! every level populated, a prefix extractor that changes between opens
//! (tables written with another extractor must be read without their
//! prefix filter, never with a wrong answer), whole-key filtering on and
//! off. Gets, prefix seeks with `prefix_same_as_start` both ways, and
//! `total_order_seek` must all match the model.
//!
//! Every seed is printed; replay one with `STRATA_SEED=<seed>`.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::MemFileSystem;
use strata_kv::{BlockBasedOptions, Options, ReadOptions, SliceTransform, DB};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn first_two_of_long(k: &[u8]) -> &[u8] {
    &k[..2]
}

fn long(k: &[u8]) -> bool {
    k.len() >= 3
}

fn extractor(choice: u32) -> Option<SliceTransform> {
    match choice {
        0 => None,
        1 => Some(SliceTransform::create_fixed_prefix(1)),
        2 => Some(SliceTransform::create_fixed_prefix(2)),
        3 => Some(SliceTransform::create_fixed_prefix(3)),
        _ => Some(SliceTransform::create(
            "first-two-of-long",
            first_two_of_long,
            Some(long),
        )),
    }
}

fn options(fs: &MemFileSystem, rng: &mut StdRng, choice: u32) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    opts.set_write_buffer_size(32 << 10);
    opts.set_target_file_size_base(8 << 10);
    opts.set_max_bytes_for_level_base(32 << 10);
    opts.set_max_bytes_for_level_multiplier(3.0);
    let mut t = BlockBasedOptions::default();
    t.set_block_size(rng.gen_range(256..2048));
    t.set_bloom_filter(10.0, false);
    t.set_whole_key_filtering(rng.gen_bool(0.5));
    opts.set_block_based_table_factory(&t);
    if let Some(e) = extractor(choice) {
        opts.set_prefix_extractor(e);
    }
    opts
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..6);
    (0..len).map(|_| b'a' + rng.gen_range(0..5u8)).collect()
}

fn write_some(db: &DB, model: &mut Model, rng: &mut StdRng, n: usize) {
    for i in 0..n {
        let k = key(rng);
        if rng.gen_bool(0.15) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("v{i}-{}", rng.gen::<u16>()).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

fn check(db: &DB, model: &Model, rng: &mut StdRng, choice: u32, ctx: &str) {
    let t = extractor(choice);
    for _ in 0..200 {
        let k = key(rng);
        assert_eq!(
            db.get(&k).unwrap(),
            model.get(&k).cloned(),
            "{ctx}: get {k:?}"
        );
    }
    for _ in 0..60 {
        let target = key(rng);
        let prefix = t
            .as_ref()
            .and_then(|t| t.prefix(&target).map(<[u8]>::to_vec));
        let in_prefix = |k: &[u8]| match (&t, &prefix) {
            (Some(t), Some(p)) => t.prefix(k) == Some(p.as_slice()),
            _ => true,
        };
        for total_order in [false, true] {
            let mut ro = ReadOptions::default();
            ro.set_prefix_same_as_start(true);
            ro.set_total_order_seek(total_order);
            let confined = |k: &[u8]| total_order || in_prefix(k);
            let mut it = db.raw_iterator_opt(ro);
            // Forward from the target.
            it.seek(&target);
            let mut got = Vec::new();
            while let Some(k) = it.key() {
                got.push(k.to_vec());
                it.next();
            }
            it.status().unwrap();
            let want: Vec<Vec<u8>> = model
                .range(target.clone()..)
                .map(|(k, _)| k.clone())
                .take_while(|k| confined(k))
                .collect();
            assert_eq!(
                got, want,
                "{ctx}: seek {target:?} total_order {total_order}"
            );
            // Backward from the target.
            it.seek_for_prev(&target);
            got.clear();
            while let Some(k) = it.key() {
                got.push(k.to_vec());
                it.prev();
            }
            it.status().unwrap();
            let want: Vec<Vec<u8>> = model
                .range(..=target.clone())
                .rev()
                .map(|(k, _)| k.clone())
                .take_while(|k| confined(k))
                .collect();
            assert_eq!(
                got, want,
                "{ctx}: seek_for_prev {target:?} total_order {total_order}"
            );
        }
    }
}

fn run_seed(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = MemFileSystem::new();
    let mut model = Model::new();
    for open in 0..4 {
        let choice = rng.gen_range(0..5);
        let ctx = format!(
            "seed {seed} open {open} extractor {:?}",
            extractor(choice).map(|e| e.name().to_string())
        );
        let db = DB::open(&options(&fs, &mut rng, choice), "/db").unwrap();
        check(&db, &model, &mut rng, choice, &ctx);
        for _ in 0..3 {
            write_some(&db, &mut model, &mut rng, 800);
            db.flush().unwrap();
        }
        db.wait_for_compact().unwrap();
        write_some(&db, &mut model, &mut rng, 300);
        check(&db, &model, &mut rng, choice, &ctx);
    }
}

#[test]
fn prefix_filters_and_prefix_seeks_match_the_model() {
    let seeds: Vec<u64> = match std::env::var("STRATA_SEED") {
        Ok(s) => vec![s.parse().expect("STRATA_SEED must be a number")],
        Err(_) => (0..10).collect(),
    };
    for seed in seeds {
        eprintln!("prefix_bloom seed {seed}");
        run_seed(seed);
    }
}
