//! Packed tables: each key index kind against a model, multi-version keys,
//! other comparators, and hostile bytes (every flip, every truncation).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::env::{FileSystem, MemFileSystem};
use crate::iter::InternalIterator;
use crate::key::{
    BytewiseComparator, Comparator, InternalKey, InternalKeyComparator, ReverseBytewiseComparator,
    ValueKind, MAX_SEQUENCE_NUMBER,
};
use crate::Error;

/// (internal key, value) in internal-key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn ikey(user: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    InternalKey::new(user, seq, kind).encoded().to_vec()
}

fn write(entries: &Entries, cmp: &Arc<dyn Comparator>) -> Vec<u8> {
    let fs = MemFileSystem::new();
    let path = Path::new("/t/000001.sst");
    fs.create_dir_all(Path::new("/t")).unwrap();
    let mut b = PackedTableBuilder::new(cmp.clone(), fs.create(path).unwrap(), "000001.sst");
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    let estimate = b.estimated_file_size();
    let props = b.finish().unwrap();
    b.sync().unwrap();
    assert_eq!(props.num_entries, entries.len() as u64);
    let bytes = crate::env::read_file_to_vec(&fs, path).unwrap();
    assert_eq!(bytes.len() as u64, b.file_size());
    // The estimate (which cuts files to size) leaves out only the fixed
    // parts: header, properties, footer and the index's fixed fields.
    let fixed = 24 + props.encode().len() as u64 + 156 + 32;
    assert!(
        estimate <= b.file_size()
            && estimate + fixed + props.smallest_key.len() as u64 >= b.file_size(),
        "estimate {estimate}, file {} ({})",
        b.file_size(),
        props.index_type
    );
    bytes
}

fn open(
    bytes: &[u8],
    cmp: &Arc<dyn Comparator>,
    lazy: bool,
) -> crate::Result<Arc<PackedTableReader>> {
    let fs = MemFileSystem::new();
    let path = Path::new("/t/000001.sst");
    fs.create_dir_all(Path::new("/t")).unwrap();
    crate::env::write_file_atomic(&fs, path, bytes).unwrap();
    let file = fs.open_random_access(path).unwrap();
    PackedTableReader::open(&*file, "000001.sst", cmp.clone(), lazy).map(Arc::new)
}

/// Entries of `users` (sorted under `cmp`), each with 1..=versions
/// versions (seq descending), some deletions; or every entry at sequence 0
/// when `versions` is 0.
fn entries_of(
    rng: &mut StdRng,
    users: &[Vec<u8>],
    versions: u64,
    value_len: Option<usize>,
) -> Entries {
    let mut out = Vec::new();
    let mut seq = 1_000_000u64;
    for u in users {
        let n = if versions == 0 {
            1
        } else {
            rng.gen_range(1..=versions)
        };
        for _ in 0..n {
            let (s, kind) = if versions == 0 {
                (0, ValueKind::Value)
            } else if rng.gen_bool(0.1) {
                (seq, ValueKind::Deletion)
            } else {
                (seq, ValueKind::Value)
            };
            seq -= rng.gen_range(1..5);
            let len = value_len.unwrap_or_else(|| rng.gen_range(0..40));
            let v = if kind == ValueKind::Deletion && value_len.is_none() {
                Vec::new()
            } else {
                (0..len).map(|_| rng.gen()).collect()
            };
            out.push((ikey(u, s, kind), v));
        }
    }
    out
}

fn be_keys(ints: impl IntoIterator<Item = u64>, prefix: &[u8], width: usize) -> Vec<Vec<u8>> {
    ints.into_iter()
        .map(|i| {
            let mut k = prefix.to_vec();
            k.extend_from_slice(&i.to_be_bytes()[8 - width..]);
            k
        })
        .collect()
}

/// What a lookup of `user` at `seq` must find in `entries`.
fn model_get(
    entries: &Entries,
    icmp: &InternalKeyComparator,
    user: &[u8],
    seq: u64,
) -> Option<(u64, ValueKind, Vec<u8>)> {
    let lookup = ikey(user, seq, ValueKind::FOR_SEEK);
    let i = entries.partition_point(|(k, _)| icmp.compare(k, &lookup).is_lt());
    let (k, v) = entries.get(i)?;
    let p = crate::key::parse_internal_key(k).unwrap();
    (icmp.user_comparator().compare(p.user_key, user).is_eq())
        .then(|| (p.sequence, p.kind, v.clone()))
}

