//! Where a flush or compaction ends an output file besides its size:
//! stream-aware cutting and the user's SST partitioner.
//!
//! Several ascending insert streams (one per device, tenant, shard) put a
//! piece of every stream into each memtable. Cut by size alone, a flushed
//! file spans all the streams, overlaps every file below it, and each byte
//! is rewritten at every level. Two rules keep the outputs apart:
//!
//! - **Gap boundaries**: the files of the levels below the output (and, for
//!   a flush, the level-0 files already there) divide the key space into
//!   files and the gaps between them. An output is ended before the first
//!   key that lies in another file or gap than the previous key, so each
//!   output lies inside one gap (or one file) of every level below and can
//!   later go down by trivial move. A level's position is found once with
//!   the level's file search ([`Version::find_file`]) and then only moves
//!   forward with the keys: no scan over the level.
//! - **Newer runs**: in a compaction, a long run of keys from one input
//!   followed by a key of an older input is new data that filled a gap of
//!   the old data (a stream's new tail, followed by the next stream's old
//!   head). The output is ended there, so the next flush of that stream
//!   finds a gap between files. Inputs rank by age: each level-0 file on
//!   its own (newest first), the upper level's file, then the output
//!   level's files together (their own boundaries are not kept, or every
//!   output would end at an old file's edge). Under random writes the runs
//!   are a few keys long and never reach the threshold.
//!
//! Both rules act only once the output holds `min_size` bytes, which bounds
//! the number of files; the partitioner's cuts are always taken.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::key::{Comparator, InternalKey, InternalKeyComparator, ValueKind, MAX_SEQUENCE_NUMBER};
use crate::version::{FileMetaData, Version, NUM_LEVELS};

use super::super::sst_partitioner::SstPartitioner;

/// Where a key lies in one sorted level: before file `index` (in the gap)
/// or inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    index: usize,
    inside: bool,
}

/// A forward-only position in one level 1 or deeper.
struct LevelCursor<'a> {
    level: usize,
    files: &'a [Arc<FileMetaData>],
    /// None until the first key positions it with the file search.
    place: Option<Place>,
    /// Some key of the current output lies inside a file of this level.
    output_inside: bool,
}

impl LevelCursor<'_> {
    /// The last key passed lies inside a file of this level.
    fn inside(&self) -> bool {
        self.place.is_some_and(|p| p.inside)
    }

    /// Moves to `user_key` (at or after the previous key): whether it lies
    /// in another file or gap than the previous key, and whether it lies
    /// inside a file.
    fn advance(
        &mut self,
        version: &Version,
        icmp: &InternalKeyComparator,
        user_key: &[u8],
    ) -> (bool, bool) {
        let ucmp = icmp.user_comparator();
        let mut index = match self.place {
            Some(p) => p.index,
            None => {
                let seek = InternalKey::new(user_key, MAX_SEQUENCE_NUMBER, ValueKind::FOR_SEEK);
                version.find_file(icmp, self.level, seek.encoded())
            }
        };
        while index < self.files.len()
            && ucmp.compare(self.files[index].largest.user_key(), user_key) == Ordering::Less
        {
            index += 1;
        }
        let inside = index < self.files.len()
            && ucmp.compare(self.files[index].smallest.user_key(), user_key) != Ordering::Greater;
        let place = Place { index, inside };
        let moved = self.place.is_some_and(|p| p != place);
        self.place = Some(place);
        (moved, inside)
    }
}

/// Level-0 file edges, sorted: a flush is cut where it crosses one.
struct Edges<'a> {
    /// (user key, true for a largest key): a smallest key is crossed by
    /// the first key at or after it, a largest key by the first key after it.
    edges: Vec<(&'a [u8], bool)>,
    next: usize,
    /// Files whose smallest key is crossed and largest key is not: the
    /// files the current key is inside.
    open: usize,
    /// A key was passed (the first key crosses nothing).
    started: bool,
    /// Some key of the current output lies inside a level-0 file.
    output_inside: bool,
}

impl<'a> Edges<'a> {
    fn new(files: &'a [Arc<FileMetaData>], ucmp: &dyn Comparator) -> Self {
        let mut edges: Vec<(&[u8], bool)> = files
            .iter()
            .flat_map(|f| [(f.smallest.user_key(), false), (f.largest.user_key(), true)])
            .collect();
        edges.sort_by(|a, b| ucmp.compare(a.0, b.0).then(a.1.cmp(&b.1)));
        Edges {
            edges,
            next: 0,
            open: 0,
            started: false,
            output_inside: false,
        }
    }

    /// Moves to `user_key`: whether an edge lies between the previous key
    /// and it, and whether it lies inside a file.
    fn advance(&mut self, ucmp: &dyn Comparator, user_key: &[u8]) -> (bool, bool) {
        let start = self.next;
        while let Some(&(edge, is_largest)) = self.edges.get(self.next) {
            let crossed = match ucmp.compare(edge, user_key) {
                Ordering::Less => true,
                Ordering::Equal => !is_largest,
                Ordering::Greater => false,
            };
            if !crossed {
                break;
            }
            if is_largest {
                self.open = self.open.saturating_sub(1);
            } else {
                self.open += 1;
            }
            self.next += 1;
        }
        let first = !std::mem::replace(&mut self.started, true);
        (!first && self.next != start, self.open > 0)
    }
}

