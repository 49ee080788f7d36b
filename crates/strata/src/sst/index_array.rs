//! The index block of an open table, arranged once for point lookups:
//! each entry's user key's 8-byte prefix as a big-endian integer, and where
//! its separator (a user key, or an internal key in a table where a user
//! key spans blocks: `docs/format/table.md`) and its data block handle lie
//! in the index block, which the array shares (reference counted, no copy).
//!
//! A lookup in the index block itself binary-searches restart points,
//! decoding a prefix-compressed key and calling the comparator through a
//! trait object at every step, then decodes the handle's varints. Here the
//! search runs over the integer prefixes and compares full keys only among
//! entries that share the target's prefix, statically dispatched for the
//! built-in orders ([`crate::key::prefix_search`], the level file search's
//! technique), first over a summary of every 32nd prefix that stays in the
//! CPU caches, then over one bucket of 32 whose cache lines load together;
//! user comparators take a plain binary search over the
//! separators. Iterators keep reading the index block.
//!
//! Memory: 8 bytes per entry (the prefix), plus the summary. Index blocks
//! are written with a restart interval of 1 (the default, as RocksDB's):
//! every entry is a restart point and stores its separator whole, so entry
//! `i` is found through the block's own restart array and its header (a
//! few bytes) parsed when a lookup reaches it. A block written with a
//! longer interval shares key bytes between entries; its separators are
//! then copied out whole, once, with where each value lies.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::prefix_search::{
    compare_internal_in, compare_user_in, key_prefix, lower_bound_in, lower_bound_user_in,
    summarize,
};
use crate::key::{extract_user_key, BuiltinOrder, Comparator};
use crate::util::coding::Decoder;

use super::block::{decode_entry_header, restart_point, Block};
use super::format::BlockHandle;
use super::index::IndexValue;

/// Where the separators and block handles are.
enum Separators {
    /// In the index block, whose entries are all restart points: entry `i`
    /// starts at the `i`-th offset of the restart array, which begins at
    /// byte `restarts` of the block. Checked at build: every entry's header
    /// decodes, shares no key bytes and lies inside the block.
    InBlock { restarts: usize },
    /// Copied out, concatenated; separator `i` ends at `ends[i]` and starts
    /// at the end of `i - 1`; its value (block handle) is at `values[i]` of
    /// the block.
    Copied {
        keys: Vec<u8>,
        ends: Vec<u32>,
        values: Vec<u32>,
    },
}

/// Where the key and value of entry `i` of a block whose every entry is a
/// restart point lie in its `data` (the restart array begins at
/// `restarts`): `None` if its restart point or header does not decode or
/// the entry shares key bytes with the one before.
#[inline]
fn whole_entry(data: &[u8], restarts: usize, i: usize) -> Option<(Range<usize>, usize)> {
    let at = restart_point(data, restarts, u32::try_from(i).ok()?)?;
    let h = decode_entry_header(data, restarts, at)?;
    let value = h.key_start + h.non_shared;
    (h.shared == 0).then_some((h.key_start..value, value))
}

impl Separators {
    /// The block's `len` entries read in place if each is a restart point
    /// storing its separator whole (interval 1), `None` otherwise: the
    /// restart points, in order, must name whole entries that tile the
    /// entries area, so they are the very entries the block's iterator
    /// reads.
    fn in_block(index: &Block, len: usize) -> Option<Separators> {
        let (data, restarts) = (index.data(), index.restarts_offset());
        // An empty block still has one restart point.
        let n = if len == 0 {
            0
        } else {
            index.num_restarts() as usize
        };
        if n != len {
            return None;
        }
        let mut next = 0;
        for i in 0..n {
            if restart_point(data, restarts, i as u32)? != next {
                return None;
            }
            let h = decode_entry_header(data, restarts, next)?;
            if h.shared != 0 {
                return None;
            }
            next = h.key_start + h.non_shared + h.value_len;
        }
        (next == restarts).then_some(Separators::InBlock { restarts })
    }

