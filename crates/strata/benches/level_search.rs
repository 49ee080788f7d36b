//! Finding the file of a level that may hold a key: the plain binary search
//! over full internal keys through the comparator trait object
//! (`Version::find_file_plain`, LevelDB's `FindFile`) against the search
//! over 8-byte key prefixes with the comparator resolved at compile time
//! (`Version::find_file`).
//!
//! Levels of 1,000, 10,000 and 100,000 files, searched for random keys:
//! - `u64_keys`: 8-byte big-endian integer keys, bytewise order; every
//!   file's prefix is distinct, so the integer search decides nearly alone;
//! - `u64_keys_reverse`: the same under reverse bytewise order;
//! - `shared_prefix_16b`: 16-byte keys whose first 8 bytes are the same in
//!   every file, the worst case: the search falls back to full-key
//!   comparisons over the whole level (still statically dispatched).
//!
//! Run: `cargo bench -p strata --bench level_search`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_kv::bench_internals::{InternalKeyComparator, Version, VersionBuilder, VersionEdit};
use strata_kv::key::{Comparator, InternalKey, ValueKind, MAX_SEQUENCE_NUMBER};
use strata_kv::{BytewiseComparator, ReverseBytewiseComparator};

const FILE_COUNTS: [usize; 3] = [1_000, 10_000, 100_000];
/// Targets cycled through by each benchmark; a power of two.
const TARGETS: usize = 4096;

/// How a key is made from an integer.
#[derive(Clone, Copy)]
enum KeyShape {
    /// The integer, 8 bytes big-endian.
    U64,
    /// A fixed 8-byte prefix, then the integer big-endian.
    SharedPrefix,
}

impl KeyShape {
    fn key(self, n: u64) -> Vec<u8> {
        match self {
            KeyShape::U64 => n.to_be_bytes().to_vec(),
            KeyShape::SharedPrefix => [*b"tenant01", n.to_be_bytes()].concat(),
        }
    }
}

/// Level 1 of `files` files over the whole u64 space, each covering the
/// first half of its stride, and `TARGETS` random lookup keys (about half of
/// them fall between files).
fn level(
    icmp: &InternalKeyComparator,
    shape: KeyShape,
    files: usize,
    reverse: bool,
) -> (Version, Vec<Vec<u8>>) {
    let stride = u64::MAX / files as u64;
    let mut edit = VersionEdit::new();
    for i in 0..files as u64 {
        let (lo, hi) = (i * stride, i * stride + stride / 2);
        let (lo, hi) = if reverse { (hi, lo) } else { (lo, hi) };
        let smallest = InternalKey::new(&shape.key(lo), 7, ValueKind::Value);
        let largest = InternalKey::new(&shape.key(hi), 7, ValueKind::Value);
        edit.add_file(1, i + 1, 1 << 20, smallest, largest, 7, 7);
    }
    let mut builder = VersionBuilder::new(icmp.clone(), &Version::empty());
    builder.apply(&edit, "bench", 0).expect("disjoint files");
    let version = builder.build();
    let mut rng = StdRng::seed_from_u64(42);
    let targets = (0..TARGETS)
        .map(|_| {
            let user = shape.key(rng.gen());
            let lookup = InternalKey::new(&user, MAX_SEQUENCE_NUMBER, ValueKind::Value);
            lookup.encoded().to_vec()
        })
        .collect();
    (version, targets)
}

fn level_search(c: &mut Criterion) {
    let cases: [(&str, Arc<dyn Comparator>, KeyShape, bool); 3] = [
        (
            "u64_keys",
            Arc::new(BytewiseComparator),
            KeyShape::U64,
            false,
        ),
        (
            "u64_keys_reverse",
            Arc::new(ReverseBytewiseComparator),
            KeyShape::U64,
            true,
        ),
        (
            "shared_prefix_16b",
            Arc::new(BytewiseComparator),
            KeyShape::SharedPrefix,
            false,
        ),
    ];
    for (name, user, shape, reverse) in cases {
        let icmp = InternalKeyComparator::new(user);
        let mut group = c.benchmark_group(format!("level_search/{name}"));
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(3));
        for files in FILE_COUNTS {
            let (version, targets) = level(&icmp, shape, files, reverse);
            for (i, t) in targets.iter().enumerate().take(64) {
                let plain = version.find_file_plain(&icmp, 1, t);
                assert_eq!(version.find_file(&icmp, 1, t), plain, "target {i}");
            }
            let mut next = 0usize;
            group.bench_function(BenchmarkId::new("plain", files), |b| {
                b.iter(|| {
                    next = next.wrapping_add(1);
                    let target = &targets[next % TARGETS];
                    version.find_file_plain(&icmp, 1, black_box(target))
                })
            });
            group.bench_function(BenchmarkId::new("prefix", files), |b| {
                b.iter(|| {
                    next = next.wrapping_add(1);
                    let target = &targets[next % TARGETS];
                    version.find_file(&icmp, 1, black_box(target))
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, level_search);
criterion_main!(benches);
