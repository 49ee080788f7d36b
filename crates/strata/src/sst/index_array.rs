//! The index block of an open table, decoded once into arrays for point
//! lookups: each entry's separator (an internal key) with its user key's
//! 8-byte prefix as a big-endian integer, and its data block handle.
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
//! decoded separators. Iterators keep reading the index block.
//!
//! Memory: about the index block's size again (separators stored whole,
//! 8 + 16 + 4 bytes per entry besides), held as long as the reader is.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::prefix_search::{compare_internal_in, key_prefix, lower_bound_in, summarize};
use crate::key::{extract_user_key, BuiltinOrder, Comparator};

use super::block::Block;
use super::format::BlockHandle;
use super::index::IndexValue;

/// A table's index entries, decoded.
pub(crate) struct IndexArray {
    /// Prefix of each separator's user key.
    prefixes: Vec<u64>,
    /// `summarize(prefixes)`: the search starts there.
    summary: Vec<u64>,
    /// The separators, concatenated.
    keys: Vec<u8>,
    /// End of separator `i` in `keys` (it starts at the end of `i - 1`).
    key_ends: Vec<u32>,
    handles: Vec<BlockHandle>,
    /// The user comparator's order when built in.
    order: Option<BuiltinOrder>,
    /// The internal-key comparator, for user comparators.
    icmp: Arc<dyn Comparator>,
}

impl IndexArray {
    /// Decodes `index` (at `index_offset` of table `name`), ordered by the
    /// internal-key comparator `icmp` over a user comparator of built-in
    /// `order` (its [`Comparator::builtin_order`]). A malformed entry is
    /// `Corruption`.
    pub(crate) fn build(
        index: &Block,
        icmp: Arc<dyn Comparator>,
        order: Option<BuiltinOrder>,
        name: &str,
        index_offset: u64,
    ) -> Result<IndexArray> {
        let mut a = IndexArray {
            prefixes: Vec::new(),
            summary: Vec::new(),
            keys: Vec::with_capacity(index.size()),
            key_ends: Vec::new(),
            handles: Vec::new(),
            order,
            icmp: icmp.clone(),
        };
        let mut it = index.iter(icmp);
        it.seek_to_first();
        while it.valid() {
            let v = IndexValue::decode(it.value()).ok_or_else(|| {
                Error::corruption(
                    name,
                    index_offset,
                    "index entry holds a malformed block handle",
                )
            })?;
            a.prefixes.push(key_prefix(extract_user_key(it.key())));
            a.keys.extend_from_slice(it.key());
            let end = u32::try_from(a.keys.len()).map_err(|_| {
                Error::corruption(name, index_offset, "index block separators exceed 4 GiB")
            })?;
            a.key_ends.push(end);
            a.handles.push(v.handle);
            it.next();
        }
        it.status()?;
        a.keys.shrink_to_fit();
        a.summary = summarize(&a.prefixes);
        #[cfg(debug_assertions)]
        a.check_order(name);
        Ok(a)
    }

    /// Bytes in memory (what a block cache is charged for it).
    pub(crate) fn memory_bytes(&self) -> usize {
        (self.prefixes.capacity() + self.summary.capacity()) * std::mem::size_of::<u64>()
            + self.keys.capacity()
            + self.key_ends.capacity() * std::mem::size_of::<u32>()
            + self.handles.capacity() * std::mem::size_of::<BlockHandle>()
            + std::mem::size_of::<IndexArray>()
    }

    /// Number of entries (data blocks).
    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    /// The separator of entry `i`.
    #[inline]
    fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.key_ends[i - 1] as usize
        };
        &self.keys[start..self.key_ends[i] as usize]
    }

    /// The data block handle of entry `i`.
    #[inline]
    pub(crate) fn handle(&self, i: usize) -> BlockHandle {
        self.handles[i]
    }

    /// The first entry whose separator is at or after the internal key
    /// `ikey` (the block that may hold it); `len()` if none is.
    #[inline]
    pub(crate) fn lower_bound(&self, ikey: &[u8]) -> usize {
        let found = lower_bound_in(
            self.order,
            &self.prefixes,
            &self.summary,
            |i| self.key(i),
            ikey,
        )
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
        compare_internal_in(self.order, &*self.icmp, ikey, self.key(i)).is_le()
    }

    /// [`lower_bound`](Self::lower_bound) by full-key comparisons through
    /// the comparator trait object.
    pub(crate) fn lower_bound_plain(&self, ikey: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.icmp.compare(self.key(mid), ikey).is_lt() {
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
                self.icmp.compare(self.key(i - 1), self.key(i)).is_lt(),
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
        for (c, user) in users.into_iter().enumerate() {
            let icmp: Arc<dyn Comparator> = Arc::new(InternalKeyComparator::new(user.clone()));
            for seed in 0..200u64 {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut keys: Vec<Vec<u8>> =
                    (0..rng.gen_range(0..200)).map(|_| ikey(&mut rng)).collect();
                keys.sort_by(|a, b| icmp.compare(a, b));
                keys.dedup();
                let mut b = BlockBuilder::new(rng.gen_range(1..4));
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
                let a =
                    IndexArray::build(&block, icmp.clone(), user.builtin_order(), "t", 0).unwrap();
                assert_eq!(a.len(), keys.len());
                for _ in 0..300 {
                    let target = ikey(&mut rng);
                    let mut it = block.iter(icmp.clone());
                    it.seek(&target);
                    let want = keys.iter().position(|k| icmp.compare(k, &target).is_ge());
                    let got = a.lower_bound(&target);
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
    }
}
