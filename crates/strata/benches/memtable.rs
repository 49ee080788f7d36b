//! The memtable's insert and point lookup, alone: W6's shape (16-byte
//! random keys, 100-byte values) inserted into a fresh memtable in runs of
//! one writer, and lookups of present keys in a full one. The skiplist
//! search is bound by cache misses (one per node visited), so this is where
//! changes to the search's memory access show without a flush thread, a
//! log or a block cache beside them.
//!
//! Run: `cargo bench -p strata-kv --bench memtable`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::bench_internals::BenchMemTable;

/// Entries in the memtable: the first is about one 64 MiB write buffer's
/// worth of W6's entries in the last level of the cache hierarchy, the
/// second several times larger than any cache.
const SIZES: [usize; 2] = [50_000, 400_000];
const VALUE: [u8; 100] = [7; 100];

fn random_keys(n: usize, seed: u64) -> Vec<[u8; 16]> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen::<[u8; 16]>()).collect()
}

fn insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("memtable_insert_random");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    for n in SIZES {
        let entries: Vec<([u8; 16], [u8; 100])> =
            random_keys(n, 1).into_iter().map(|k| (k, VALUE)).collect();
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &entries, |b, entries| {
            b.iter_batched(
                || BenchMemTable::new(64 << 20),
                |mem| {
                    // Runs of ten, as W1's batches: the splice is kept
                    // within a run only.
                    for (i, run) in entries.chunks(10).enumerate() {
                        mem.insert_run((i * 10 + 1) as u64, run);
                    }
                    mem
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

fn get(c: &mut Criterion) {
    let mut group = c.benchmark_group("memtable_get_random");
    group.sample_size(20);
    for n in SIZES {
        let keys = random_keys(n, 2);
        let mem = BenchMemTable::new(64 << 20);
        let entries: Vec<([u8; 16], [u8; 100])> = keys.iter().map(|&k| (k, VALUE)).collect();
        mem.insert_run(1, &entries);
        let probes = random_keys(4096, 3)
            .iter()
            .map(|p| keys[u64::from_le_bytes(p[..8].try_into().unwrap()) as usize % n])
            .collect::<Vec<_>>();
        group.throughput(Throughput::Elements(probes.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                for p in &probes {
                    black_box(mem.get_len(p, u64::MAX >> 8));
                }
            });
        });
    }
    group.finish();
}

criterion_group!(benches, insert, get);
criterion_main!(benches);
