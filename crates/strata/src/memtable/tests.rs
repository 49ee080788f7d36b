use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::thread;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::*;
use crate::iter::InternalIterator;
use crate::key::{BytewiseComparator, Comparator, ParsedInternalKey};

/// (user key, newest first) -> (kind, value): the memtable's order under the
/// bytewise comparator, since sequence numbers are unique.
type Model = BTreeMap<(Vec<u8>, Reverse<u64>), (ValueKind, Vec<u8>)>;

fn new_mem() -> Arc<MemTable> {
    Arc::new(MemTable::new(
        InternalKeyComparator::new(Arc::new(BytewiseComparator)),
        64 << 20,
    ))
}

fn ikey(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    InternalKey::new(user_key, seq, kind).encoded().to_vec()
}

fn model_entries(model: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .map(|((k, Reverse(seq)), (kind, v))| (ikey(k, *seq, *kind), v.clone()))
        .collect()
}

fn model_get<'a>(model: &'a Model, user_key: &[u8], seq: u64) -> Option<MemTableGet<'a>> {
    let from = (user_key.to_vec(), Reverse(seq));
    let ((k, _), (kind, v)) = model.range(from..).next()?;
    (k == user_key).then_some(match kind {
        ValueKind::Value => MemTableGet::Value(v),
        ValueKind::Deletion | ValueKind::RangeDeletion => MemTableGet::Deleted,
        ValueKind::Merge => MemTableGet::Merge,
    })
}

fn collect_forward(it: &mut MemTableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    out
}

fn collect_backward(it: &mut MemTableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    out.reverse();
    out
}

fn random_user_key(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..4);
    (0..len).map(|_| rng.gen_range(b'a'..=b'd')).collect()
}

/// Fills a memtable and a model with `n` writes in random sequence order.
fn fill_random(rng: &mut StdRng, n: u64) -> (Arc<MemTable>, Model) {
    let mem = new_mem();
    let mut model = Model::new();
    let mut seqs: Vec<u64> = (1..=n).collect();
    seqs.shuffle(rng);
    for seq in seqs {
        let key = random_user_key(rng);
        let kind = if rng.gen_bool(0.2) {
            ValueKind::Deletion
        } else {
            ValueKind::Value
        };
        let value: Vec<u8> = (0..rng.gen_range(0..20)).map(|_| rng.gen()).collect();
        mem.add(seq, kind, &key, &value);
        model.insert((key, Reverse(seq)), (kind, value));
    }
    (mem, model)
}

#[test]
fn random_writes_match_model() {
    let seeds = if cfg!(miri) { 1 } else { 4 };
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mem, model) = fill_random(&mut rng, 600);
        let want = model_entries(&model);
        let mut it = mem.iter();
        assert!(collect_forward(&mut it) == want, "seed {seed}: forward");
        assert!(collect_backward(&mut it) == want, "seed {seed}: backward");
        let deletes = model
            .values()
            .filter(|(k, _)| *k == ValueKind::Deletion)
            .count();
        assert_eq!((mem.num_entries(), mem.num_deletes()), (600, deletes));
        assert_eq!(
            (mem.first_sequence(), mem.largest_sequence()),
            (Some(1), Some(600))
        );
        for _ in 0..if cfg!(miri) { 50 } else { 500 } {
            let key = random_user_key(&mut rng);
            let seq = rng.gen_range(0..=650);
            assert_eq!(
                mem.get(&key, seq),
                model_get(&model, &key, seq),
                "seed {seed}"
            );
        }
        check_seeks(&mut rng, &mut it, &want, seed, mem.comparator());
    }
}

