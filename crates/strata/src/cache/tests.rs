//! Tests of the sharded LRU cache: eviction order, the capacity bound,
//! replacement, erasure, counters, threads, and a model comparison.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

/// A single-shard cache, so eviction order is fully determined.
fn one_shard(capacity: usize) -> LruCache<u32, u32> {
    LruCache::new(capacity, Some(0))
}

#[test]
fn evicts_least_recently_used_first() {
    let cache = one_shard(3);
    for key in 1..=3 {
        assert!(cache.insert(key, key * 10, 1));
    }
    assert_eq!(cache.keys_mru_to_lru(0), [3, 2, 1]);
    assert_eq!(cache.get(&1), Some(10)); // 1 is marked: it gets a second chance
    assert_eq!(cache.keys_mru_to_lru(0), [3, 2, 1], "a hit moves nothing");
    assert!(cache.insert(4, 40, 1));
    assert_eq!(cache.get(&2), None);
    assert!(cache.insert(5, 50, 1));
    assert_eq!(cache.get(&3), None);
    assert_eq!(cache.keys_mru_to_lru(0), [5, 4, 1]);

    // A large entry evicts as many as it needs, oldest first.
    assert!(cache.insert(6, 60, 2));
    assert_eq!(cache.keys_mru_to_lru(0), [6, 5]);
    assert_eq!((cache.usage(), cache.len()), (3, 2));
    cache.check_invariants();
}

#[test]
fn replacing_a_key_updates_value_and_charge() {
    let cache = one_shard(100);
    assert!(cache.insert(1, 10, 30));
    assert!(cache.insert(2, 20, 30));
    assert!(cache.insert(1, 11, 50));
    assert_eq!((cache.usage(), cache.len()), (80, 2));
    assert_eq!(cache.keys_mru_to_lru(0), [1, 2]);
    assert_eq!(cache.get(&1), Some(11));

    // The old charge is released before eviction, so shrinking never evicts.
    assert!(cache.insert(1, 12, 5));
    assert_eq!((cache.usage(), cache.len()), (35, 2));

    // Growing evicts others, never the replaced entry itself.
    assert!(cache.insert(1, 13, 100));
    assert_eq!(cache.keys_mru_to_lru(0), [1]);
    assert_eq!(cache.usage(), 100);
    cache.check_invariants();
}

#[test]
fn erase_and_erase_if() {
    let cache = LruCache::new(1000, Some(2));
    for key in 0..20u32 {
        assert!(cache.insert(key, key, 10));
    }
    cache.erase(&7);
    cache.erase(&7); // absent: no effect
    cache.erase(&100);
    assert_eq!((cache.len(), cache.usage()), (19, 190));
    assert_eq!(cache.get(&7), None);

    cache.erase_if(|key| key % 2 == 0);
    assert_eq!((cache.len(), cache.usage()), (9, 90));
    for key in 0..20u32 {
        let expected = (key % 2 == 1 && key != 7).then_some(key);
        assert_eq!(cache.get(&key), expected, "key {key}");
    }
    cache.erase_if(|_| true);
    assert!(cache.is_empty());
    assert_eq!(cache.usage(), 0);
    cache.check_invariants();
}

#[test]
fn oversize_entry_is_rejected() {
    let cache = one_shard(100);
    assert!(cache.insert(1, 10, 60));
    assert!(!cache.insert(2, 20, 101));
    assert_eq!(cache.get(&2), None);
    assert_eq!(cache.get(&1), Some(10), "a rejected insert evicts nothing");

    // An entry exactly the capacity fits, evicting everything else.
    assert!(cache.insert(3, 30, 100));
    assert_eq!(cache.keys_mru_to_lru(0), [3]);

    // Replacing with an oversize value removes the old one: no stale value.
    assert!(!cache.insert(3, 31, 101));
    assert_eq!(cache.get(&3), None);
    assert!(cache.is_empty());

    // The bound is the shard's share, not the total.
    let sharded: LruCache<u32, u32> = LruCache::new(100, Some(2));
    assert!(!sharded.insert(1, 1, 26));
    assert!(sharded.insert(1, 1, 25));
    cache.check_invariants();
    sharded.check_invariants();
}

