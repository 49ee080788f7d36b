//! The key index of a packed table: maps a user key to its id (its rank
//! among the table's distinct user keys) and back.
//!
//! ```text
//! integer kinds := key_len u32 | prefix_len u32 | min u64 | max u64 | prefix
//!                  [bitmap only: words u64 x W | ranks u32 x W],  W = ceil((max - min + 1) / 64)
//! sorted        := key_len u32 | [key_len < 8: prefixes u64 x n] | [key_len = 0: offsets u32 x (n + 1)] | keys
//! ```
//!
//! Every read is bounds-checked: a damaged index gives an error message,
//! never a panic or a read outside the section.

use std::cmp::Ordering;

use bytes::Bytes;

use crate::key::prefix_search::key_prefix;
use crate::key::Comparator;
use crate::util::coding::{put_fixed32, put_fixed64};

use super::{suffix_int, PackedKeyKind, BITMAP_SPARSITY_MAX, INT_SUFFIX_BYTES_MAX};

/// What went wrong in a damaged index (the reader adds file and offset).
pub(super) type Check<T> = std::result::Result<T, &'static str>;

const INT_FIXED_BYTES: usize = 24;
/// Keys with the target's prefix are scanned one by one up to this many,
/// then binary-searched (keys rarely share all of their first 8 bytes).
const EQUAL_RUN_SCAN: usize = 8;