/// Random `seek` and `seek_for_prev` targets against the sorted model entries.
fn check_seeks(
    rng: &mut StdRng,
    it: &mut MemTableIterator,
    want: &[(Vec<u8>, Vec<u8>)],
    seed: u64,
    cmp: &InternalKeyComparator,
) {
    for _ in 0..if cfg!(miri) { 50 } else { 500 } {
        let target = ikey(
            &random_user_key(rng),
            rng.gen_range(0..=650),
            ValueKind::Value,
        );
        let at = want.partition_point(|(k, _)| cmp.compare(k, &target) == CmpOrdering::Less);
        it.seek(&target);
        assert_eq!(
            it.valid().then(|| it.key().to_vec()),
            want.get(at).map(|e| e.0.clone()),
            "seed {seed}"
        );
        let before = want.partition_point(|(k, _)| cmp.compare(k, &target) != CmpOrdering::Greater);
        it.seek_for_prev(&target);
        let expected = before.checked_sub(1).map(|i| want[i].0.clone());
        assert_eq!(
            it.valid().then(|| it.key().to_vec()),
            expected,
            "seed {seed}"
        );
    }
    // Exact hits: seek_for_prev stays on the key itself.
    for (k, v) in want.iter().step_by(7) {
        it.seek_for_prev(k);
        assert!(it.valid() && it.key() == &k[..] && it.value() == &v[..]);
    }
}

#[test]
fn empty_memtable() {
    let mem = new_mem();
    assert!(mem.is_empty());
    assert_eq!((mem.first_sequence(), mem.largest_sequence()), (None, None));
    assert_eq!(mem.get(b"a", MAX_SEQUENCE_NUMBER), None);
    let mut it = mem.iter();
    it.seek_to_first();
    assert!(!it.valid());
    it.seek_to_last();
    assert!(!it.valid());
    it.seek_for_prev(&ikey(b"a", 1, ValueKind::Value));
    assert!(!it.valid() && it.status().is_ok());
}

#[test]
fn snapshot_visibility_and_deletions() {
    let mem = new_mem();
    mem.add(10, ValueKind::Value, b"k", b"v10");
    mem.add(20, ValueKind::Deletion, b"k", b"");
    mem.add(30, ValueKind::Value, b"k", b"v30");
    mem.add(15, ValueKind::Value, b"k2", b"x");
    assert_eq!(mem.get(b"k", 9), None);
    assert_eq!(mem.get(b"k", 10), Some(MemTableGet::Value(b"v10")));
    assert_eq!(mem.get(b"k", 25), Some(MemTableGet::Deleted));
    assert_eq!(mem.get(b"k", u64::MAX), Some(MemTableGet::Value(b"v30")));
    assert_eq!(mem.get(b"k1", u64::MAX), None);
    assert_eq!(mem.get(b"", u64::MAX), None);
    assert_eq!(mem.num_deletes(), 1);
    let keys: Vec<_> = collect_forward(&mut mem.iter())
        .into_iter()
        .map(|(k, _)| {
            let ParsedInternalKey {
                user_key, sequence, ..
            } = parse_internal_key(&k).unwrap();
            (user_key.to_vec(), sequence)
        })
        .collect();
    let want = [
        (b"k".to_vec(), 30),
        (b"k".to_vec(), 20),
        (b"k".to_vec(), 10),
        (b"k2".to_vec(), 15),
    ];
    assert_eq!(keys, want);
}

#[test]
fn empty_and_large_entries() {
    let mem = new_mem();
    let big_value = vec![0xab; 100 << 10];
    let big_key = vec![b'z'; 300]; // longer than the stack seek-key buffer
    mem.add(1, ValueKind::Value, b"", b"");
    mem.add(2, ValueKind::Value, b"big", &big_value);
    mem.add(3, ValueKind::Value, &big_key, b"k");
    assert_eq!(mem.get(b"", 5), Some(MemTableGet::Value(b"")));
    assert_eq!(mem.get(b"big", 5), Some(MemTableGet::Value(&big_value[..])));
    assert_eq!(mem.get(&big_key, 5), Some(MemTableGet::Value(b"k")));
    assert!(mem.approximate_memory_usage() > big_value.len());
    let all = collect_forward(&mut mem.iter());
    assert_eq!(all.len(), 3);
    assert_eq!(all[0], (ikey(b"", 1, ValueKind::Value), Vec::new()));
}

