//! A version: the table files of each level at one point in time.
//!
//! Invariants, established by [`VersionBuilder`](super::VersionBuilder):
//! - level 0 is ordered newest first: by `largest_seqno` descending, ties
//!   by file number descending; its files may overlap;
//! - every other level is ordered by smallest internal key and its files'
//!   ranges are disjoint: each file's largest key is below the next file's
//!   smallest key;
//! - a file number appears at most once in the whole version.
//!
//! A version never changes once built, so readers share it without locks.
//! Built with it, for each level 1 or deeper: the 8-byte prefixes of the
//! files' largest user keys, which [`Version::find_file`] searches (see
//! `file_search.rs`).

use std::cmp::Ordering;
use std::sync::Arc;

use super::file_search::{self, largest_prefixes};
use super::{FileMetaData, NUM_LEVELS};
use crate::key::prefix_search::lower_bound_in;
use crate::key::{Comparator, InternalKeyComparator};

/// The most of `files` whose user-key ranges hold any one key.
fn overlap_depth<'a>(
    files: impl Iterator<Item = &'a Arc<FileMetaData>>,
    ucmp: &dyn Comparator,
) -> usize {
    // Sweep over the file edges in key order, a smallest key before a
    // largest key at the same user key (ranges are closed).
    let mut edges: Vec<(&[u8], bool)> = files
        .flat_map(|f| [(f.smallest.user_key(), false), (f.largest.user_key(), true)])
        .collect();
    edges.sort_by(|a, b| ucmp.compare(a.0, b.0).then(a.1.cmp(&b.1)));
    let (mut depth, mut max) = (0usize, 0usize);
    for (_, is_largest) in edges {
        if is_largest {
            depth -= 1;
        } else {
            depth += 1;
            max = max.max(depth);
        }
    }
    max
}

/// The table files of every level. Immutable; shared through `Arc`.
#[derive(Debug, Default)]
pub struct Version {
    files: [Vec<Arc<FileMetaData>>; NUM_LEVELS],
    /// Per level 1 or deeper, `largest_prefixes(files[level])`; empty for
    /// level 0, whose files are not ordered by key.
    largest_prefixes: [Vec<u64>; NUM_LEVELS],
    /// The most level-0 files that hold any one key (see
    /// [`level0_depth`](Self::level0_depth)).
    level0_depth: usize,
    /// The range deletions of every table, fragmented: built by the first
    /// read that needs them (`DbInner::version_range_deletions`).
    pub(crate) range_dels: std::sync::OnceLock<Arc<crate::range_del::FragmentedRangeTombstones>>,
    /// Per level 1 or deeper, the range deletions of its tables,
    /// fragmented (`None`: the level has none): built by the first
    /// iterator over the version (`DbInner::internal_iter`), which gives
    /// each level its own list.
    pub(crate) level_range_dels: [LevelRangeDels; NUM_LEVELS],
    /// A file of this version that point lookups searched in vain until
    /// its allowance ran out (see [`FileMetaData::charge_seek`]), with its
    /// level: the candidate for a read-triggered compaction. Set by the
    /// first lookup that finds it due; a later version starts without one
    /// (the next wasted lookup of a file still due sets it again).
    pub(crate) seek_compaction: std::sync::OnceLock<(usize, Arc<FileMetaData>)>,
}

/// A fragmented list of range deletions built once, or `None` if there
/// are none.
pub(crate) type LevelRangeDels =
    std::sync::OnceLock<Option<Arc<crate::range_del::FragmentedRangeTombstones>>>;

impl Version {
    /// A version with no files.
    pub fn empty() -> Version {
        Version::default()
    }

    /// Wraps levels whose order the caller (the builder) established.
    pub(super) fn from_levels(files: [Vec<Arc<FileMetaData>>; NUM_LEVELS]) -> Version {
        let largest_prefixes = std::array::from_fn(|level| match level {
            0 => Vec::new(),
            _ => largest_prefixes(&files[level]),
        });
        Version {
            files,
            largest_prefixes,
            level0_depth: 0,
            range_dels: std::sync::OnceLock::new(),
            level_range_dels: Default::default(),
            seek_compaction: std::sync::OnceLock::new(),
        }
    }

    /// The files of `level`, in level order (see the module docs).
    pub fn files(&self, level: usize) -> &[Arc<FileMetaData>] {
        &self.files[level]
    }