/// Every get, seek, seek_for_prev and both scan directions agree with the
/// model; `probes` adds user keys that may be absent.
fn check_against_model(
    t: &Arc<PackedTableReader>,
    entries: &Entries,
    cmp: &Arc<dyn Comparator>,
    probes: &[Vec<u8>],
) {
    let icmp = InternalKeyComparator::new(cmp.clone());
    // Scans.
    let mut it = t.iter();
    it.seek_to_first();
    for (k, v) in entries {
        assert!(it.valid());
        assert_eq!(it.key(), &k[..]);
        assert_eq!(it.value(), &v[..]);
        it.next();
    }
    assert!(!it.valid());
    it.status().unwrap();
    it.seek_to_last();
    for (k, v) in entries.iter().rev() {
        assert!(it.valid());
        assert_eq!(it.key(), &k[..]);
        assert_eq!(it.value(), &v[..]);
        it.prev();
    }
    assert!(!it.valid());
    // Gets and seeks, at several sequence numbers.
    let users = entries
        .iter()
        .map(|(k, _)| crate::key::extract_user_key(k).to_vec())
        .chain(probes.iter().cloned());
    for user in users {
        for seq in [MAX_SEQUENCE_NUMBER, 999_990, 500_000, 0] {
            let want = model_get(entries, &icmp, &user, seq);
            let lookup = ikey(&user, seq, ValueKind::FOR_SEEK);
            let got = t
                .get(&lookup)
                .unwrap()
                .map(|e| (e.sequence, e.kind, e.value.to_vec()));
            assert_eq!(got, want, "get {user:?} at {seq}");
            // The database's read (which may skip the tag) agrees.
            let value = t
                .get_value(&lookup, false)
                .unwrap()
                .map(|(_, k, v)| (k, v.to_vec()));
            assert_eq!(
                value,
                want.clone().map(|(_, k, v)| (k, v)),
                "get_value {user:?} at {seq}"
            );
            // With the tag read, the sequence number is the entry's.
            let with_seq = t
                .get_value(&lookup, true)
                .unwrap()
                .map(|(s, k, v)| (s, k, v.to_vec()));
            assert_eq!(with_seq, want.clone(), "get_value+seq {user:?} at {seq}");
            let i = entries.partition_point(|(k, _)| icmp.compare(k, &lookup).is_lt());
            it.seek(&lookup);
            match entries.get(i) {
                Some((k, _)) => assert_eq!(it.key(), &k[..], "seek {user:?}@{seq}"),
                None => assert!(!it.valid(), "seek {user:?}@{seq} past the end"),
            }
            let j = entries.partition_point(|(k, _)| icmp.compare(k, &lookup).is_le());
            it.seek_for_prev(&lookup);
            match j.checked_sub(1) {
                Some(j) => assert_eq!(it.key(), &entries[j].0[..], "seek_for_prev {user:?}@{seq}"),
                None => assert!(!it.valid(), "seek_for_prev {user:?}@{seq} before the start"),
            }
        }
    }
    t.verify().unwrap();
}

fn bytewise() -> Arc<dyn Comparator> {
    Arc::new(BytewiseComparator)
}

#[test]
fn dense_integer_keys_use_the_all_one_index() {
    let mut rng = StdRng::seed_from_u64(1);
    let cmp = bytewise();
    for (versions, value_len) in [(0, Some(20)), (0, None), (3, None), (2, Some(7))] {
        let users = be_keys(1000..1500, b"", 8);
        let entries = entries_of(&mut rng, &users, versions, value_len);
        let bytes = write(&entries, &cmp);
        let t = open(&bytes, &cmp, false).unwrap();
        assert_eq!(t.key_kind(), PackedKeyKind::AllOne);
        assert_eq!(t.properties().index_type, "packed_all_one");
        let probes = [
            be_keys([0, 999, 1500, u64::MAX], b"", 8),
            vec![
                vec![],
                vec![0; 7],
                vec![0; 9],
                b"\x00\x00\x00\x00\x00\x00\x03\xe8\x00".to_vec(),
            ],
        ]
        .concat();
        check_against_model(&t, &entries, &cmp, &probes);
    }
}