/// Decides, key by key, where the outputs of one flush or compaction end.
pub(crate) struct OutputCutter<'a> {
    version: &'a Version,
    icmp: &'a InternalKeyComparator,
    levels: Vec<LevelCursor<'a>>,
    l0: Option<Edges<'a>>,
    partitioner: Option<&'a dyn SstPartitioner>,
    /// Stream-aware cutting is on.
    auto: bool,
    min_size: u64,
    /// Bytes of the run of entries from one input ending at the previous
    /// key, and that input's age rank.
    run_bytes: u64,
    run_source: Option<u32>,
}

impl<'a> OutputCutter<'a> {
    /// A cutter for outputs written into `output_level` of `version`: the
    /// levels below the output count, and for a flush (output level 0) the
    /// level-0 files too. The output level of a compaction adds nothing:
    /// every file of it that the compaction's range touches is an input.
    pub(crate) fn new(
        version: &'a Version,
        icmp: &'a InternalKeyComparator,
        output_level: usize,
        partitioner: Option<&'a dyn SstPartitioner>,
        auto: bool,
        target_file_size: u64,
    ) -> Self {
        let levels = if auto {
            (output_level.max(1) + usize::from(output_level > 0)..NUM_LEVELS)
                .filter(|&l| version.num_files(l) > 0)
                .map(|level| LevelCursor {
                    level,
                    files: version.files(level),
                    place: None,
                    output_inside: false,
                })
                .collect()
        } else {
            Vec::new()
        };
        let l0 = (auto && output_level == 0 && version.num_files(0) > 0)
            .then(|| Edges::new(version.files(0), &**icmp.user_comparator()));
        OutputCutter {
            version,
            icmp,
            levels,
            l0,
            partitioner,
            auto,
            min_size: min_cut_size(target_file_size),
            run_bytes: 0,
            run_source: None,
        }
    }

    /// Called for each new user key before it is written. `prev` is the last
    /// user key of the current output (None: no output is open), `size` the
    /// output's estimated bytes, `source` the age rank of the compaction
    /// input the key comes from (0 newest; None for a flush). True: end the
    /// current output first.
    pub(crate) fn should_cut(
        &mut self,
        prev: Option<&[u8]>,
        user_key: &[u8],
        size: u64,
        source: Option<u32>,
    ) -> bool {
        let ucmp = &**self.icmp.user_comparator();
        // Every cursor moves, whether or not an earlier one already crossed.
        // In a level where the output already overlaps a file and the key
        // lies inside another, crossing gains nothing: both pieces overlap
        // that level and will be merged anyway (random writes, whose every
        // key lies inside some file, are never cut).
        let mut gap_cut = false;
        for cursor in &mut self.levels {
            let (crossed, inside) = cursor.advance(self.version, self.icmp, user_key);
            gap_cut |= crossed && !(cursor.output_inside && inside);
        }
        if let Some(edges) = &mut self.l0 {
            let (crossed, inside) = edges.advance(ucmp, user_key);
            gap_cut |= crossed && !(edges.output_inside && inside);
        }
        let mut run_ended = false;
        if source != self.run_source {
            run_ended = matches!((self.run_source, source), (Some(a), Some(b)) if b > a)
                && self.run_bytes >= self.min_size;
            self.run_source = source;
            self.run_bytes = 0;
        }
        // A boundary crossed while the output was below the minimum size is
        // not remembered: cutting later would put the cut at no boundary.
        let cut = prev.is_some_and(|prev| {
            self.partitioner
                .is_some_and(|p| p.should_partition(prev, user_key, size))
                || (self.auto && size >= self.min_size && (gap_cut || run_ended))
        });
        // The key begins an output (a new one, or the first) or joins one.
        let begins = cut || prev.is_none();
        for cursor in &mut self.levels {
            cursor.output_inside = cursor.inside() || (!begins && cursor.output_inside);
        }
        if let Some(edges) = &mut self.l0 {
            edges.output_inside = edges.open > 0 || (!begins && edges.output_inside);
        }
        cut
    }

    /// Counts `bytes` of an entry just written into the current run.
    pub(crate) fn wrote(&mut self, bytes: u64) {
        self.run_bytes += bytes;
    }
}