#[test]
fn capacity_zero_caches_nothing() {
    let cache = LruCache::new(0, None);
    assert!(!cache.insert(1u32, 1u32, 0));
    assert!(!cache.insert(2, 2, 1));
    assert!(cache.is_empty());
    assert_eq!(cache.get(&1), None);

    let cache = one_shard(10);
    assert!(cache.insert(1, 1, 0));
    assert!(cache.insert(2, 2, 5));
    cache.set_capacity(0);
    assert!(cache.is_empty(), "zero-charge entries go too");
    assert!(!cache.insert(3, 3, 0));
    cache.check_invariants();
}

#[test]
fn set_capacity_evicts_to_the_new_bound() {
    let cache = LruCache::new(1000, Some(1));
    for key in 0..100u32 {
        cache.insert(key, key, 10);
    }
    // Keys do not split evenly over the shards, so each may hold less.
    assert!(cache.usage() > 500 && cache.usage() <= 1000);
    cache.set_capacity(301);
    assert_eq!(cache.capacity(), 301);
    assert!(cache.usage() <= 301);
    // Each shard keeps its most recent entries.
    for shard in 0..cache.num_shards() {
        let keys = cache.keys_mru_to_lru(shard);
        assert!(keys.windows(2).all(|pair| pair[0] > pair[1]), "{keys:?}");
    }
    cache.set_capacity(2000);
    assert!(cache.insert(1000, 0, 1000));
    cache.check_invariants();
}

#[test]
fn usage_never_exceeds_capacity_under_random_operations() {
    for seed in 0..8u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let capacity = rng.gen_range(0..5000);
        let shard_bits = rng.gen_range(0..4);
        let cache = LruCache::new(capacity, Some(shard_bits));
        for step in 0..5000 {
            let key = rng.gen_range(0..300u32);
            if rng.gen_bool(0.5) {
                cache.insert(key, key, rng.gen_range(0..200));
            } else if let Some(value) = cache.get(&key) {
                assert_eq!(value, key, "seed {seed} step {step}");
            }
            let usage = cache.usage();
            assert!(
                usage <= capacity,
                "seed {seed} step {step}: {usage} > {capacity}"
            );
        }
        cache.check_invariants();
    }
}

#[test]
fn counts_hits_and_misses() {
    let cache = LruCache::new(1 << 20, None);
    for key in 0..10u32 {
        cache.insert(key, key, 1);
    }
    for key in 0..15u32 {
        cache.get(&key);
    }
    cache.get(&3);
    assert_eq!((cache.hits(), cache.misses()), (11, 5));
    cache.erase(&3);
    cache.get(&3);
    assert_eq!((cache.hits(), cache.misses()), (11, 6));
}

#[test]
fn default_shard_bits_follow_rocksdb() {
    let kib = 1024;
    let mib = 1024 * kib;
    for (capacity, bits) in [
        (0, 0),
        (512 * kib, 0),
        (mib - 1, 0),
        (mib, 1),
        (2 * mib - 1, 1),
        (2 * mib, 2),
        (8 * mib, 4),
        (32 * mib, 6),
        (1 << 40, 6),
    ] {
        assert_eq!(default_shard_bits(capacity), bits, "capacity {capacity}");
    }
    assert_eq!(LruCache::<u32, u32>::new(8 * mib, None).num_shards(), 16);
    assert_eq!(LruCache::<u32, u32>::new(100, None).num_shards(), 1);
    let debug = format!("{:?}", LruCache::<u32, u32>::new(100, None));
    assert!(debug.contains("capacity: 100"), "{debug}");
}

#[test]
#[should_panic(expected = "num_shard_bits 20")]
fn too_many_shard_bits_panics() {
    LruCache::<u32, u32>::new(1 << 20, Some(SHARD_BITS_MAX + 1));
}

