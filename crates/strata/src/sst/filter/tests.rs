use bytes::Bytes;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::{choose_num_probes, line_index};
use super::*;

const FILE: &str = "000042.sst";
const OFFSET: u64 = 1000;

fn open(bytes: Vec<u8>) -> BloomFilter {
    BloomFilter::new(Bytes::from(bytes), FILE, OFFSET).unwrap()
}

fn random_keys(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let len = rng.gen_range(1..=24);
            (0..len).map(|_| rng.gen()).collect()
        })
        .collect()
}

fn build(bits_per_key: f64, keys: &[Vec<u8>]) -> BloomFilter {
    let mut b = BloomFilterBuilder::new(bits_per_key);
    for k in keys {
        b.add_key(k);
    }
    open(b.finish())
}

/// Inserts `n` keys "k<i>" and probes `n` keys "a<i>", none of them added.
fn false_positive_rate(bits_per_key: f64, n: u64) -> f64 {
    let mut b = BloomFilterBuilder::new(bits_per_key);
    for i in 0..n {
        b.add_key(format!("k{i}").as_bytes());
    }
    let f = open(b.finish());
    for i in 0..n {
        assert!(f.may_contain(format!("k{i}").as_bytes()), "false negative");
    }
    let hits = (0..n)
        .filter(|i| f.may_contain(format!("a{i}").as_bytes()))
        .count();
    let rate = hits as f64 / n as f64;
    println!(
        "bits_per_key {bits_per_key}: num_probes {}, {} bytes, false-positive rate {:.4}%",
        f.num_probes(),
        f.size_bytes(),
        rate * 100.0
    );
    rate
}

#[test]
fn no_false_negatives() {
    let seed = 0x5eed_f11e;
    println!("seed {seed:#x}");
    let mut rng = StdRng::seed_from_u64(seed);
    let keys = random_keys(&mut rng, 10_000);
    for bits_per_key in [1.0, 5.0, 10.0, 20.0] {
        let f = build(bits_per_key, &keys);
        for k in &keys {
            assert!(f.may_contain(k), "bits_per_key {bits_per_key}: lost {k:?}");
            f.prefetch(filter_hash(k));
        }
    }
}

#[test]
fn false_positive_rate_at_10_bits_per_key() {
    let rate = false_positive_rate(10.0, 100_000);
    assert!(rate < 0.012, "rate {rate}");
}

#[test]
fn false_positive_rate_at_20_bits_per_key() {
    let rate = false_positive_rate(20.0, 100_000);
    assert!(rate < 0.001, "rate {rate}");
}