    /// Number of files in `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.files[level].len()
    }

    /// The most level-0 files whose ranges hold any one user key: how many
    /// level-0 tables a lookup may have to read, and what write stalls
    /// count. A flush cut into one file per insert stream adds many files
    /// but a depth of one.
    pub fn level0_depth(&self) -> usize {
        self.level0_depth
    }

    /// Computes [`level0_depth`](Self::level0_depth) under `ucmp`.
    pub(super) fn set_level0_depth(&mut self, ucmp: &dyn Comparator) {
        self.level0_depth = overlap_depth(self.files[0].iter(), ucmp);
    }

    /// Total size in bytes of the files in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files[level].iter().map(|f| f.file_size).sum()
    }

    /// Every file of every level, level 0 first.
    pub fn all_files(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.files.iter().flatten()
    }

    /// Index of the first file in `level` (1 or deeper) whose largest key is
    /// at or after internal key `ikey`; `num_files(level)` if there is none.
    ///
    /// Under a built-in comparator, a binary search over the level's array
    /// of 8-byte key prefixes, with full-key comparisons only among the
    /// files sharing the key's prefix; otherwise the plain search
    /// ([`find_file_plain`](Self::find_file_plain)). Both give the same
    /// index; O(log files).
    pub fn find_file(&self, icmp: &InternalKeyComparator, level: usize, ikey: &[u8]) -> usize {
        assert!(level > 0, "level 0 files are not ordered by key");
        let (files, prefixes) = (&self.files[level], &self.largest_prefixes[level]);
        if files.is_empty() {
            return 0; // common in the get path, which asks every level
        }
        // The comparator is resolved once here, not at every comparison.
        let order = icmp.user_comparator().builtin_order();
        let found = lower_bound_in(order, prefixes, &[], |i| files[i].largest.encoded(), ikey)
            .unwrap_or_else(|| file_search::find_file_plain(icmp, files, ikey));
        #[cfg(feature = "invariants")]
        assert_eq!(
            found,
            file_search::find_file_plain(icmp, files, ikey),
            "prefix search and plain search disagree in level {level}"
        );
        found
    }

    /// [`find_file`](Self::find_file) as a plain binary search over the
    /// files' largest internal keys, comparing through `icmp` at every step
    /// (LevelDB's `FindFile`). Kept as the reference the faster search is
    /// tested and benchmarked against.
    pub fn find_file_plain(
        &self,
        icmp: &InternalKeyComparator,
        level: usize,
        ikey: &[u8],
    ) -> usize {
        assert!(level > 0, "level 0 files are not ordered by key");
        file_search::find_file_plain(icmp, &self.files[level], ikey)
    }

    /// The files of `level` that hold user keys in
    /// `[smallest_user, largest_user]` (`None`: unbounded on that side).
    ///
    /// In level 0 the range grows to cover every file it touches, until no
    /// more files join (as LevelDB's `GetOverlappingInputs` does): a
    /// compaction that takes one level 0 file must take every older file
    /// holding versions of the same keys. The result is in level order.
    pub fn overlapping_files(
        &self,
        level: usize,
        smallest_user: Option<&[u8]>,
        largest_user: Option<&[u8]>,
        user_cmp: &dyn Comparator,
    ) -> Vec<Arc<FileMetaData>> {
        if level > 0 {
            let files = &self.files[level];
            let start = first_reaching(files, smallest_user, user_cmp);
            return files[start..]
                .iter()
                .take_while(|f| !starts_after(f, largest_user, user_cmp))
                .cloned()
                .collect();
        }
        let mut lo = smallest_user.map(<[u8]>::to_vec);
        let mut hi = largest_user.map(<[u8]>::to_vec);
        // Each restart moves `lo` down to some file's smallest key or `hi`
        // up to some file's largest key, so there are at most 2 * files + 1
        // passes.
        'restart: for _ in 0..=2 * self.files[0].len() {
            let mut out = Vec::new();
            for f in &self.files[0] {
                if ends_before(f, lo.as_deref(), user_cmp)
                    || starts_after(f, hi.as_deref(), user_cmp)
                {
                    continue;
                }
                let (f_lo, f_hi) = (f.smallest.user_key(), f.largest.user_key());
                if lo
                    .as_deref()
                    .is_some_and(|l| user_cmp.compare(f_lo, l).is_lt())
                {
                    lo = Some(f_lo.to_vec());
                    continue 'restart;
                }
                if hi
                    .as_deref()
                    .is_some_and(|h| user_cmp.compare(f_hi, h).is_gt())
                {
                    hi = Some(f_hi.to_vec());
                    continue 'restart;
                }
                out.push(f.clone());
            }
            return out;
        }
        unreachable!("level 0 range expansion did not converge")
    }

    /// For each file of `level` (1 or deeper, above the last), in level
    /// order, the bytes of the files of `level + 1` that hold user keys in
    /// its range: what compacting it alone would read there and write
    /// again. Both levels are sorted and disjoint, so one pass over the two
    /// answers every file (a file below that spans two above counts for
    /// both).
    pub fn overlapping_bytes_below(&self, level: usize, user_cmp: &dyn Comparator) -> Vec<u64> {
        debug_assert!(level > 0, "level 0 files overlap each other");
        debug_assert!(level + 1 < NUM_LEVELS, "the last level has none below");
        let below = &self.files[level + 1];
        // The first file below that does not end before the current file.
        let mut first = 0;
        self.files[level]
            .iter()
            .map(|f| {
                let (lo, hi) = (f.smallest.user_key(), f.largest.user_key());
                while below
                    .get(first)
                    .is_some_and(|b| ends_before(b, Some(lo), user_cmp))
                {
                    first += 1;
                }
                below[first..]
                    .iter()
                    .take_while(|b| !starts_after(b, Some(hi), user_cmp))
                    .map(|b| b.file_size)
                    .sum()
            })
            .collect()
    }

    /// True if some file in `level` holds user keys in
    /// `[smallest_user, largest_user]` (`None`: unbounded on that side).
    pub fn overlap_in_level(
        &self,
        level: usize,
        smallest_user: Option<&[u8]>,
        largest_user: Option<&[u8]>,
        user_cmp: &dyn Comparator,
    ) -> bool {
        let files = &self.files[level];
        if level == 0 {
            return files.iter().any(|f| {
                !ends_before(f, smallest_user, user_cmp) && !starts_after(f, largest_user, user_cmp)
            });
        }
        let start = first_reaching(files, smallest_user, user_cmp);
        files
            .get(start)
            .is_some_and(|f| !starts_after(f, largest_user, user_cmp))
    }

    /// Checks the ordering invariants of every level; returns what is wrong.
    /// O(files) comparisons.
    pub(super) fn check_order(&self, icmp: &InternalKeyComparator) -> Result<(), String> {
        for pair in self.files[0].windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if (a.largest_seqno, a.number) <= (b.largest_seqno, b.number) {
                return Err(format!(
                    "level 0: file {} (largest seqno {}) before file {} (largest seqno {})",
                    a.number, a.largest_seqno, b.number, b.largest_seqno
                ));
            }
        }
        for (level, files) in self.files.iter().enumerate().skip(1) {
            for pair in files.windows(2) {
                let (a, b) = (&pair[0], &pair[1]);
                if icmp.compare(a.largest.encoded(), b.smallest.encoded()) != Ordering::Less {
                    return Err(format!(
                        "level {level}: file {} overlaps or precedes file {}",
                        b.number, a.number
                    ));
                }
            }
        }
        Ok(())
    }

    /// The full consistency check: [`check_order`](Self::check_order), and
    /// every file's range and sequence numbers are well formed and no file
    /// number appears twice. O(files) comparisons and a hash set.
    #[cfg(any(test, feature = "invariants"))]
    pub(super) fn check_consistency(&self, icmp: &InternalKeyComparator) -> Result<(), String> {
        self.check_order(icmp)?;
        self.check_prefixes(icmp)?;
        let mut seen = std::collections::HashSet::new();
        for (level, files) in self.files.iter().enumerate() {
            for f in files {
                if !seen.insert(f.number) {
                    return Err(format!("file {} appears twice", f.number));
                }
                if icmp.compare(f.smallest.encoded(), f.largest.encoded()) == Ordering::Greater {
                    return Err(format!(
                        "level {level}: file {} smallest key > largest key",
                        f.number
                    ));
                }
                if f.smallest_seqno > f.largest_seqno {
                    return Err(format!(
                        "level {level}: file {} smallest seqno > largest seqno",
                        f.number
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks that each level's prefix array holds its files' prefixes, and
    /// under a built-in order that the prefixes follow that order (which a
    /// comparator claiming an order it does not have would break).
    #[cfg(any(test, feature = "invariants"))]
    fn check_prefixes(&self, icmp: &InternalKeyComparator) -> Result<(), String> {
        use crate::key::BuiltinOrder;
        for (level, files) in self.files.iter().enumerate().skip(1) {
            let prefixes = &self.largest_prefixes[level];
            if *prefixes != largest_prefixes(files) {
                return Err(format!(
                    "level {level}: prefix array does not match the files"
                ));
            }
            let out_of_order = |a: u64, b: u64| match icmp.user_comparator().builtin_order() {
                Some(BuiltinOrder::Bytewise) => a > b,
                Some(BuiltinOrder::ReverseBytewise) => a < b,
                None => false,
            };
            if let Some(i) =
                (1..prefixes.len()).find(|&i| out_of_order(prefixes[i - 1], prefixes[i]))
            {
                return Err(format!(
                    "level {level}: prefix of file {} out of order under {}",
                    files[i].number,
                    icmp.user_comparator().name()
                ));
            }
        }
        if !self.largest_prefixes[0].is_empty() {
            return Err("level 0 has a prefix array".to_string());
        }
        Ok(())
    }
}

/// True if every key of `f` is below `smallest_user`.
fn ends_before(f: &FileMetaData, smallest_user: Option<&[u8]>, cmp: &dyn Comparator) -> bool {
    smallest_user.is_some_and(|s| cmp.compare(f.largest.user_key(), s).is_lt())
}

/// True if every key of `f` is above `largest_user`.
fn starts_after(f: &FileMetaData, largest_user: Option<&[u8]>, cmp: &dyn Comparator) -> bool {
    largest_user.is_some_and(|l| cmp.compare(f.smallest.user_key(), l).is_gt())
}

/// In a sorted, disjoint level: index of the first file that does not end
/// before `smallest_user`. Largest user keys are non-decreasing along the
/// level, so the predicate is monotone.
fn first_reaching(
    files: &[Arc<FileMetaData>],
    smallest_user: Option<&[u8]>,
    cmp: &dyn Comparator,
) -> usize {
    files.partition_point(|f| ends_before(f, smallest_user, cmp))
}