#[test]
fn concurrent_inserts_and_gets_keep_invariants() {
    const THREADS: u64 = 4;
    const KEYS: u64 = 4096;
    let capacity = 256 * 1024;
    let cache: Arc<LruCache<u64, Arc<u64>>> = Arc::new(LruCache::new(capacity, Some(2)));
    let deadline = Instant::now() + Duration::from_millis(500);
    let stop = Arc::new(AtomicBool::new(false));
    let gets = Arc::new(AtomicU64::new(0));

    let workers: Vec<_> = (0..THREADS)
        .map(|seed| {
            let cache = Arc::clone(&cache);
            let gets = Arc::clone(&gets);
            thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut ops = 0u64;
                while Instant::now() < deadline {
                    for _ in 0..256 {
                        let key = rng.gen_range(0..KEYS);
                        match rng.gen_range(0..100) {
                            0..=49 => {
                                gets.fetch_add(1, Ordering::Relaxed);
                                if let Some(value) = cache.get(&key) {
                                    // Values always belong to their key.
                                    assert_eq!(*value, key * 7, "thread seed {seed}");
                                }
                            }
                            // Batches hold several shards' locks at once,
                            // beside writers taking one.
                            50..=59 => {
                                let n = rng.gen_range(1..=GET_MANY_MAX);
                                let keys: Vec<u64> =
                                    (0..n).map(|_| rng.gen_range(0..KEYS)).collect();
                                let mut out = vec![None; n];
                                gets.fetch_add(n as u64, Ordering::Relaxed);
                                cache.get_many_with(&keys, |_, _| {}, &mut out);
                                for (key, value) in keys.iter().zip(&out) {
                                    if let Some(value) = value {
                                        assert_eq!(**value, key * 7, "thread seed {seed}");
                                    }
                                }
                            }
                            60..=94 => {
                                cache.insert(key, Arc::new(key * 7), rng.gen_range(1..2000));
                            }
                            _ => cache.erase(&key),
                        }
                        ops += 1;
                    }
                }
                ops
            })
        })
        .collect();
    // Meanwhile, the total never exceeds the capacity.
    let watcher = {
        let cache = Arc::clone(&cache);
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                assert!(cache.usage() <= capacity);
                thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let ops: u64 = workers.into_iter().map(|w| w.join().expect("worker")).sum();
    stop.store(true, Ordering::Relaxed);
    watcher.join().expect("watcher");

    assert!(ops > 0);
    cache.check_invariants();
    assert!(cache.usage() <= capacity);
    assert!(cache.len() <= KEYS as usize);
    let listed: usize = (0..cache.num_shards())
        .map(|shard| cache.keys_mru_to_lru(shard).len())
        .sum();
    assert_eq!(cache.len(), listed);
    assert_eq!(cache.hits() + cache.misses(), gets.load(Ordering::Relaxed));
}

/// One operation of the model test.
#[derive(Debug, Clone)]
enum Op {
    Insert { key: u8, value: u16, charge: usize },
    Get(u8),
    Erase(u8),
    EraseIf { modulus: u8, remainder: u8 },
    SetCapacity(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..16u8;
    prop_oneof![
        5 => (key.clone(), any::<u16>(), 0..40usize)
            .prop_map(|(key, value, charge)| Op::Insert { key, value, charge }),
        5 => key.clone().prop_map(Op::Get),
        1 => key.prop_map(Op::Erase),
        1 => (1..5u8, 0..5u8).prop_map(|(modulus, remainder)| Op::EraseIf { modulus, remainder }),
        1 => (0..150usize).prop_map(Op::SetCapacity),
    ]
}

/// The obvious second-chance LRU: a queue of (key, value, charge, read),
/// most recent first; a hit sets `read`, and eviction moves a read entry at
/// the back to the front (clearing `read`) instead of dropping it.
struct Model {
    entries: VecDeque<(u8, u16, usize, bool)>,
    capacity: usize,
    hits: u64,
    misses: u64,
}

impl Model {
    fn usage(&self) -> usize {
        self.entries.iter().map(|&(_, _, charge, _)| charge).sum()
    }

    fn take(&mut self, key: u8) -> Option<(u8, u16, usize, bool)> {
        let at = self.entries.iter().position(|&(k, _, _, _)| k == key)?;
        self.entries.remove(at)
    }

    fn evict_while_over(&mut self, usage_max: usize) {
        while self.usage() > usage_max || (self.capacity == 0 && !self.entries.is_empty()) {
            let Some((key, value, charge, read)) = self.entries.pop_back() else {
                break;
            };
            if read {
                self.entries.push_front((key, value, charge, false));
            }
        }
    }