#[test]
fn single_values_with_sequence_numbers_skip_tags_only_when_visible() {
    // One version each, no deletion, sequence numbers 1000 down: a read at
    // 500,000 takes the tagless path, a read at 0 or 800 must read tags.
    let cmp = bytewise();
    let entries: Entries = (0..300u64)
        .map(|i| {
            (
                ikey(&i.to_be_bytes(), 1000 - i, ValueKind::Value),
                vec![i as u8; 4],
            )
        })
        .collect();
    let t = open(&write(&entries, &cmp), &cmp, false).unwrap();
    check_against_model(&t, &entries, &cmp, &[]);
    let icmp = InternalKeyComparator::new(cmp.clone());
    for (i, seq) in [(10u64, 800u64), (250, 800), (299, 701), (299, 700)] {
        let user = i.to_be_bytes();
        let want = model_get(&entries, &icmp, &user, seq).map(|(_, k, v)| (k, v));
        let got = t
            .get_value(&ikey(&user, seq, ValueKind::FOR_SEEK), false)
            .unwrap();
        assert_eq!(got.map(|(_, k, v)| (k, v.to_vec())), want, "{i} at {seq}");
    }
}

#[test]
fn all_one_with_a_common_prefix_and_short_suffix() {
    let mut rng = StdRng::seed_from_u64(2);
    let cmp = bytewise();
    // "user/" then a 3-byte counter, and a single key.
    let users = be_keys(70_000..70_300, b"user/", 3);
    let entries = entries_of(&mut rng, &users, 0, Some(5));
    let t = open(&write(&entries, &cmp), &cmp, true).unwrap();
    assert_eq!(t.key_kind(), PackedKeyKind::AllOne);
    let probes = vec![
        b"user".to_vec(),
        b"user/".to_vec(),
        b"user0".to_vec(),
        b"usea".to_vec(),
        b"user/\x01".to_vec(),
        b"user/\x01\x11\x70\xff".to_vec(),
        b"user/\xff".to_vec(),
    ];
    check_against_model(&t, &entries, &cmp, &probes);
    let one = entries_of(&mut rng, &[b"only".to_vec()], 3, None);
    let t = open(&write(&one, &cmp), &cmp, false).unwrap();
    assert_eq!(t.key_kind(), PackedKeyKind::AllOne);
    check_against_model(
        &t,
        &one,
        &cmp,
        &[b"onl".to_vec(), b"onlz".to_vec(), b"only\0".to_vec()],
    );
}

#[test]
fn integer_keys_with_gaps_use_the_bitmap_index() {
    let mut rng = StdRng::seed_from_u64(3);
    let cmp = bytewise();
    let mut ints = BTreeSet::new();
    while ints.len() < 700 {
        ints.insert(rng.gen_range(0..5_000u64) * 3);
    }
    let users = be_keys(ints.iter().copied(), b"t1:", 8);
    for versions in [0, 3] {
        let entries = entries_of(&mut rng, &users, versions, None);
        let t = open(&write(&entries, &cmp), &cmp, false).unwrap();
        assert_eq!(t.key_kind(), PackedKeyKind::Bitmap);
        let probes = be_keys([1, 2, 4, 14_999, 15_000, 20_000], b"t1:", 8);
        check_against_model(&t, &entries, &cmp, &probes);
    }
}

#[test]
fn other_keys_use_the_sorted_index() {
    let mut rng = StdRng::seed_from_u64(4);
    let cmp = bytewise();
    let mut users = BTreeSet::new();
    while users.len() < 600 {
        let len = rng.gen_range(0..20);
        // Few distinct bytes: many keys share their first eight bytes.
        users.insert(
            (0..len)
                .map(|_| rng.gen_range(b'a'..b'd'))
                .collect::<Vec<u8>>(),
        );
    }
    let users: Vec<Vec<u8>> = users.into_iter().collect();
    let probes: Vec<Vec<u8>> = (0..200)
        .map(|_| {
            (0..rng.gen_range(0..20))
                .map(|_| rng.gen_range(b'a'..b'e'))
                .collect()
        })
        .collect();
    for versions in [0, 4] {
        let entries = entries_of(&mut rng, &users, versions, None);
        let t = open(&write(&entries, &cmp), &cmp, false).unwrap();
        assert_eq!(t.key_kind(), PackedKeyKind::Sorted);
        check_against_model(&t, &entries, &cmp, &probes);
    }
    // Short keys of one length (the sorted index keeps a prefix array).
    let short: BTreeSet<Vec<u8>> = (0..300).map(|_| rng.gen::<[u8; 5]>().to_vec()).collect();
    let short: Vec<Vec<u8>> = short.into_iter().collect();
    let entries = entries_of(&mut rng, &short, 2, None);
    let t = open(&write(&entries, &cmp), &cmp, false).unwrap();
    assert_eq!(t.key_kind(), PackedKeyKind::Sorted);
    let probes: Vec<Vec<u8>> = (0..100).map(|_| rng.gen::<[u8; 5]>().to_vec()).collect();
    check_against_model(&t, &entries, &cmp, &probes);
    // Sparse integers: too far apart for a bitmap.
    let users = be_keys((0..300).map(|i| i * 1000), b"", 8);
    let entries = entries_of(&mut rng, &users, 0, Some(3));
    let t = open(&write(&entries, &cmp), &cmp, false).unwrap();
    assert_eq!(t.key_kind(), PackedKeyKind::Sorted);
    check_against_model(
        &t,
        &entries,
        &cmp,
        &be_keys([1, 999, 1000, 299_001], b"", 8),
    );
}