/// The size below which no automatic cut is made: 1/128 of the target
/// file size (512 KiB under the default 64 MiB), at least 4 KiB.
pub(crate) fn min_cut_size(target_file_size: u64) -> u64 {
    (target_file_size / 128).max(4096)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::BytewiseComparator;
    use crate::version::{VersionBuilder, VersionEdit};

    fn icmp() -> InternalKeyComparator {
        InternalKeyComparator::new(Arc::new(BytewiseComparator))
    }

    /// A version with files `(level, smallest, largest)`.
    fn version(files: &[(usize, &str, &str)]) -> Version {
        let mut edit = VersionEdit::new();
        for (i, &(level, lo, hi)) in files.iter().enumerate() {
            edit.add_file(
                level,
                i as u64 + 10,
                1000,
                InternalKey::new(lo.as_bytes(), 5, ValueKind::Value),
                InternalKey::new(hi.as_bytes(), 5, ValueKind::Value),
                5,
                5,
            );
        }
        let base = Version::empty();
        let mut b = VersionBuilder::new(icmp(), &base);
        b.apply(&edit, "test", 0).unwrap();
        b.build()
    }

    /// The keys before which `keys` (written in order, 1 MB each) are cut.
    fn cuts(
        v: &Version,
        output_level: usize,
        keys: &[&str],
        sources: Option<&[u32]>,
    ) -> Vec<String> {
        let icmp = icmp();
        let mut c = OutputCutter::new(v, &icmp, output_level, None, true, 64 << 20);
        let mut out = Vec::new();
        let mut prev: Option<&str> = None;
        let mut size = 0;
        for (i, k) in keys.iter().enumerate() {
            let source = sources.map(|n| n[i]);
            if c.should_cut(prev.map(str::as_bytes), k.as_bytes(), size, source) {
                out.push(k.to_string());
                size = 0;
            }
            prev = Some(k);
            size += 1 << 20;
            c.wrote(1 << 20);
        }
        out
    }

    #[test]
    fn a_flush_is_cut_at_the_edges_of_files_below() {
        // L2 holds a0..a5 and c0..c5: the gaps are (.., a0), (a5, c0), (c5, ..).
        let v = version(&[(2, "a0", "a5"), (2, "c0", "c5")]);
        let keys = ["a6", "a7", "b0", "c6", "c7", "d0"];
        assert_eq!(cuts(&v, 0, &keys, None), vec!["c6"]);
        // A key inside a file is a place of its own.
        let keys = ["0", "a1", "a2", "a9"];
        assert_eq!(cuts(&v, 0, &keys, None), vec!["a1", "a9"]);
        // But from inside one file to inside the next there is no cut: both
        // pieces overlap data below (random writes are never cut).
        let keys = ["a1", "a2", "c1", "c2"];
        assert!(cuts(&v, 0, &keys, None).is_empty());
        let keys = ["a1", "b0", "c1"];
        assert_eq!(cuts(&v, 0, &keys, None), vec!["b0", "c1"]);
    }

    #[test]
    fn level0_edges_count_for_a_flush_only() {
        let v = version(&[(0, "b0", "b5")]);
        let keys = ["a0", "b1", "b6"];
        assert_eq!(cuts(&v, 0, &keys, None), vec!["b1", "b6"]);
        // A compaction into L1 takes the level-0 files as inputs.
        assert!(cuts(&v, 1, &keys, None).is_empty());
    }

    #[test]
    fn the_output_level_adds_no_boundaries() {
        // Every file of the output level in a compaction's range is an input.
        let v = version(&[(1, "a0", "a5"), (1, "c0", "c5"), (2, "b0", "b1")]);
        let keys = ["a0", "a9", "b0", "b2", "c0"];
        assert_eq!(cuts(&v, 1, &keys, None), vec!["b0", "b2"]);
    }

    #[test]
    fn a_long_newer_run_ends_an_output_where_older_data_resumes() {
        let v = version(&[]);
        // Old a, new a (two entries), old b, new b: cut before old b.
        let keys = ["a0", "a1", "a2", "b0", "b1"];
        let sources = [9, 0, 0, 9, 0];
        assert_eq!(cuts(&v, 1, &keys, Some(&sources)), vec!["b0"]);
        // Three level-0 files of one stream, then the oldest's next stream.
        let keys = ["a0", "a1", "a2", "b0"];
        assert_eq!(cuts(&v, 1, &keys, Some(&[2, 1, 0, 2])), vec!["b0"]);
        // Short runs (random writes) never cut.
        let icmp = icmp();
        let mut c = OutputCutter::new(&v, &icmp, 1, None, true, 64 << 20);
        let mut prev = String::new();
        for i in 0..1000 {
            let k = format!("k{i:04}");
            let cut = c.should_cut(
                (i > 0).then_some(prev.as_bytes()),
                k.as_bytes(),
                u64::from(i as u32) * 100,
                Some(if i % 2 == 0 { 0 } else { 9 }),
            );
            assert!(!cut, "cut before {k}");
            c.wrote(100);
            prev = k;
        }
    }

    #[test]
    fn nothing_is_cut_below_the_minimum_size_or_when_off() {
        let v = version(&[(2, "b0", "b5")]);
        let icmp = icmp();
        let mut c = OutputCutter::new(&v, &icmp, 0, None, true, 64 << 20);
        assert!(!c.should_cut(None, b"a", 0, None));
        assert!(!c.should_cut(Some(b"a"), b"c", 100, None));
        let mut off = OutputCutter::new(&v, &icmp, 0, None, false, 64 << 20);
        assert!(!off.should_cut(None, b"a", 0, None));
        assert!(!off.should_cut(Some(b"a"), b"c", 64 << 20, None));
    }
}