    /// Every separator of `index` copied out (a block whose entries share
    /// key bytes), with where its values lie.
    fn copied(
        index: &Block,
        icmp: Arc<dyn Comparator>,
        name: &str,
        index_offset: u64,
    ) -> Result<Separators> {
        let offset = |at: usize| {
            u32::try_from(at).map_err(|_| {
                Error::corruption(name, index_offset, "index block separators exceed 4 GiB")
            })
        };
        let mut keys = Vec::with_capacity(index.size());
        let mut ends = Vec::new();
        let mut values = Vec::new();
        let mut it = index.iter(icmp);
        it.seek_to_first();
        while it.valid() {
            keys.extend_from_slice(it.key());
            ends.push(offset(keys.len())?);
            values.push(offset(it.value_range().start)?);
            it.next();
        }
        it.status()?;
        keys.shrink_to_fit();
        ends.shrink_to_fit();
        values.shrink_to_fit();
        Ok(Separators::Copied { keys, ends, values })
    }
}

/// A table's index entries, decoded.
pub(crate) struct IndexArray {
    /// Prefix of each separator's user key.
    prefixes: Vec<u64>,
    /// `summarize(prefixes)`: the search starts there.
    summary: Vec<u64>,
    /// The index block's contents.
    data: Bytes,
    /// Where separator and handle `i` lie. Every handle was validated.
    separators: Separators,
    /// The user comparator's order when built in.
    order: Option<BuiltinOrder>,
    /// The separators are user keys (the table's
    /// `index_key_is_user_key`), not internal keys.
    user_keys: bool,
    /// The separators' comparator, for user comparators: the user
    /// comparator if they are user keys, else the internal-key comparator.
    cmp: Arc<dyn Comparator>,
}

impl IndexArray {
    /// Decodes `index` (at `index_offset` of table `name`), whose
    /// separators are ordered by `cmp` over a user comparator of built-in
    /// `order` (its [`Comparator::builtin_order`]): user keys under the
    /// user comparator if `user_keys`, else internal keys under the
    /// internal-key comparator. A malformed entry is `Corruption`.
    pub(crate) fn build(
        index: &Block,
        cmp: Arc<dyn Comparator>,
        order: Option<BuiltinOrder>,
        user_keys: bool,
        name: &str,
        index_offset: u64,
    ) -> Result<IndexArray> {
        let data = index.data().clone();
        let mut prefixes = Vec::new();
        let mut it = index.iter(cmp.clone());
        it.seek_to_first();
        while it.valid() {
            if IndexValue::decode(it.value()).is_none() {
                return Err(Error::corruption(
                    name,
                    index_offset,
                    "index entry holds a malformed block handle",
                ));
            }
            let user_key = if user_keys {
                it.key()
            } else {
                extract_user_key(it.key())
            };
            prefixes.push(key_prefix(user_key));
            it.next();
        }
        it.status()?;
        let separators = match Separators::in_block(index, prefixes.len()) {
            Some(in_block) => in_block,
            None => Separators::copied(index, cmp.clone(), name, index_offset)?,
        };
        prefixes.shrink_to_fit();
        let a = IndexArray {
            summary: summarize(&prefixes),
            prefixes,
            data,
            separators,
            order,
            user_keys,
            cmp,
        };
        #[cfg(debug_assertions)]
        a.check_order(name);
        Ok(a)
    }

    /// Bytes in memory besides the index block (what a block cache is
    /// charged for the arrays).
    pub(crate) fn memory_bytes(&self) -> usize {
        let separators = match &self.separators {
            Separators::InBlock { .. } => 0,
            Separators::Copied { keys, ends, values } => {
                keys.capacity() + (ends.capacity() + values.capacity()) * std::mem::size_of::<u32>()
            }
        };
        (self.prefixes.capacity() + self.summary.capacity()) * std::mem::size_of::<u64>()
            + separators
            + std::mem::size_of::<IndexArray>()
    }

    /// Number of entries (data blocks).
    pub(crate) fn len(&self) -> usize {
        self.prefixes.len()
    }

    /// Where entry `i`'s separator and value lie in the block (in place).
    /// `build` checked every entry, so this is never `None`.
    #[inline]
    fn in_place(&self, restarts: usize, i: usize) -> Option<(Range<usize>, usize)> {
        let found = whole_entry(&self.data, restarts, i);
        debug_assert!(found.is_some(), "index entry {i} was checked at build");
        found
    }