#[test]
fn fixed_length_keys_skewed_or_sharing_prefixes_are_found() {
    let mut rng = StdRng::seed_from_u64(8);
    let cmp = bytewise();
    let mut users = BTreeSet::new();
    // Skewed: cubes, so interpolation guesses badly.
    for i in 0..500u64 {
        let mut k = (i * i * i).to_be_bytes().to_vec();
        k.extend_from_slice(&rng.gen::<u64>().to_be_bytes());
        users.insert(k);
    }
    // A long run sharing its first eight bytes.
    for _ in 0..100 {
        let mut k = 1_000_000u64.to_be_bytes().to_vec();
        k.extend_from_slice(&rng.gen::<u64>().to_be_bytes());
        users.insert(k);
    }
    let users: Vec<Vec<u8>> = users.into_iter().collect();
    let mut probes: Vec<Vec<u8>> = (0..300)
        .map(|_| {
            let mut k = rng.gen_range(0..130_000_000u64).to_be_bytes().to_vec();
            k.extend_from_slice(&rng.gen::<u64>().to_be_bytes());
            k
        })
        .collect();
    probes.extend((0..50).map(|_| {
        let mut k = 1_000_000u64.to_be_bytes().to_vec();
        k.extend_from_slice(&rng.gen::<u64>().to_be_bytes());
        k
    }));
    probes.push(Vec::new());
    probes.push(vec![0xff; 17]);
    for versions in [0, 2] {
        let entries = entries_of(&mut rng, &users, versions, None);
        let t = open(&write(&entries, &cmp), &cmp, false).unwrap();
        assert_eq!(t.key_kind(), PackedKeyKind::Sorted);
        check_against_model(&t, &entries, &cmp, &probes);
    }
}

#[test]
fn reverse_order_keys_use_the_sorted_index_in_their_order() {
    let mut rng = StdRng::seed_from_u64(5);
    let cmp: Arc<dyn Comparator> = Arc::new(ReverseBytewiseComparator);
    // Dense integers, but not in bytewise order: no integer index.
    let users: Vec<Vec<u8>> = be_keys((0..400).rev(), b"", 8);
    let entries = entries_of(&mut rng, &users, 2, None);
    let t = open(&write(&entries, &cmp), &cmp, false).unwrap();
    assert_eq!(t.key_kind(), PackedKeyKind::Sorted);
    check_against_model(&t, &entries, &cmp, &be_keys([400, 1000], b"", 8));
    // Opening with another comparator is refused.
    let err = open(&write(&entries, &cmp), &bytewise(), false).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn the_builder_refuses_out_of_order_keys() {
    let fs = MemFileSystem::new();
    fs.create_dir_all(Path::new("/t")).unwrap();
    let mut b = PackedTableBuilder::new(bytewise(), fs.create(Path::new("/t/x")).unwrap(), "x");
    b.add(&ikey(b"b", 5, ValueKind::Value), b"").unwrap();
    assert!(b.add(&ikey(b"a", 6, ValueKind::Value), b"").is_err());
    assert!(b.add(&ikey(b"b", 5, ValueKind::Value), b"").is_err());
    b.add(&ikey(b"b", 4, ValueKind::Value), b"").unwrap();
    b.finish().unwrap();
    assert!(b.finish().is_err());
}

/// A small table of each index kind, with version tags and offsets.
fn small_tables() -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(6);
    let cmp = bytewise();
    let mut ints: Vec<u64> = (0..40).map(|i| i * 2).collect();
    ints.dedup();
    [
        entries_of(&mut rng, &be_keys(0..40, b"", 8), 2, None),
        entries_of(&mut rng, &be_keys(ints, b"k", 2), 0, Some(3)),
        entries_of(
            &mut rng,
            &[b"a".to_vec(), b"abc".to_vec(), b"b".to_vec()],
            2,
            None,
        ),
    ]
    .iter()
    .map(|e| write(e, &cmp))
    .collect()
}