#[inline]
fn u64_at(b: &[u8], i: usize) -> Check<u64> {
    b.get(i * 8..i * 8 + 8)
        .map(|s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
        .ok_or("index entry out of range")
}

#[inline]
fn u32_at(b: &[u8], i: usize) -> Check<u32> {
    b.get(i * 4..i * 4 + 4)
        .map(|s| u32::from_le_bytes(s.try_into().unwrap_or([0; 4])))
        .ok_or("index entry out of range")
}

/// A packed table's key index, over the mapped file.
#[derive(Debug)]
pub(super) enum KeyIndex {
    Int(IntKeys),
    Sorted(SortedKeys),
}

/// Keys of one length: a common prefix, then a big-endian integer.
#[derive(Debug)]
pub(super) struct IntKeys {
    key_len: usize,
    /// Copied out of the mapping: a lookup compares it first, and the
    /// reader's own memory is far likelier to be cached than the file.
    prefix: Box<[u8]>,
    min: u64,
    max: u64,
    count: usize,
    /// `None` for all-one (every integer of `min..=max` is a key).
    bitmap: Option<Bitmap>,
}

#[derive(Debug)]
struct Bitmap {
    words: Bytes,
    ranks: Bytes,
    nwords: usize,
}

/// Any keys, sorted, with their first eight bytes as integers.
#[derive(Debug)]
pub(super) struct SortedKeys {
    count: usize,
    /// Each key's first eight bytes as an integer; `None` when every key
    /// has one length of at least eight bytes (read from the keys then).
    prefixes: Option<Bytes>,
    /// Every key has this length (no offsets), or 0: keys of several
    /// lengths, located by `offsets`.
    key_len: usize,
    offsets: Bytes,
    keys: Bytes,
    /// The integer prefixes order keys only under the bytewise order.
    bytewise: bool,
}

impl KeyIndex {
    /// Parses the index of a table of `count` distinct user keys.
    pub(super) fn parse(
        kind: PackedKeyKind,
        section: Bytes,
        count: usize,
        bytewise: bool,
    ) -> Check<KeyIndex> {
        match kind {
            PackedKeyKind::AllOne | PackedKeyKind::Bitmap => {
                if !bytewise {
                    return Err("integer key index in a table not ordered bytewise");
                }
                let fixed = section
                    .get(..INT_FIXED_BYTES)
                    .ok_or("integer key index too short")?;
                let key_len = u32_at(fixed, 0)? as usize;
                let prefix_len = u32_at(fixed, 1)? as usize;
                let min = u64_at(fixed, 1)?;
                let max = u64_at(fixed, 2)?;
                if prefix_len > key_len || key_len - prefix_len > INT_SUFFIX_BYTES_MAX {
                    return Err("integer key index: bad key or prefix length");
                }
                if min > max || count == 0 {
                    return Err("integer key index: empty or inverted range");
                }
                let s = key_len - prefix_len;
                if s < 8 && max >> (8 * s) != 0 {
                    return Err("integer key index: range wider than the key suffix");
                }
                let prefix_end = INT_FIXED_BYTES + prefix_len;
                let prefix = section
                    .get(INT_FIXED_BYTES..prefix_end)
                    .ok_or("integer key index: prefix past the section")?;
                let prefix: Box<[u8]> = prefix.into();
                let range = u128::from(max - min) + 1;
                let bitmap = if kind == PackedKeyKind::AllOne {
                    if range != count as u128 {
                        return Err("all-one key index: range and key count differ");
                    }
                    if section.len() != prefix_end {
                        return Err("all-one key index: trailing bytes");
                    }
                    None
                } else {
                    if range > BITMAP_SPARSITY_MAX * count as u128 {
                        return Err("bitmap key index: range too sparse for its key count");
                    }
                    let nwords = range.div_ceil(64) as usize;
                    if section.len() != prefix_end + nwords * 12 {
                        return Err("bitmap key index: size does not match its range");
                    }
                    let words_end = prefix_end + nwords * 8;
                    Some(Bitmap {
                        words: section.slice(prefix_end..words_end),
                        ranks: section.slice(words_end..),
                        nwords,
                    })
                };
                Ok(KeyIndex::Int(IntKeys {
                    key_len,
                    prefix,
                    min,
                    max,
                    count,
                    bitmap,
                }))
            }
            PackedKeyKind::Sorted => {
                let key_len = u32_at(&section, 0)? as usize;
                let has_prefixes = key_len < 8;
                let prefixes_end = count
                    .checked_mul(if has_prefixes { 8 } else { 0 })
                    .and_then(|b| b.checked_add(4))
                    .ok_or("sorted key index too large")?;
                let offsets_bytes = if key_len == 0 { (count + 1) * 4 } else { 0 };
                let offsets_end = prefixes_end
                    .checked_add(offsets_bytes)
                    .ok_or("sorted key index too large")?;
                if section.len() < offsets_end {
                    return Err("sorted key index shorter than its key count");
                }
                let offsets = section.slice(prefixes_end..offsets_end);
                let keys = section.slice(offsets_end..);
                let spans = if key_len == 0 {
                    u32_at(&offsets, 0)? == 0 && u32_at(&offsets, count)? as usize == keys.len()
                } else {
                    count.checked_mul(key_len) == Some(keys.len())
                };
                if !spans {
                    return Err("sorted key index: the keys' lengths do not add up to their bytes");
                }
                Ok(KeyIndex::Sorted(SortedKeys {
                    count,
                    prefixes: has_prefixes.then(|| section.slice(4..prefixes_end)),
                    key_len,
                    offsets,
                    keys,
                    bytewise,
                }))
            }
        }
    }

    /// The id of `key`, if the table holds it.
    #[inline]
    pub(super) fn find(&self, key: &[u8], cmp: &dyn Comparator) -> Check<Option<usize>> {
        match self {
            KeyIndex::Int(k) => k.find(key),
            KeyIndex::Sorted(k) => {
                let i = k.lower_bound(key, cmp)?;
                if i < k.count && cmp.compare(k.key(i)?, key) == Ordering::Equal {
                    Ok(Some(i))
                } else {
                    Ok(None)
                }
            }
        }
    }

    /// The id of the first key at or after `key` (the key count if none).
    pub(super) fn lower_bound(&self, key: &[u8], cmp: &dyn Comparator) -> Check<usize> {
        match self {
            KeyIndex::Int(k) => k.lower_bound(key),
            KeyIndex::Sorted(k) => k.lower_bound(key, cmp),
        }
    }

    /// Appends the user key of id `id` to `out`.
    pub(super) fn key_into(&self, id: usize, out: &mut Vec<u8>) -> Check<()> {
        match self {
            KeyIndex::Int(k) => {
                let v = k.value_of(id)?;
                out.extend_from_slice(&k.prefix);
                let s = k.key_len - k.prefix.len();
                out.extend_from_slice(&v.to_be_bytes()[8 - s..]);
            }
            KeyIndex::Sorted(k) => out.extend_from_slice(k.key(id)?),
        }
        Ok(())
    }

    /// Which kind of index this is.
    pub(super) fn kind(&self) -> PackedKeyKind {
        match self {
            KeyIndex::Int(IntKeys { bitmap: None, .. }) => PackedKeyKind::AllOne,
            KeyIndex::Int(_) => PackedKeyKind::Bitmap,
            KeyIndex::Sorted(_) => PackedKeyKind::Sorted,
        }
    }
}

impl IntKeys {
    #[inline]
    fn find(&self, key: &[u8]) -> Check<Option<usize>> {
        let p = self.prefix.len();
        if key.len() != self.key_len || key[..p] != self.prefix[..] {
            return Ok(None);
        }
        let v = suffix_int(key, p);
        if v < self.min || v > self.max {
            return Ok(None);
        }
        let off = v - self.min;
        match &self.bitmap {
            None => Ok(Some(off as usize)),
            Some(b) => {
                if b.test(off)? {
                    let id = b.rank(off)?;
                    if id >= self.count {
                        return Err("bitmap key index: rank past the key count");
                    }
                    Ok(Some(id))
                } else {
                    Ok(None)
                }
            }
        }
    }

    fn lower_bound(&self, key: &[u8]) -> Check<usize> {
        let p = self.prefix.len();
        let head = &key[..key.len().min(p)];
        match head.cmp(&self.prefix[..head.len()]) {
            Ordering::Less => return Ok(0),
            Ordering::Greater => return Ok(self.count),
            Ordering::Equal if key.len() < p => return Ok(0),
            Ordering::Equal => {}
        }
        let rest = &key[p..];
        let s = self.key_len - p;
        // The first integer whose key is >= `key`: a shorter rest is
        // padded with zeros; a longer one is above its first s bytes.
        let lb: u128 = if rest.len() >= s {
            u128::from(suffix_int(&rest[..s], 0)) + u128::from(rest.len() > s)
        } else {
            let mut padded = [0u8; 8];
            padded[..rest.len()].copy_from_slice(rest);
            u128::from(suffix_int(&padded[..s], 0))
        };
        if lb <= u128::from(self.min) {
            return Ok(0);
        }
        if lb > u128::from(self.max) {
            return Ok(self.count);
        }
        let off = (lb - u128::from(self.min)) as u64;
        match &self.bitmap {
            None => Ok(off as usize),
            Some(b) => b.rank(off).map(|r| r.min(self.count)),
        }
    }

    /// The integer of key `id`.
    fn value_of(&self, id: usize) -> Check<u64> {
        if id >= self.count {
            return Err("key id past the key count");
        }
        match &self.bitmap {
            None => Ok(self.min + id as u64),
            Some(b) => Ok(self.min + b.select(id)?),
        }
    }
}

impl Bitmap {
    #[inline]
    fn word(&self, w: usize) -> Check<u64> {
        u64_at(&self.words, w)
    }

    #[inline]
    fn rank_before(&self, w: usize) -> Check<usize> {
        u32_at(&self.ranks, w).map(|r| r as usize)
    }

    #[inline]
    fn test(&self, off: u64) -> Check<bool> {
        Ok(self.word((off / 64) as usize)? >> (off % 64) & 1 == 1)
    }

    /// Set bits before bit `off`.
    #[inline]
    fn rank(&self, off: u64) -> Check<usize> {
        let w = (off / 64) as usize;
        if w >= self.nwords {
            // Past the last word: every key is below.
            let last = self.nwords - 1;
            return Ok(self.rank_before(last)? + self.word(last)?.count_ones() as usize);
        }
        let below = self.word(w)? & ((1u64 << (off % 64)) - 1);
        Ok(self.rank_before(w)? + below.count_ones() as usize)
    }

    /// The offset of the set bit of rank `id`.
    fn select(&self, id: usize) -> Check<u64> {
        // The last word whose rank_before is <= id.
        let (mut lo, mut hi) = (0usize, self.nwords);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.rank_before(mid)? <= id {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let mut word = self.word(lo)?;
        let k = id
            .checked_sub(self.rank_before(lo)?)
            .ok_or("bitmap key index: ranks out of order")?;
        if k >= word.count_ones() as usize {
            return Err("bitmap key index: ranks disagree with the bitmap");
        }
        for _ in 0..k {
            word &= word - 1;
        }
        Ok(lo as u64 * 64 + u64::from(word.trailing_zeros()))
    }
}

impl SortedKeys {
    #[inline]
    fn key(&self, i: usize) -> Check<&[u8]> {
        let (start, end) = if self.key_len > 0 {
            (i * self.key_len, (i + 1) * self.key_len)
        } else {
            (
                u32_at(&self.offsets, i)? as usize,
                u32_at(&self.offsets, i + 1)? as usize,
            )
        };
        self.keys
            .get(start..end)
            .ok_or("sorted key index: key offsets out of order")
    }

    #[inline]
    fn prefix(&self, i: usize) -> Check<u64> {
        match &self.prefixes {
            Some(p) => u64_at(p, i),
            None => self
                .keys
                .get(i * self.key_len..i * self.key_len + 8)
                .map(|b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
                .ok_or("index entry out of range"),
        }
    }

    fn lower_bound(&self, key: &[u8], cmp: &dyn Comparator) -> Check<usize> {
        let (mut lo, mut hi) = (0usize, self.count);
        if self.bytewise {
            // Narrow to the keys whose first eight bytes equal the target's,
            // comparing integers only; then compare whole keys.
            let p = key_prefix(key);
            lo = self.prefix_lower_bound(p)?;
            hi = lo;
            while hi < self.count && hi - lo < EQUAL_RUN_SCAN && self.prefix(hi)? == p {
                hi += 1;
            }
            if hi - lo == EQUAL_RUN_SCAN {
                let mut top = self.count;
                while hi < top {
                    let mid = hi + (top - hi) / 2;
                    if self.prefix(mid)? <= p {
                        hi = mid + 1;
                    } else {
                        top = mid;
                    }
                }
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if cmp.compare(self.key(mid)?, key) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The first key whose prefix is at or above `p`. Interpolation first
    /// (prefixes of real key sets are often near uniform within a table:
    /// one or two probes instead of a cache miss per halving), then binary
    /// search once the range is small or interpolation stops halving it.
    fn prefix_lower_bound(&self, p: u64) -> Check<usize> {
        // Invariant: prefixes below `lo` are < p, from `hi` on >= p.
        let (mut lo, mut hi) = (0usize, self.count);
        let mut rounds = 0;
        while hi - lo > 16 && rounds < 4 {
            rounds += 1;
            let (a, b) = (self.prefix(lo)?, self.prefix(hi - 1)?);
            if a >= p {
                return Ok(lo);
            }
            if b < p {
                return Ok(hi);
            }
            // a < p <= b, so b > a.
            let span = (hi - 1 - lo) as u128;
            let g = lo + (u128::from(p - a) * span / u128::from(b - a)) as usize;
            let before = hi - lo;
            if self.prefix(g)? < p {
                lo = g + 1;
            } else {
                hi = g;
            }
            // A little past the guess on the other side: the answer is
            // usually within a few entries of it.
            if hi - lo > 8 {
                let (l, h) = (lo.saturating_add(8).min(hi), hi.saturating_sub(8).max(lo));
                if self.prefix(l - 1)? >= p {
                    hi = l - 1;
                } else if h > lo && self.prefix(h)? < p {
                    lo = h + 1;
                }
            }
            if hi - lo > before / 2 && rounds > 1 {
                break;
            }
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.prefix(mid)? < p {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

/// Chooses and encodes the index of sorted, distinct user keys (`keys`
/// concatenated, key `i` at `offsets[i]..offsets[i + 1]`). Integer kinds
/// need the bytewise order.
pub(super) fn build_index(
    keys: &[u8],
    offsets: &[u32],
    bytewise: bool,
) -> (PackedKeyKind, Vec<u8>) {
    let count = offsets.len() - 1;
    let key = |i: usize| &keys[offsets[i] as usize..offsets[i + 1] as usize];
    if bytewise && count > 0 {
        if let Some(out) = build_int_index(count, key) {
            return out;
        }
    }
    let mut out = Vec::with_capacity(count * 12 + 8 + keys.len());
    // One length for every key (and not 0): no offsets needed.
    let key_len = match count {
        0 => 0,
        _ => {
            let l = key(0).len();
            let fixed = l > 0 && l <= u32::MAX as usize && (0..count).all(|i| key(i).len() == l);
            if fixed {
                l
            } else {
                0
            }
        }
    };
    put_fixed32(&mut out, key_len as u32);
    if key_len < 8 {
        for i in 0..count {
            put_fixed64(&mut out, key_prefix(key(i)));
        }
    }
    if key_len == 0 {
        for &o in offsets {
            put_fixed32(&mut out, o);
        }
    }
    out.extend_from_slice(keys);
    (PackedKeyKind::Sorted, out)
}

fn build_int_index<'k>(
    count: usize,
    key: impl Fn(usize) -> &'k [u8],
) -> Option<(PackedKeyKind, Vec<u8>)> {
    let (first, last) = (key(0), key(count - 1));
    let key_len = first.len();
    if (0..count).any(|i| key(i).len() != key_len) {
        return None;
    }
    // Sorted bytewise: what the first and last keys share, all share.
    let prefix_len = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    if key_len - prefix_len > INT_SUFFIX_BYTES_MAX || key_len > u32::MAX as usize {
        return None;
    }
    let (min, max) = (suffix_int(first, prefix_len), suffix_int(last, prefix_len));
    let range = u128::from(max - min) + 1;
    let kind = if range == count as u128 {
        PackedKeyKind::AllOne
    } else if range <= BITMAP_SPARSITY_MAX * count as u128 {
        PackedKeyKind::Bitmap
    } else {
        return None;
    };
    let mut out = Vec::new();
    put_fixed32(&mut out, key_len as u32);
    put_fixed32(&mut out, prefix_len as u32);
    put_fixed64(&mut out, min);
    put_fixed64(&mut out, max);
    out.extend_from_slice(&first[..prefix_len]);
    if kind == PackedKeyKind::Bitmap {
        let nwords = range.div_ceil(64) as usize;
        let mut words = vec![0u64; nwords];
        for i in 0..count {
            let off = suffix_int(key(i), prefix_len) - min;
            words[(off / 64) as usize] |= 1 << (off % 64);
        }
        let mut rank = 0u32;
        let mut ranks = Vec::with_capacity(nwords);
        for w in &words {
            put_fixed64(&mut out, *w);
            ranks.push(rank);
            rank += w.count_ones();
        }
        for r in ranks {
            put_fixed32(&mut out, r);
        }
    }
    Some((kind, out))
}