#[test]
fn memory_usage_grows() {
    let mem = new_mem();
    let start = mem.approximate_memory_usage();
    let mut last = start;
    for seq in 1..=2000u64 {
        mem.add(seq, ValueKind::Value, &seq.to_be_bytes(), &[7; 50]);
        let now = mem.approximate_memory_usage();
        assert!(now >= last);
        last = now;
    }
    assert!(last - start >= 2000 * (50 + 16), "usage {start} -> {last}");
}

#[test]
#[should_panic(expected = "duplicate")]
fn duplicate_internal_key_panics() {
    let mem = new_mem();
    mem.add(1, ValueKind::Value, b"a", b"1");
    mem.add(1, ValueKind::Value, b"a", b"2");
}

#[test]
fn is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<MemTable>();
    check::<MemTableIterator>();
}

#[test]
fn iterator_outlives_caller_handle() {
    let mem = new_mem();
    mem.add(1, ValueKind::Value, b"a", b"1");
    let mut it = mem.iter();
    drop(mem);
    it.seek_to_first();
    assert_eq!(
        (it.key(), it.value()),
        (&ikey(b"a", 1, ValueKind::Value)[..], &b"1"[..])
    );
}

const CONCURRENT_WRITES: u64 = if cfg!(miri) { 120 } else { 50_000 };

fn concurrent_key(i: u64) -> [u8; 8] {
    // Scrambled so inserts land all over the list, not only at the end.
    (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5555).to_be_bytes()
}

/// One writer, three readers: readers scan while the writer inserts, and
/// every key published before a read must be found by it.
#[test]
fn concurrent_readers_see_consistent_list() {
    let mem = new_mem();
    let published = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    thread::scope(|s| {
        for reader in 0..3u64 {
            let (mem, published, done) = (&mem, &published, &done);
            s.spawn(move || read_while_writing(mem, published, done, reader));
        }
        for i in 1..=CONCURRENT_WRITES {
            mem.add(i, ValueKind::Value, &concurrent_key(i), &i.to_le_bytes());
            published.store(i, Ordering::Release);
        }
        done.store(true, Ordering::Release);
    });
    assert_eq!(mem.num_entries() as u64, CONCURRENT_WRITES);
}

fn read_while_writing(mem: &Arc<MemTable>, published: &AtomicU64, done: &AtomicBool, reader: u64) {
    let cmp = mem.comparator().clone();
    let mut rng = StdRng::seed_from_u64(reader);
    let mut it = mem.iter();
    let mut scans = 0;
    while !done.load(Ordering::Acquire) || scans == 0 {
        let known = published.load(Ordering::Acquire);
        let (mut count, mut prev) = (0u64, Vec::new());
        it.seek_to_first();
        while it.valid() {
            assert!(count == 0 || cmp.compare(&prev, it.key()) == CmpOrdering::Less);
            prev.clear();
            prev.extend_from_slice(it.key());
            count += 1;
            it.next();
        }
        assert!(count >= known, "scan saw {count} of {known} published");
        check_backward_steps(&mut it, &cmp, 100);
        for _ in 0..200 {
            let Some(i) = (known > 0).then(|| rng.gen_range(1..=known)) else {
                break;
            };
            let got = mem.get(&concurrent_key(i), MAX_SEQUENCE_NUMBER);
            assert_eq!(got, Some(MemTableGet::Value(&i.to_le_bytes()[..])));
        }
        scans += 1;
    }
}

/// Walks back up to `steps` entries from the last, checking strict order.
fn check_backward_steps(it: &mut MemTableIterator, cmp: &InternalKeyComparator, steps: usize) {
    let mut next_key: Option<Vec<u8>> = None;
    it.seek_to_last();
    for _ in 0..steps {
        if !it.valid() {
            break;
        }
        if let Some(next_key) = &next_key {
            assert_eq!(cmp.compare(it.key(), next_key), CmpOrdering::Less);
        }
        next_key = Some(it.key().to_vec());
        it.prev();
    }
}