/// Reads everything: every answer must be the original's or an error.
fn read_all(t: &Arc<PackedTableReader>, original: &Arc<PackedTableReader>) -> crate::Result<()> {
    let mut it = t.iter();
    let mut want = original.iter();
    it.seek_to_first();
    want.seek_to_first();
    while it.valid() {
        assert!(want.valid(), "a damaged table yields an extra entry");
        assert_eq!(it.key(), want.key(), "a damaged table yields a wrong key");
        assert_eq!(
            it.value(),
            want.value(),
            "a damaged table yields a wrong value"
        );
        let lookup = ikey(
            crate::key::extract_user_key(it.key()),
            MAX_SEQUENCE_NUMBER,
            ValueKind::FOR_SEEK,
        );
        let got = t.get(&lookup)?;
        assert_eq!(
            got,
            original.get(&lookup).unwrap(),
            "a damaged table answers a get wrongly"
        );
        it.next();
        want.next();
    }
    it.status()?;
    assert!(
        !want.valid(),
        "a damaged table loses entries without an error"
    );
    Ok(())
}

#[test]
fn every_byte_flip_is_caught_at_open_or_by_a_lazy_check() {
    let cmp = bytewise();
    for bytes in small_tables() {
        let original = open(&bytes, &cmp, false).unwrap();
        for pos in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[pos] ^= 0x5a;
            for lazy in [false, true] {
                match open(&bad, &cmp, lazy) {
                    Err(Error::Corruption { .. }) => {}
                    Err(e) => panic!("flip at {pos}: not a Corruption error: {e}"),
                    Ok(t) => {
                        // Only a lazy table opens; its first read of the
                        // damaged section reports it.
                        assert!(lazy, "flip at {pos} not caught at open");
                        let read = read_all(&t, &original);
                        let verified = t.verify();
                        assert!(
                            matches!(read, Err(Error::Corruption { .. }))
                                && matches!(verified, Err(Error::Corruption { .. })),
                            "flip at {pos}: {read:?} {verified:?}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_truncation_is_corruption() {
    let cmp = bytewise();
    for bytes in small_tables() {
        for len in 0..bytes.len() {
            match open(&bytes[..len], &cmp, true) {
                Err(Error::Corruption { .. }) => {}
                Err(e) => panic!("truncated to {len}: {e}"),
                Ok(_) => panic!("truncated to {len}: opened"),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Damage that keeps the checksums right (as if the writer had been
    /// wrong) still never panics or reads outside the file.
    #[test]
    fn damaged_sections_with_fixed_checksums_never_panic(
        table in 0usize..3,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let cmp = bytewise();
        let mut bytes = small_tables().swap_remove(table);
        let footer_at = bytes.len() - footer::PACKED_FOOTER_BYTES;
        let f = footer::PackedFooter::decode(&bytes[footer_at..], "t", footer_at as u64).unwrap();
        for (pos, x) in flips {
            let pos = pos % footer_at;
            bytes[pos] ^= x | 1;
        }
        // Recompute every section's checksum and the footer's.
        let mut f2 = f;
        for s in f2.sections.iter_mut() {
            s.crc = footer::section_crc(&bytes[s.offset as usize..(s.offset + s.size) as usize]);
        }
        bytes.truncate(footer_at);
        bytes.extend_from_slice(&f2.encode());
        if let Ok(t) = open(&bytes, &cmp, false) {
            let _ = t.verify();
            let mut it = t.iter();
            it.seek_to_first();
            let mut steps = 0;
            while it.valid() && steps < 10_000 {
                let _ = t.get(&ikey(crate::key::extract_user_key(it.key()), 7, ValueKind::FOR_SEEK));
                it.next();
                steps += 1;
            }
            it.seek_to_last();
            while it.valid() && steps < 20_000 {
                it.prev();
                steps += 1;
            }
            for probe in [&b""[..], b"a", b"\x00\x00\x00\x00\x00\x00\x00\x05", b"k\x00\x10", b"zzzz"] {
                let _ = t.get(&ikey(probe, 7, ValueKind::FOR_SEEK));
                it.seek(&ikey(probe, 7, ValueKind::FOR_SEEK));
                it.seek_for_prev(&ikey(probe, 7, ValueKind::FOR_SEEK));
            }
        }
    }
}