    fn apply(&mut self, op: &Op) -> Option<u16> {
        match *op {
            Op::Insert { key, value, charge } => {
                self.take(key);
                if self.capacity > 0 && charge <= self.capacity {
                    self.evict_while_over(self.capacity - charge);
                    self.entries.push_front((key, value, charge, false));
                }
                None
            }
            Op::Get(key) => {
                let found = self.entries.iter_mut().find(|e| e.0 == key);
                if let Some(entry) = found {
                    entry.3 = true;
                    self.hits += 1;
                    Some(entry.1)
                } else {
                    self.misses += 1;
                    None
                }
            }
            Op::Erase(key) => {
                self.take(key);
                None
            }
            Op::EraseIf { modulus, remainder } => {
                self.entries
                    .retain(|&(k, _, _, _)| k % modulus != remainder);
                None
            }
            Op::SetCapacity(capacity) => {
                self.capacity = capacity;
                self.evict_while_over(capacity);
                None
            }
        }
    }
}

proptest! {
    #[test]
    fn single_shard_matches_model(
        capacity in 0..150usize,
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let cache: LruCache<u8, u16> = LruCache::new(capacity, Some(0));
        let mut model = Model { entries: VecDeque::new(), capacity, hits: 0, misses: 0 };
        for (step, op) in ops.iter().enumerate() {
            let got = match *op {
                Op::Insert { key, value, charge } => {
                    let inserted = cache.insert(key, value, charge);
                    prop_assert_eq!(inserted, capacity_admits(&model, charge), "step {}", step);
                    None
                }
                Op::Get(key) => cache.get(&key),
                Op::Erase(key) => {
                    cache.erase(&key);
                    None
                }
                Op::EraseIf { modulus, remainder } => {
                    cache.erase_if(|k| k % modulus == remainder);
                    None
                }
                Op::SetCapacity(capacity) => {
                    cache.set_capacity(capacity);
                    None
                }
            };
            let expected = model.apply(op);
            prop_assert_eq!(got, expected, "step {} {:?}", step, op);
            let model_keys: Vec<u8> = model.entries.iter().map(|&(key, _, _, _)| key).collect();
            prop_assert_eq!(cache.keys_mru_to_lru(0), model_keys, "step {} {:?}", step, op);
            prop_assert_eq!(cache.usage(), model.usage());
            prop_assert_eq!(cache.len(), model.entries.len());
            prop_assert_eq!(cache.capacity(), model.capacity);
        }
        prop_assert_eq!((cache.hits(), cache.misses()), (model.hits, model.misses));
        cache.check_invariants();
    }
}

fn capacity_admits(model: &Model, charge: usize) -> bool {
    model.capacity > 0 && charge <= model.capacity
}

#[test]
fn get_with_shows_the_value_on_a_hit_only() {
    let cache = one_shard(100);
    cache.insert(1, 10, 1);
    let mut seen = Vec::new();
    assert_eq!(cache.get_with(&1, |v| seen.push(*v)), Some(10));
    assert_eq!(cache.get_with(&2, |v| seen.push(*v)), None);
    assert_eq!(seen, [10]);
    assert_eq!((cache.hits(), cache.misses()), (1, 1));
}

#[test]
fn get_many_with_answers_as_gets_do() {
    let mut rng = StdRng::seed_from_u64(7);
    // Eight shards; a batch touches several, some more than once.
    let many: LruCache<u32, u32> = LruCache::new(1 << 20, Some(3));
    let one: LruCache<u32, u32> = LruCache::new(1 << 20, Some(3));
    for key in (0..400u32).filter(|k| k % 3 != 0) {
        many.insert(key, key * 10, 1);
        one.insert(key, key * 10, 1);
    }
    for _ in 0..500 {
        let n = rng.gen_range(0..=GET_MANY_MAX);
        // Present, absent and repeated keys.
        let keys: Vec<u32> = (0..n).map(|_| rng.gen_range(0..420)).collect();
        let mut out = vec![Some(u32::MAX); n];
        let mut hits = Vec::new();
        many.get_many_with(&keys, |i, v| hits.push((i, *v)), &mut out);
        let expected: Vec<Option<u32>> = keys.iter().map(|k| one.get(k)).collect();
        assert_eq!(out, expected, "keys {keys:?}");
        let expected_hits: Vec<(usize, u32)> = expected
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i, v)))
            .collect();
        assert_eq!(hits, expected_hits);
    }
    assert_eq!((many.hits(), many.misses()), (one.hits(), one.misses()));
    assert!(many.misses() > 0 && many.hits() > 0);
    many.check_invariants();
}

#[test]
fn get_many_with_marks_what_it_finds() {
    let cache = one_shard(3);
    for key in 1..=3 {
        assert!(cache.insert(key, key * 10, 1));
    }
    let mut out = [None, None];
    cache.get_many_with(&[3, 1], |_, _| {}, &mut out);
    assert_eq!(out, [Some(30), Some(10)]);
    // 1 and 3 get a second chance; 2 goes first.
    assert!(cache.insert(4, 40, 1));
    let mut kept = cache.keys_mru_to_lru(0);
    kept.sort_unstable();
    assert_eq!(kept, [1, 3, 4]);
}