#[test]
fn size_and_probes_follow_bits_per_key() {
    let mut b = BloomFilterBuilder::new(10.0);
    for i in 0..1_000u32 {
        b.add_hash(u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }
    let f = open(b.finish());
    assert_eq!(f.num_lines(), 20); // ceil(1000 * 10 / 512)
    assert_eq!(f.size_bytes(), 20 * 64 + 5);
    assert_eq!(f.num_probes(), 6);

    let mut b = BloomFilterBuilder::new(10.0);
    b.add_key(b"only");
    let f = open(b.finish());
    assert_eq!(f.num_lines(), 1);
    assert!(f.may_contain(b"only"));
}

#[test]
fn num_probes_choice() {
    assert_eq!(choose_num_probes(1_000), 1);
    assert_eq!(choose_num_probes(5_000), 3);
    assert_eq!(choose_num_probes(10_000), 6);
    assert_eq!(choose_num_probes(20_000), 11);
    assert_eq!(choose_num_probes(100_000), 23);
    let mut previous = 1;
    for millibits in (1_000..=100_000).step_by(10) {
        let k = choose_num_probes(millibits);
        assert!(k == previous || k == previous + 1, "{millibits}: {k}");
        previous = k;
    }
}

#[test]
fn line_index_is_in_range() {
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..10_000 {
        let hash: u64 = rng.gen();
        let num_lines = rng.gen_range(1..=u32::MAX);
        assert!(line_index(hash, num_lines) < num_lines as usize);
        assert_eq!(line_index(hash, 1), 0);
    }
    assert_eq!(line_index(u64::MAX, u32::MAX), u32::MAX as usize - 1);
}

#[test]
fn builder_resets_after_finish() {
    let mut b = BloomFilterBuilder::new(10.0);
    for i in 0..500u32 {
        b.add_key(&i.to_le_bytes());
    }
    assert_eq!(b.num_added(), 500);
    let first = b.finish();
    assert_eq!(b.num_added(), 0);

    // A second table's filter holds only its own keys...
    b.add_key(b"second");
    assert_eq!(b.num_added(), 1);
    let second = open(b.finish());
    assert_eq!(second.num_lines(), 1);
    assert!(second.may_contain(b"second"));
    // ...and the same keys again give byte-identical output.
    for i in 0..500u32 {
        b.add_key(&i.to_le_bytes());
    }
    assert_eq!(b.finish(), first);
    // After a reset even a key equal to the last one counts.
    b.add_key(b"x");
    b.finish();
    b.add_key(b"x");
    assert_eq!(b.num_added(), 1);
}

#[test]
fn zero_keys_give_a_filter_that_contains_nothing() {
    let mut b = BloomFilterBuilder::new(10.0);
    let bytes = b.finish();
    assert_eq!(bytes, [0xFF, 0x00, 6, 0x00, 0x00]);
    let f = open(bytes);
    assert_eq!(f.num_lines(), 0);
    assert_eq!(f.size_bytes(), METADATA_BYTES);
    let mut rng = StdRng::seed_from_u64(1);
    for _ in 0..1_000 {
        let hash = rng.gen();
        assert!(!f.may_contain_hash(hash));
        f.prefetch(hash);
    }
    assert!(!f.may_contain(b""));
}

/// The filter bytes for fixed keys never change: a change here is a format
/// change and needs a new format version. Also pins the worked example in
/// docs/format/filter.md.
#[test]
fn format_is_stable() {
    let hash = filter_hash(b"strata");
    assert_eq!(hash, 0x4b61_a189_7bfc_215f);
    assert_eq!(line_index(hash, 20), 5);
    assert_eq!(line_index(hash, 1000), 294);
    let mut b = BloomFilterBuilder::new(10.0);
    b.add_key(b"strata");
    let bytes = b.finish();
    assert_eq!(bytes.len(), 64 + 5);
    let set_bits: Vec<usize> = (0..512)
        .filter(|bit| bytes[bit / 8] & (1 << (bit % 8)) != 0)
        .collect();
    assert_eq!(set_bits, [172, 247, 292, 337, 431, 439]);
    assert_eq!(bytes[30], 0x80); // bit 247 = byte 30, bit 7
    assert_eq!(&bytes[64..], [0xFF, 0x00, 6, 0x00, 0x00]);

    let mut b = BloomFilterBuilder::new(10.0);
    for i in 0..100 {
        b.add_key(format!("key{i}").as_bytes());
    }
    let bytes = b.finish();
    assert_eq!(bytes.len(), 2 * 64 + 5);
    assert_eq!(xxhash_rust::xxh3::xxh3_64(&bytes), 0xe166_1d53_8382_1511);
}

#[test]
fn corrupt_metadata_is_corruption() {
    let mut b = BloomFilterBuilder::new(10.0);
    for i in 0..100u32 {
        b.add_key(&i.to_be_bytes());
    }
    let good = b.finish();
    let meta_at = good.len() - METADATA_BYTES;
    let cases: &[(usize, u8, &str)] = &[
        (0, 0x00, "marker"),
        (0, 0xFE, "marker"),
        (1, 0x01, "sub-implementation"),
        (1, 0xFF, "sub-implementation"),
        (2, 0, "num_probes"),
        (2, 31, "num_probes"),
        (2, 255, "num_probes"),
        (3, 1, "reserved"),
        (4, 0x80, "reserved"),
    ];
    for &(index, value, what) in cases {
        let mut bad = good.clone();
        bad[meta_at + index] = value;
        let err = BloomFilter::new(Bytes::from(bad), FILE, OFFSET).unwrap_err();
        let message = err.to_string();
        assert!(err.is_corruption(), "{message}");
        assert!(message.contains(FILE), "{message}");
        assert!(message.contains(what), "{what}: {message}");
        let expected_offset = OFFSET + (meta_at + index) as u64;
        assert!(
            message.contains(&format!("offset {expected_offset}")),
            "{message}"
        );
    }
    // Any number of probes within 1..=30 is accepted, whoever wrote it.
    let mut other = good.clone();
    other[meta_at + 2] = 30;
    assert_eq!(open(other).num_probes(), 30);
}

#[test]
fn bad_lengths_are_corruption() {
    for len in 0..METADATA_BYTES {
        let err = BloomFilter::new(Bytes::from(vec![0xFF; len]), FILE, OFFSET).unwrap_err();
        assert!(err.is_corruption());
        assert!(err.to_string().contains("metadata"), "{err}");
    }
    for lines_bytes in [1, 63, 65, 127] {
        let mut bytes = vec![0u8; lines_bytes];
        bytes.extend_from_slice(&[0xFF, 0, 6, 0, 0]);
        let err = BloomFilter::new(Bytes::from(bytes), FILE, OFFSET).unwrap_err();
        assert!(err.is_corruption());
        assert!(err.to_string().contains("multiple of 64"), "{err}");
    }
    // The disabled builder's empty output is not a filter.
    let bytes = BloomFilterBuilder::new(0.0).finish();
    assert!(BloomFilter::new(Bytes::from(bytes), FILE, OFFSET)
        .unwrap_err()
        .is_corruption());
}

/// Arbitrary lines followed by a metadata trailer that is often valid, so
/// that probes, not just validation, see arbitrary bytes.
fn filter_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(any::<u8>(), 0..=4 * 64 + 2),
        prop_oneof![Just(0xFFu8), any::<u8>()],
        prop_oneof![Just(0u8), any::<u8>()],
        prop_oneof![1u8..=30, any::<u8>()],
        prop_oneof![Just([0u8, 0]), any::<[u8; 2]>()],
    )
        .prop_map(|(mut bytes, marker, sub_impl, num_probes, reserved)| {
            bytes.extend_from_slice(&[marker, sub_impl, num_probes, reserved[0], reserved[1]]);
            bytes
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop_oneof![prop::collection::vec(any::<u8>(), 0..300), filter_like_bytes()],
        hashes in prop::collection::vec(any::<u64>(), 1..32),
    ) {
        let len = bytes.len();
        let valid = len >= METADATA_BYTES && {
            let meta = &bytes[len - METADATA_BYTES..];
            meta[0] == 0xFF
                && meta[1] == 0
                && (1..=30).contains(&meta[2])
                && meta[3] == 0
                && meta[4] == 0
                && (len - METADATA_BYTES).is_multiple_of(64)
        };
        match BloomFilter::new(Bytes::from(bytes), FILE, OFFSET) {
            Ok(f) => {
                prop_assert!(valid);
                prop_assert_eq!(f.size_bytes(), len);
                prop_assert_eq!(f.num_lines() as usize * 64 + METADATA_BYTES, len);
                for hash in hashes {
                    f.prefetch(hash);
                    let _ = f.may_contain_hash(hash);
                }
                let _ = f.may_contain(b"key");
            }
            Err(e) => {
                prop_assert!(!valid);
                prop_assert!(e.is_corruption());
            }
        }
    }
}