/// `add` is safe to call from several threads: the writer lock serializes them.
#[test]
fn concurrent_writers_are_serialized() {
    let mem = new_mem();
    let per_writer = if cfg!(miri) { 50 } else { 5_000 };
    thread::scope(|s| {
        for writer in 0..2u64 {
            let mem = &mem;
            s.spawn(move || {
                for i in 0..per_writer {
                    let seq = 1 + i * 2 + writer;
                    mem.add(seq, ValueKind::Value, &concurrent_key(seq), b"v");
                }
            });
        }
    });
    let all = collect_forward(&mut mem.iter());
    assert_eq!(all.len() as u64, 2 * per_writer);
    let cmp = mem.comparator();
    assert!(all
        .windows(2)
        .all(|w| cmp.compare(&w[0].0, &w[1].0) == CmpOrdering::Less));
    assert_eq!(mem.largest_sequence(), Some(2 * per_writer));
}

/// A memtable built on blocks a flushed one gave back (`SpareBlocks`:
/// memory that still holds the old entries) reads only its own entries,
/// forwards and by key, and the old memtable's blocks were what it used.
#[test]
fn a_memtable_on_recycled_blocks_reads_only_its_own_entries() {
    let spare = SpareBlocks::new(64 << 20);
    let cmp = || InternalKeyComparator::new(Arc::new(BytewiseComparator));
    // About 6 MB of entries: several 2 MiB blocks.
    let n = if cfg!(miri) { 50 } else { 40_000 };
    let fill = |mem: &MemTable, tag: u8| {
        let mut model = Model::new();
        for i in 0..n {
            let key = format!("key{:08}", (i * 7919) % n).into_bytes();
            let value = vec![tag; 100 + i % 50];
            mem.add(i as u64 + 1, ValueKind::Value, &key, &value);
            model.insert((key, Reverse(i as u64 + 1)), (ValueKind::Value, value));
        }
        model
    };
    let old = MemTable::with_spare(cmp(), 64 << 20, Some(spare.clone()));
    fill(&old, b'o');
    drop(old);
    let kept = spare.len();
    if cfg!(all(target_os = "linux", not(miri))) {
        assert!(kept >= 2, "the flushed memtable gave back {kept} blocks");
    }
    let mem = Arc::new(MemTable::with_spare(cmp(), 64 << 20, Some(spare.clone())));
    let model = fill(&mem, b'n');
    assert!(
        spare.len() < kept || kept == 0,
        "the new memtable took no kept block"
    );
    assert_eq!(collect_forward(&mut mem.iter()), model_entries(&model));
    for ((key, Reverse(seq)), _) in model.iter().step_by(97) {
        assert_eq!(
            mem.get(key, MAX_SEQUENCE_NUMBER),
            model_get(&model, key, *seq),
            "key {key:?}"
        );
    }
}

/// `warm` (a waiting writer's walk to where its key goes) reads only: the
/// memtable holds the same entries after it, for keys present, absent,
/// empty and longer than the stack seek buffer, and on an empty memtable.
#[test]
fn warm_changes_nothing() {
    new_mem().warm(b"anything");
    let mut rng = StdRng::seed_from_u64(7);
    let (mem, model) = fill_random(&mut rng, 300);
    let long = vec![b'c'; SEEK_KEY_STACK_BYTES * 2];
    let mut keys: Vec<Vec<u8>> = (0..100).map(|_| random_user_key(&mut rng)).collect();
    keys.extend([Vec::new(), long, vec![0xff; 3]]);
    for key in &keys {
        mem.warm(key);
    }
    let mut it = mem.iter();
    assert!(collect_forward(&mut it) == model_entries(&model));
    assert_eq!(mem.num_entries(), 300);
}