#[test]
fn read_with_answers_in_place_and_marks_the_entry() {
    let cache = one_shard(3);
    for key in 1..=3 {
        assert!(cache.insert(key, key * 10, 1));
    }
    // An answer from the value, no clone handed out; a miss calls nothing.
    assert_eq!(cache.read_with(&1, |v| v + 1), Some(11));
    let mut called = false;
    assert_eq!(cache.read_with(&9, |_| called = true), None);
    assert!(!called);
    assert_eq!((cache.hits(), cache.misses()), (1, 1));
    // Read as a get is: 1 gets a second chance, 2 is evicted first.
    assert!(cache.insert(4, 40, 1));
    let mut kept = cache.keys_mru_to_lru(0);
    kept.sort_unstable();
    assert_eq!(kept, [1, 3, 4]);
    assert_eq!(cache.read_with(&2, |v| *v), None);
    cache.check_invariants();
}

/// The charge's per-entry overhead bounds what the cache's own bookkeeping
/// takes, whatever the entries do: steady churn, entries growing larger,
/// the capacity cut, most entries erased. The index takes at most its
/// share per entry held (besides a small table); the slab at most its
/// share per entry at the peak (it keeps its slots) plus one chunk. A
/// hash table that grows under churn and never shrinks, or a slab that
/// doubles, fails this.
#[test]
fn bookkeeping_stays_within_the_charged_overhead() {
    use super::lru_list::{LruList, CHUNK_SLOTS};
    use super::lru_shard::{key_hash, Dropped, LruShard, INDEX_SLACK_BYTES};
    type Key = (u64, u64);
    type Value = [u64; 12];
    type Shard = LruShard<Key, Value>;
    let per_slot = LruList::<Key, Value>::BYTES_PER_ENTRY_MAX;
    let per_index = Shard::INDEX_BYTES_PER_ENTRY_MAX;
    assert_eq!(Shard::ENTRY_OVERHEAD_BYTES, per_slot + per_index);
    let mut peak = 0;
    // Checks the bounds (O(1)) after every operation, the invariants
    // (O(entries)) every `every` operations.
    let mut check = |shard: &Shard, phase: &str, i: u64, every: u64| {
        peak = peak.max(shard.len());
        let index_max = shard.len() * per_index + INDEX_SLACK_BYTES;
        let slab_max = (peak + CHUNK_SLOTS) * per_slot;
        let (index, slab) = (shard.index_bytes(), shard.slab_bytes());
        assert!(
            index <= index_max && slab <= slab_max,
            "{phase}: index {index} bytes (most {index_max}), slab {slab} bytes (most \
             {slab_max}) for {} entries, {peak} at the peak",
            shard.len()
        );
        if i.is_multiple_of(every) {
            shard.check_invariants();
        }
    };
    let mut rng = StdRng::seed_from_u64(26);
    let mut shard = Shard::new(1_000_000);
    let mut dropped = Dropped::new();
    let mut put = |shard: &mut Shard, i: u64, charge: usize| {
        let key = (rng.gen_range(0..1_000_000), i);
        assert!(shard.insert(key, key_hash(&key), [i; 12], charge, &mut dropped));
        dropped.clear();
    };
    // Steady churn at about 1,000 entries.
    for i in 0..100_000u64 {
        put(&mut shard, i, 700 + (i as usize * 7919) % 600);
        check(&shard, "churn", i, 1_000);
    }
    let full = shard.len();
    // Entries ten times larger: a tenth as many.
    for i in 100_000..130_000u64 {
        put(&mut shard, i, 10_000);
        check(&shard, "larger entries", i, 1_000);
    }
    assert!(
        shard.len() * 5 < full,
        "{} entries of {full} left",
        shard.len()
    );
    // Back to small entries, then the capacity cut to a twentieth.
    for i in 130_000..160_000u64 {
        put(&mut shard, i, 1_000);
        check(&shard, "small again", i, 1_000);
    }
    let mut dropped = Dropped::new();
    shard.set_capacity(50_000, &mut dropped);
    check(&shard, "capacity cut", 0, 1);
    shard.set_capacity(1_000_000, &mut dropped);
    for i in 160_000..190_000u64 {
        put(&mut shard, i, 1_000);
    }
    // Most entries erased, then all but a few.
    shard.remove_if(&|key: &Key| !key.1.is_multiple_of(16), &mut dropped);
    check(&shard, "erased", 0, 1);
    shard.remove_if(&|key: &Key| !key.1.is_multiple_of(1024), &mut dropped);
    check(&shard, "nearly empty", 0, 1);
}