    /// The separator of entry `i`.
    #[inline]
    fn key(&self, i: usize) -> &[u8] {
        match &self.separators {
            Separators::InBlock { restarts } => self
                .in_place(*restarts, i)
                .map_or(&[][..], |(key, _)| &self.data[key]),
            Separators::Copied { keys, ends, .. } => {
                let start = if i == 0 { 0 } else { ends[i - 1] as usize };
                &keys[start..ends[i] as usize]
            }
        }
    }

    /// The data block handle of entry `i`.
    #[inline]
    pub(crate) fn handle(&self, i: usize) -> BlockHandle {
        let value = match &self.separators {
            Separators::InBlock { restarts } => self.in_place(*restarts, i).map(|(_, v)| v),
            Separators::Copied { values, .. } => Some(values[i] as usize),
        };
        let mut dec = Decoder::new(value.and_then(|v| self.data.get(v..)).unwrap_or(&[]));
        let handle = BlockHandle::decode_from(&mut dec);
        debug_assert!(handle.is_some(), "index handle {i} was checked at build");
        // `build` checked every handle. Were one unreadable anyway, a
        // handle past any file's end makes the read a `Corruption` error.
        handle.unwrap_or(BlockHandle {
            offset: u64::MAX,
            size: 0,
        })
    }

    /// The first entry whose separator is at or after the internal key
    /// `ikey` (the block that may hold it); `len()` if none is. A user-key
    /// separator stands for the last internal key of its user key, so
    /// there it is the first separator at or after `ikey`'s user key.
    #[inline]
    pub(crate) fn lower_bound(&self, ikey: &[u8]) -> usize {
        let found = if self.user_keys {
            lower_bound_user_in(
                self.order,
                &self.prefixes,
                &self.summary,
                |i| self.key(i),
                extract_user_key(ikey),
            )
        } else {
            lower_bound_in(
                self.order,
                &self.prefixes,
                &self.summary,
                |i| self.key(i),
                ikey,
            )
        }
        .unwrap_or_else(|| self.lower_bound_plain(ikey));
        #[cfg(feature = "invariants")]
        assert_eq!(found, self.lower_bound_plain(ikey), "index prefix search");
        found
    }

    /// True if the internal key `ikey` is at or before the separator of
    /// entry `i`: then entry `i` is `ikey`'s lower bound whenever an earlier
    /// key's lower bound was `i` (a batched lookup of ascending keys asks
    /// this before searching again).
    #[inline]
    pub(crate) fn at_or_before(&self, i: usize, ikey: &[u8]) -> bool {
        if self.user_keys {
            compare_user_in(self.order, &*self.cmp, extract_user_key(ikey), self.key(i)).is_le()
        } else {
            compare_internal_in(self.order, &*self.cmp, ikey, self.key(i)).is_le()
        }
    }

