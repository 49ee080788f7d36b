//! A database written half with and half without the data block hash
//! index, reopened under each setting: every get, at the latest sequence
//! and at a snapshot, answers as a `BTreeMap` model says, before and after
//! a compaction merges the tables under one setting.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::env::{FileSystem, MemFileSystem};
use strata_kv::sst::TableReader;
use strata_kv::{BlockBasedOptions, BytewiseComparator, DataBlockIndexType, Options, DB};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn opts(fs: &MemFileSystem, index_type: DataBlockIndexType) -> Options {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_file_system(Arc::new(fs.clone()));
    opts.set_write_buffer_size(32 << 10);
    // Keep the tables as written, so both kinds stay until the explicit
    // compaction; without compactions L0 must not stop writes.
    opts.set_disable_auto_compactions(true);
    opts.set_level_zero_slowdown_writes_trigger(1000);
    opts.set_level_zero_stop_writes_trigger(1000);
    let mut table = BlockBasedOptions::default();
    table.set_block_size(512);
    table.set_block_restart_interval(2);
    table.set_data_block_index_type(index_type);
    table.set_data_block_hash_ratio(1.0);
    opts.set_block_based_table_factory(&table);
    opts
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Puts, overwrites and deletes among keys `range`, mirrored in `model`.
fn write_some(db: &DB, model: &mut Model, rng: &mut StdRng, range: std::ops::Range<u32>) {
    for _ in 0..range.len() {
        let k = key(rng.gen_range(range.clone()));
        if rng.gen_bool(0.1) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v: Vec<u8> = (0..rng.gen_range(1..40)).map(|_| rng.gen()).collect();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

fn check(db: &DB, model: &Model, what: &str) {
    for i in 0..1100 {
        let k = key(i);
        assert_eq!(
            db.get(&k).unwrap().as_deref(),
            model.get(&k).map(Vec::as_slice),
            "{what}: key {i}"
        );
    }
}

/// (tables with the hash index in every data block, tables without).
fn table_kinds(fs: &MemFileSystem) -> (usize, usize) {
    let (mut hashed, mut plain) = (0, 0);
    for name in fs.list(Path::new("/db")).unwrap() {
        if !name.ends_with(".sst") {
            continue;
        }
        let file = fs
            .open_random_access(&Path::new("/db").join(&name))
            .unwrap();
        let table = TableReader::open(file, name, Arc::new(BytewiseComparator)).unwrap();
        let p = table.properties();
        match p.data_block_index_type.as_str() {
            "binary_search_and_hash" => {
                assert_eq!(p.num_data_blocks_with_hash_index, p.num_data_blocks);
                hashed += 1;
            }
            "binary_search" => {
                assert_eq!(p.num_data_blocks_with_hash_index, 0);
                plain += 1;
            }
            other => panic!("unexpected data block index type {other:?}"),
        }
    }
    (hashed, plain)
}

/// Writes in `rounds`, taking a snapshot after each, so that flushed tables
/// keep several versions per key; then checks every snapshot and the
/// latest state.
fn write_and_check(
    db: &DB,
    model: &mut Model,
    rng: &mut StdRng,
    range: std::ops::Range<u32>,
    what: &str,
) {
    let mut snapshots = Vec::new();
    for _ in 0..4 {
        write_some(db, model, rng, range.clone());
        snapshots.push((db.snapshot(), model.clone()));
    }
    db.flush().unwrap();
    check(db, model, what);
    for (n, (snapshot, then)) in snapshots.iter().enumerate() {
        for i in 0..1100 {
            let k = key(i);
            assert_eq!(
                snapshot.get(&k).unwrap().as_deref(),
                then.get(&k).map(Vec::as_slice),
                "{what}: snapshot {n}, key {i}"
            );
        }
    }
}

#[test]
fn half_with_and_half_without_the_hash_index() {
    use DataBlockIndexType::{BinaryAndHash, BinarySearch};
    let fs = MemFileSystem::new();
    let mut rng = StdRng::seed_from_u64(17);
    let mut model = Model::new();

    let db = DB::open(&opts(&fs, BinaryAndHash), "/db").unwrap();
    write_and_check(&db, &mut model, &mut rng, 0..500, "first half, hashed");
    drop(db);

    // Overwrites keys of both halves; snapshots read across both kinds.
    let db = DB::open(&opts(&fs, BinarySearch), "/db").unwrap();
    check(&db, &model, "first half, reopened with binary search");
    write_and_check(&db, &mut model, &mut rng, 250..1000, "second half, plain");
    drop(db);
    let (hashed, plain) = table_kinds(&fs);
    assert!(hashed > 0 && plain > 0, "{hashed} hashed, {plain} plain");

    let db = DB::open(&opts(&fs, BinaryAndHash), "/db").unwrap();
    check(&db, &model, "both halves, reopened with the index");
    write_and_check(&db, &mut model, &mut rng, 0..1100, "third round, hashed");
    // Merges tables of both kinds into new ones with the index (files
    // moved down untouched keep their kind).
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    check(&db, &model, "compacted, hashed");
    drop(db);

    let db = DB::open(&opts(&fs, BinarySearch), "/db").unwrap();
    check(&db, &model, "compacted, reopened with binary search");
}