    /// [`lower_bound`](Self::lower_bound) by full-key comparisons through
    /// the comparator trait object.
    pub(crate) fn lower_bound_plain(&self, ikey: &[u8]) -> usize {
        let target = if self.user_keys {
            extract_user_key(ikey)
        } else {
            ikey
        };
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.cmp.compare(self.key(mid), target).is_lt() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Debug builds: separators ascend. The prefix search is exact only if
    /// they do (a comparator claiming a built-in order it does not have
    /// would break that).
    #[cfg(debug_assertions)]
    fn check_order(&self, name: &str) {
        for i in 1..self.len() {
            debug_assert!(
                self.cmp.compare(self.key(i - 1), self.key(i)).is_lt(),
                "{name}: index separators {} and {i} out of order",
                i - 1
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::key::{
        BytewiseComparator, InternalKey, InternalKeyComparator, ReverseBytewiseComparator,
        ValueKind,
    };
    use crate::sst::block::BlockBuilder;
    use crate::sst::index::encode_index_value;

    /// User keys from a small alphabet and short lengths, so that many
    /// share their first 8 bytes and zero padding matters.
    fn user_key(rng: &mut StdRng) -> Vec<u8> {
        let len = rng.gen_range(0..14);
        (0..len)
            .map(|_| [0u8, 1, b'a', 0xff][rng.gen_range(0..4)])
            .collect()
    }

    fn ikey(rng: &mut StdRng) -> Vec<u8> {
        InternalKey::new(&user_key(rng), rng.gen_range(0..20), ValueKind::Value)
            .encoded()
            .to_vec()
    }

    #[test]
    fn search_matches_the_index_block_iterator() {
        let users: Vec<Arc<dyn Comparator>> = vec![
            Arc::new(BytewiseComparator),
            Arc::new(ReverseBytewiseComparator),
        ];
        let mut copied_out = 0;
        for (c, (user, user_keys)) in users
            .iter()
            .flat_map(|u| [(u.clone(), false), (u.clone(), true)])
            .enumerate()
        {
            let ikcmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(user.clone()));
            // The separators' comparator: the user comparator over user
            // keys (an index of user keys), else the internal-key one.
            let icmp = if user_keys {
                user.clone()
            } else {
                ikcmp.clone()
            };
            let iter = |block: &Block| {
                if user_keys {
                    block
                        .iter(icmp.clone())
                        .with_user_keys(user.builtin_order())
                } else {
                    block.iter(icmp.clone())
                }
            };
            for seed in 0..200u64 {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut keys: Vec<Vec<u8>> =
                    (0..rng.gen_range(0..200)).map(|_| ikey(&mut rng)).collect();
                if user_keys {
                    for k in &mut keys {
                        k.truncate(k.len() - 8);
                    }
                }
                keys.sort_by(|a, b| icmp.compare(a, b));
                keys.dedup();
                let interval = rng.gen_range(1..4);
                let mut b = BlockBuilder::new(interval);
                for (i, k) in keys.iter().enumerate() {
                    let mut v = Vec::new();
                    let handle = BlockHandle {
                        offset: i as u64 * 100,
                        size: 90,
                    };
                    encode_index_value(&mut v, handle, &[]);
                    b.add(k, &v);
                }
                let block =
                    Block::new(bytes::Bytes::copy_from_slice(b.finish()), "t".into(), 0).unwrap();
                let a = IndexArray::build(
                    &block,
                    icmp.clone(),
                    user.builtin_order(),
                    user_keys,
                    "t",
                    0,
                )
                .unwrap();
                assert_eq!(a.len(), keys.len());
                // A restart interval of 1 stores every separator whole:
                // read in place. Longer ones share bytes, mostly, and then
                // are copied out.
                let in_block = matches!(a.separators, Separators::InBlock { .. });
                assert!(in_block || interval > 1, "seed {seed}");
                copied_out += usize::from(!in_block);
                let mut it = iter(&block);
                it.seek_to_first();
                for i in 0..a.len() {
                    assert_eq!(a.key(i), it.key(), "seed {seed} entry {i}");
                    let h = IndexValue::decode(it.value()).unwrap().handle;
                    assert_eq!(a.handle(i), h, "seed {seed} entry {i}");
                    it.next();
                }
                for _ in 0..300 {
                    let target = ikey(&mut rng);
                    let mut it = iter(&block);
                    it.seek(&target);
                    // A user-key separator stands for its user key's last
                    // internal key: at or after the target if its user
                    // key is at or after the target's.
                    let want = keys.iter().position(|k| {
                        if user_keys {
                            icmp.compare(k, extract_user_key(&target)).is_ge()
                        } else {
                            ikcmp.compare(k, &target).is_ge()
                        }
                    });
                    let got = a.lower_bound(&target);
                    if let Some(i) = got.checked_sub(1) {
                        assert!(!a.at_or_before(i, &target), "seed {seed}");
                    }
                    if got < a.len() {
                        assert!(a.at_or_before(got, &target), "seed {seed}");
                    }
                    let at = format!("comparator {c} seed {seed} target {target:x?}");
                    assert_eq!(got, want.unwrap_or(keys.len()), "{at}");
                    assert_eq!(a.lower_bound_plain(&target), got, "{at}");
                    assert_eq!(it.valid(), got < a.len(), "{at}");
                    if it.valid() {
                        let h = IndexValue::decode(it.value()).unwrap().handle;
                        assert_eq!(a.handle(got), h, "{at}");
                    }
                }
            }
        }
        assert!(
            copied_out > 50,
            "the copied separators were tested {copied_out} times"
        );
    }
}
