//! Choosing what to compact.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::key::Comparator;
use crate::version::{FileMetaData, Version, NUM_LEVELS};

use super::super::inner::{DbInner, DbState};
use super::super::options::Options;
use super::super::sst_partitioner::SstPartitioner;

/// The last level; data settles here.
pub(crate) const LAST_LEVEL: usize = NUM_LEVELS - 1;

/// Files a trivial move below L0 takes whatever the level's excess over
/// its target (RocksDB's `kMaxMultiTrivialMove`). Under random writes the
/// first compaction into an empty level moves this many files of the level
/// above at once, and the compactions into that level after it rewrite
/// less: a 20M-key fill read 2.1 GB of L1 in its L0->L1 compactions with a
/// move capped at L1's excess (one file), RocksDB 1.5 GB.
const MULTI_TRIVIAL_MOVE_FILES: usize = 4;

/// A read-triggered compaction rewrites at most this many bytes of the
/// level below per byte it moves down (Pebble's `allowedCompactionWidth`).
const MAX_READ_COMPACTION_WIDTH: u64 = 35;

/// How long no write must come before a read-triggered compaction runs.
/// Under a steady writer, lookups make each new level-0 file due soon
/// after its flush, and compacting every flush as it comes nearly tripled
/// W6's write amplification under `readwhilewriting` (8.9-9.2 against 3.5)
/// and slowed its writer by 10-25%, for readers no faster
/// (docs/benchmarks.md, stop 74). While writes come, the score-driven
/// compactions reshape level 0 anyway.
const READ_COMPACTION_QUIET: Duration = Duration::from_secs(1);

/// Target sizes of the levels for one version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LevelTargets {
    /// The level L0 compacts into (1 unless dynamic level sizing moved it).
    pub(crate) base_level: usize,
    /// Target bytes per level (`u64::MAX` for L0 and levels above base).
    pub(crate) max_bytes: [u64; NUM_LEVELS],
}

/// Level targets: `max_bytes_for_level_base` × multiplier per level, or,
/// with `level_compaction_dynamic_level_bytes`, computed from the size of
/// the last level upward as RocksDB does, so that the last level holds
/// most of the data and the levels above are each `multiplier` times
/// smaller, never below `max_bytes_for_level_base`.
pub(crate) fn level_targets(opts: &Options, version: &Version) -> LevelTargets {
    let mut max_bytes = [u64::MAX; NUM_LEVELS];
    let mult = opts.max_bytes_for_level_multiplier;
    let base = opts.max_bytes_for_level_base;
    if !opts.level_compaction_dynamic_level_bytes {
        for (level, target) in max_bytes.iter_mut().enumerate().skip(1) {
            *target = opts.max_bytes_for_level(level);
        }
        return LevelTargets {
            base_level: 1,
            max_bytes,
        };
    }
    let max_level_size = (1..NUM_LEVELS)
        .map(|l| version.level_bytes(l))
        .max()
        .unwrap_or(0);
    let first_non_empty = (1..NUM_LEVELS).find(|&l| version.num_files(l) > 0);
    let Some(first_non_empty) = first_non_empty.filter(|_| max_level_size > 0) else {
        // An empty tree: L0 compacts straight into the last level.
        max_bytes[LAST_LEVEL] = base;
        return LevelTargets {
            base_level: LAST_LEVEL,
            max_bytes,
        };
    };
    let base_min = (base as f64 / mult) as u64;
    let mut cur = max_level_size as f64;
    for _ in first_non_empty..LAST_LEVEL {
        cur /= mult;
    }
    let (base_level, base_size) = if cur <= base_min as f64 {
        (first_non_empty, base_min + 1)
    } else {
        let mut level = first_non_empty;
        while level > 1 && cur > base as f64 {
            level -= 1;
            cur /= mult;
        }
        (level, (cur as u64).min(base))
    };
    let mut size = base_size as f64;
    for (level, target) in max_bytes.iter_mut().enumerate().skip(base_level) {
        if level > base_level {
            size *= mult;
        }
        *target = (size as u64).max(base);
    }
    LevelTargets {
        base_level,
        max_bytes,
    }
}

/// A chosen compaction.
#[derive(Debug)]
pub(crate) struct Compaction {
    pub(crate) level: usize,
    pub(crate) output_level: usize,
    /// Inputs from `level` and from `output_level`.
    pub(crate) inputs: [Vec<Arc<FileMetaData>>; 2],
    /// Files of the level below the output that the output overlaps.
    pub(crate) grandparents: Vec<Arc<FileMetaData>>,
    pub(crate) version: Arc<Version>,
    /// Smallest and largest user key of all inputs.
    pub(crate) range: (Vec<u8>, Vec<u8>),
    /// Largest input file a trivial move may take: twice the output
    /// level's target file size.
    pub(crate) max_move_bytes: u64,
    /// Run by `compact_range` (which may split it into subcompactions at
    /// any level).
    pub(crate) manual: bool,
    /// Picked because point lookups searched one of its inputs in vain too
    /// often (see [`FileMetaData::charge_seek`]).
    pub(crate) read_triggered: bool,
}

impl Compaction {
    /// True when the inputs can move to the output level by a manifest
    /// edit alone: nothing there overlaps them, they do not overlap each
    /// other, and the two levels are written in one table format (a file
    /// going into the packed levels is rewritten packed).
    pub(crate) fn is_trivial_move(&self, ucmp: &dyn Comparator, opts: &Options) -> bool {
        let partitioner = opts.sst_partitioner.as_ref().map(|f| f.partitioner());
        if !opts.same_table_format(self.level, self.output_level)
            || !self.inputs[1].is_empty()
            || self.inputs[0].is_empty()
            || self.level == self.output_level
            || !self.inputs[0].iter().all(|f| may_move(f, partitioner))
        {
            return false;
        }
        // A file much bigger than the output level's target is rewritten
        // (cut to size) rather than moved, so that levels keep files of
        // their target size: a 64 MiB flush output does not land whole in
        // a level of 512 KiB files.
        if self.inputs[0]
            .iter()
            .any(|f| f.file_size > self.max_move_bytes)
        {
            return false;
        }
        if self.level > 0 {
            return true;
        }
        let mut files: Vec<&Arc<FileMetaData>> = self.inputs[0].iter().collect();
        files.sort_by(|a, b| ucmp.compare(a.smallest.user_key(), b.smallest.user_key()));
        files.windows(2).all(|w| {
            ucmp.compare(w[0].largest.user_key(), w[1].smallest.user_key()) == CmpOrdering::Less
        })
    }

    pub(crate) fn input_bytes(&self, which: usize) -> u64 {
        self.inputs[which].iter().map(|f| f.file_size).sum()
    }

    pub(crate) fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.inputs.iter().flatten()
    }
}

/// User-key range of `files`.
pub(crate) fn key_range(
    files: &[Arc<FileMetaData>],
    ucmp: &dyn Comparator,
) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = files
        .iter()
        .map(|f| f.smallest.user_key())
        .min_by(|a, b| ucmp.compare(a, b))?;
    let hi = files
        .iter()
        .map(|f| f.largest.user_key())
        .max_by(|a, b| ucmp.compare(a, b))?;
    Some((lo.to_vec(), hi.to_vec()))
}

/// How many flushes `files` (level 0) came from: the files of one flush
/// share its memtable's range of sequence numbers, and two memtables'
/// ranges never overlap, so the files group by overlapping ranges.
fn flush_count<'a>(files: impl Iterator<Item = &'a Arc<FileMetaData>>) -> usize {
    let mut ranges: Vec<(u64, u64)> = files.map(|f| (f.smallest_seqno, f.largest_seqno)).collect();
    ranges.sort_unstable();
    let mut count = 0;
    let mut reach: Option<u64> = None;
    for (lo, hi) in ranges {
        if reach.is_none_or(|r| lo > r) {
            count += 1;
        }
        reach = Some(reach.map_or(hi, |r| r.max(hi)));
    }
    count
}

/// True unless the partitioner would cut `f`, which must then be rewritten.
fn may_move(f: &FileMetaData, partitioner: Option<&dyn SstPartitioner>) -> bool {
    partitioner.is_none_or(|p| p.can_do_trivial_move(f.smallest.user_key(), f.largest.user_key()))
}

/// The level-0 files (`files` newest first, as level 0 keeps them) that
/// may go down by a trivial move: those `may_go` allows that overlap no
/// other level-0 file. An older file that stays would sit above a moved
/// one and hide its newer entries; a newer one would soon be merged with
/// it anyway (random writes: every flush overlaps every other, nothing
/// moves, as before). Oldest first.
fn level0_moves(
    files: &[Arc<FileMetaData>],
    ucmp: &dyn Comparator,
    mut may_go: impl FnMut(&FileMetaData) -> bool,
) -> Vec<Arc<FileMetaData>> {
    // Sorted by smallest key, a file overlaps another exactly when it
    // overlaps a neighbour or a file before it reaches past its start.
    let mut by_key: Vec<&Arc<FileMetaData>> = files.iter().collect();
    by_key.sort_by(|a, b| ucmp.compare(a.smallest.user_key(), b.smallest.user_key()));
    let mut alone = std::collections::HashSet::new();
    let mut reach: Option<&[u8]> = None; // the largest key of the files so far
    for (i, f) in by_key.iter().enumerate() {
        let before = reach.is_some_and(|r| ucmp.compare(r, f.smallest.user_key()).is_ge());
        let after = by_key.get(i + 1).is_some_and(|g| {
            ucmp.compare(f.largest.user_key(), g.smallest.user_key())
                .is_ge()
        });
        if !before && !after {
            alone.insert(f.number);
        }
        let largest = f.largest.user_key();
        if reach.is_none_or(|r| ucmp.compare(largest, r).is_gt()) {
            reach = Some(largest);
        }
    }
    files
        .iter()
        .rev()
        .filter(|f| alone.contains(&f.number) && may_go(f))
        .cloned()
        .collect()
}

/// The level-0 files (`files` newest first) a compaction into the level
/// below takes: the oldest ones up to and including the newest that could
/// not go down by a trivial move (`fits` false), grown towards the newer
/// files while one of those left shares keys with a taken one without
/// being newer than all of it. The files left are newer than every taken
/// file they overlap, so they may stay above its output.
///
/// Under random writes every flush overlaps the level below and all of
/// level 0 is taken, as in RocksDB. With insert streams, an old flush that
/// spanned every stream (cut before the tree had files per stream) no
/// longer drags the newer per-stream files into its compaction: they wait
/// and then go down by trivial move.
fn level0_inputs(
    files: &[Arc<FileMetaData>],
    ucmp: &dyn Comparator,
    mut fits: impl FnMut(&FileMetaData) -> bool,
) -> Vec<Arc<FileMetaData>> {
    let mut cut = files.iter().position(|f| !fits(f)).unwrap_or(0);
    // Level 0 is ordered by largest sequence number, not by the age of
    // every entry (flushes never interleave, but nothing else promises it).
    while let Some(i) = (0..cut).find(|&i| {
        let l = &files[i];
        files[cut..].iter().any(|t| {
            t.largest_seqno >= l.smallest_seqno
                && user_ranges_overlap(
                    ucmp,
                    (t.smallest.user_key(), t.largest.user_key()),
                    (l.smallest.user_key(), l.largest.user_key()),
                )
        })
    }) {
        cut = i;
    }
    files[cut..].to_vec()
}

/// True if the user-key ranges `[a.0, a.1]` and `[b.0, b.1]` share a key.
fn user_ranges_overlap(ucmp: &dyn Comparator, a: (&[u8], &[u8]), b: (&[u8], &[u8])) -> bool {
    ucmp.compare(a.0, b.1).is_le() && ucmp.compare(b.0, a.1).is_le()
}

/// True if a running compaction writes into `level` over a range that
/// shares a user key with `[lo, hi]`.
fn running_into(
    st: &DbState,
    cf: u32,
    level: usize,
    lo: &[u8],
    hi: &[u8],
    ucmp: &dyn Comparator,
) -> bool {
    st.cf(cf)
        .running
        .iter()
        .any(|(l, (r_lo, r_hi))| *l == level && user_ranges_overlap(ucmp, (r_lo, r_hi), (lo, hi)))
}

fn busy(f: &FileMetaData) -> bool {
    f.being_compacted.load(Ordering::Acquire)
}

impl DbInner {
    /// The most urgent compaction that does not conflict with running ones.
    pub(crate) fn pick_compaction(&self, st: &DbState) -> Option<Compaction> {
        let version = st.versions.current_cf(self.id);
        let targets = level_targets(&self.opts, &version);
        // L0 files that can go down by a trivial move go as soon as there
        // are as many as the L0 trigger, whatever the depth: a flush cut per
        // stream makes many files of depth one, which a depth score alone
        // would leave in L0 for ever.
        let l0 = version.files(0);
        if l0.len() >= self.opts.level0_file_num_compaction_trigger && !l0.iter().any(|f| busy(f)) {
            if let Some(c) = self.level0_trivial_move(st, &version, targets.base_level) {
                return Some(c);
            }
        }
        for (level, score) in self.level_scores(&version, &targets) {
            if score < 1.0 {
                break;
            }
            if let Some(c) = self.compaction_for_level(st, &version, &targets, level) {
                return Some(c);
            }
        }
        let (level, file) = version.seek_compaction.get()?;
        self.read_triggered(st, &version, &targets, *level, file)
    }

    /// The compaction of `file` (of `level`), which point lookups searched
    /// in vain until its allowance ran out: LevelDB's seek compaction, as
    /// Pebble schedules its read-triggered ones. The lowest priority: only
    /// when no level is due, no memtable waits for a flush (writes are
    /// coming in, and their compactions will reshape the tree anyway), and
    /// the rewrite of the level below stays narrow: at most 35 times the
    /// bytes moved down (Pebble's bound) and the compaction size limit.
    ///
    /// After a bulk load, a read-mostly phase meets level 0 below its
    /// trigger: every lookup of a key in a lower level reads a block of
    /// each level-0 file over its key, and without filters it reads that
    /// block from the device. This moves such files down.
    fn read_triggered(
        &self,
        st: &DbState,
        version: &Arc<Version>,
        targets: &LevelTargets,
        level: usize,
        file: &Arc<FileMetaData>,
    ) -> Option<Compaction> {
        // Inputs being compacted are refused below: level 0's when any of
        // its files is, `build_compaction`'s when any of its inputs is.
        if !self.opts.read_triggered_compactions
            || st.flush_running()
            || !st.cf(self.id).imm.is_empty()
            || !self.writes_quiet(st)
        {
            return None;
        }
        let mut c = match level {
            0 => self.compaction_for_level(st, version, targets, 0)?,
            _ if level + 1 < NUM_LEVELS => {
                self.build_compaction(st, version, level, level + 1, vec![file.clone()])?
            }
            _ => return None,
        };
        let moved = c.input_bytes(0);
        let rewritten = c.input_bytes(1);
        if rewritten > moved.saturating_mul(MAX_READ_COMPACTION_WIDTH)
            || moved + rewritten > self.max_compaction_bytes()
        {
            return None;
        }
        c.read_triggered = true;
        Some(c)
    }

    /// True if no write has come for [`READ_COMPACTION_QUIET`], as far as
    /// the picker can tell: the last sequence number is the one it saw
    /// with a read compaction due at least that long ago. Otherwise starts
    /// (or restarts) the wait; the background threads look again when it
    /// ends ([`DbInner::read_compaction_recheck`]).
    fn writes_quiet(&self, st: &DbState) -> bool {
        let seq = st.versions.last_sequence();
        let now = Instant::now();
        let mut quiet = self.read_compaction_quiet.lock();
        match *quiet {
            Some((seen, since)) if seen == seq => {
                now.saturating_duration_since(since) >= READ_COMPACTION_QUIET
            }
            _ => {
                *quiet = Some((seq, now));
                false
            }
        }
    }

    /// When a read-triggered compaction held back by
    /// [`writes_quiet`](Self::writes_quiet) may run if no write comes
    /// before: the background threads wait until then at most, instead of
    /// until the next event. `None` if none is held back.
    pub(crate) fn read_compaction_recheck(&self, st: &DbState) -> Option<Instant> {
        let (seen, since) = (*self.read_compaction_quiet.lock())?;
        let due = since + READ_COMPACTION_QUIET;
        (seen == st.versions.last_sequence() && due > Instant::now()).then_some(due)
    }

    /// (level, score) for L0 and every level from the base level down to
    /// the one above the last, highest first. L0 scores by file count;
    /// the others by bytes not already being compacted over target.
    pub(crate) fn level_scores(
        &self,
        version: &Version,
        targets: &LevelTargets,
    ) -> Vec<(usize, f64)> {
        // L0 scores by flushes (RocksDB's sorted runs; a flush cut into
        // several files counts once, so cutting never compacts L0 sooner
        // than RocksDB would), or by the files that could go down by a
        // trivial move but for an older L0 file overlapping them (a flush
        // that spanned every stream before the tree had files per stream),
        // which only a compaction of that file frees.
        let idle: Vec<Arc<FileMetaData>> = version
            .files(0)
            .iter()
            .filter(|f| !busy(f))
            .cloned()
            .collect();
        let fitting: std::collections::HashSet<u64> = idle
            .iter()
            .filter(|f| self.fits_below(version, targets.base_level, f))
            .map(|f| f.number)
            .collect();
        let free = level0_moves(&idle, &*self.user_cmp, |f| fitting.contains(&f.number)).len();
        let l0_files = flush_count(idle.iter()).max(fitting.len() - free);
        let l0_bytes: u64 = version
            .files(0)
            .iter()
            .filter(|f| !busy(f))
            .map(|f| f.file_size)
            .sum();
        // As RocksDB: L0 is also due when it holds more bytes than the
        // base level's target.
        let by_files = l0_files as f64 / self.opts.level0_file_num_compaction_trigger as f64;
        let by_bytes = l0_bytes as f64 / self.opts.max_bytes_for_level_base as f64;
        let mut scores = vec![(0, by_files.max(by_bytes))];
        for level in targets.base_level..LAST_LEVEL {
            let bytes: u64 = version
                .files(level)
                .iter()
                .filter(|f| !busy(f))
                .map(|f| f.file_size)
                .sum();
            scores.push((level, bytes as f64 / targets.max_bytes[level] as f64));
        }
        scores.sort_by(|a, b| b.1.total_cmp(&a.1));
        scores
    }

    fn compaction_for_level(
        &self,
        st: &DbState,
        version: &Arc<Version>,
        targets: &LevelTargets,
        level: usize,
    ) -> Option<Compaction> {
        if level == 0 {
            // One L0 compaction at a time: L0 files overlap, and a second
            // one could leave newer data below older.
            if version.files(0).iter().any(|f| busy(f)) {
                return None;
            }
            if let Some(c) = self.level0_trivial_move(st, version, targets.base_level) {
                return Some(c);
            }
            let inputs0 = level0_inputs(version.files(0), &*self.user_cmp, |f| {
                self.fits_below(version, targets.base_level, f)
            });
            return self.build_compaction(st, version, 0, targets.base_level, inputs0);
        }
        // The file that rewrites the fewest bytes of the next level per
        // byte it moves down goes first (RocksDB's default compaction
        // priority, `kMinOverlappingRatio`): under random writes, round
        // robin alone rewrote 2.5 times the next level's bytes that this
        // does. Equal ratios (files that overlap nothing: trivial moves)
        // go in round-robin order by key from the last compaction.
        let files = version.files(level);
        let pointer = &st.cf(self.id).compact_pointer[level];
        let start = files
            .iter()
            .position(|f| {
                pointer.is_empty()
                    || self.icmp.compare(f.largest.encoded(), pointer) == CmpOrdering::Greater
            })
            .unwrap_or(0);
        let below = version.overlapping_bytes_below(level, &*self.user_cmp);
        let candidates = (0..files.len())
            .map(|i| (start + i) % files.len())
            .filter(|&i| !busy(&files[i]))
            .map(|i| (i, files[i].file_size, below[i]))
            .collect();
        let mut c = by_overlap_ratio(candidates).into_iter().find_map(|i| {
            let c = self.build_compaction(st, version, level, level + 1, vec![files[i].clone()]);
            c.map(|c| (i, c))
        });
        if let Some((i, c)) = &mut c {
            // Move no more than the level's excess over its target: draining
            // a level deeper than its score asks changes the tree's shape.
            let excess = version
                .level_bytes(level)
                .saturating_sub(targets.max_bytes[level]);
            self.extend_trivial_move(st, version, *i, c, excess);
        }
        c.map(|(_, c)| c)
    }

    fn partitioner(&self) -> Option<&dyn SstPartitioner> {
        self.opts.sst_partitioner.as_ref().map(|f| f.partitioner())
    }

    /// The level-0 files that can go to `output_level` by a trivial move,
    /// as one compaction, or None: those that overlap no other level-0
    /// file and nothing in the output level or a running compaction into
    /// it (see [`level0_moves`]). The files of a flush cut per stream
    /// usually all qualify; under random writes none does.
    fn level0_trivial_move(
        &self,
        st: &DbState,
        version: &Arc<Version>,
        output_level: usize,
    ) -> Option<Compaction> {
        let ucmp = &*self.user_cmp;
        let max_move_bytes = self.opts.target_file_size(output_level).saturating_mul(2);
        let chosen = self.level0_movable(version, output_level, version.files(0), |f| {
            let (lo, hi) = (f.smallest.user_key(), f.largest.user_key());
            !running_into(st, self.id, output_level, lo, hi, ucmp)
        });
        let range = key_range(&chosen, ucmp)?;
        Some(Compaction {
            level: 0,
            output_level,
            inputs: [chosen, Vec::new()],
            grandparents: Vec::new(),
            version: version.clone(),
            range,
            max_move_bytes,
            manual: false,
            read_triggered: false,
        })
    }

    /// The files of `l0` (level 0, newest first) that can go to
    /// `output_level` by a trivial move (see [`level0_moves`]): not too big,
    /// not refused by the partitioner, overlapping nothing there, and
    /// passing `also`.
    fn level0_movable(
        &self,
        version: &Version,
        output_level: usize,
        l0: &[Arc<FileMetaData>],
        mut also: impl FnMut(&FileMetaData) -> bool,
    ) -> Vec<Arc<FileMetaData>> {
        level0_moves(l0, &*self.user_cmp, |f| {
            self.fits_below(version, output_level, f) && also(f)
        })
    }

    /// True if `f` could go to `output_level` by a trivial move as far as
    /// that level is concerned: not much bigger than its target file size,
    /// not refused by the partitioner, and overlapping nothing there.
    fn fits_below(&self, version: &Version, output_level: usize, f: &FileMetaData) -> bool {
        let ucmp = &*self.user_cmp;
        let (lo, hi) = (f.smallest.user_key(), f.largest.user_key());
        f.file_size <= self.opts.target_file_size(output_level).saturating_mul(2)
            && self.opts.same_table_format(0, output_level)
            && may_move(f, self.partitioner())
            && !version.overlap_in_level(output_level, Some(lo), Some(hi), ucmp)
    }

    /// Grows a trivial move of file `at` of its level into a run of the
    /// consecutive files around it whose combined range still overlaps
    /// nothing in the output level ([`trivial_move_run`]): as RocksDB's
    /// `TryExtendNonL0TrivialMove`, at least [`MULTI_TRIVIAL_MOVE_FILES`]
    /// files, and beyond them as many as the level's `excess` bytes over
    /// its target allow, so that a level of small per-stream files goes
    /// down in a few manifest edits, not one per file, without being
    /// drained deeper than its score asks.
    fn extend_trivial_move(
        &self,
        st: &DbState,
        version: &Version,
        at: usize,
        c: &mut Compaction,
        excess: u64,
    ) {
        let ucmp = &*self.user_cmp;
        let partitioner = self.partitioner();
        if !c.is_trivial_move(ucmp, &self.opts) {
            return;
        }
        let files = version.files(c.level);
        let run = trivial_move_run(
            files,
            at,
            excess,
            self.max_compaction_bytes(),
            |g, lo, hi| {
                !busy(g)
                    && g.file_size <= c.max_move_bytes
                    && may_move(g, partitioner)
                    && !version.overlap_in_level(c.output_level, Some(lo), Some(hi), ucmp)
                    && !running_into(st, self.id, c.output_level, lo, hi, ucmp)
            },
        );
        c.range = (
            files[run.start].smallest.user_key().to_vec(),
            files[run.end - 1].largest.user_key().to_vec(),
        );
        c.inputs[0] = files[run].to_vec();
    }

    /// Completes a compaction from its first inputs, or None if it would
    /// conflict with a running one.
    pub(crate) fn build_compaction(
        &self,
        st: &DbState,
        version: &Arc<Version>,
        level: usize,
        output_level: usize,
        inputs0: Vec<Arc<FileMetaData>>,
    ) -> Option<Compaction> {
        let ucmp = &*self.user_cmp;
        let range = key_range(&inputs0, ucmp)?;
        // A compaction within one level (manual, of the last level) has
        // no second input.
        let inputs1 = if output_level == level {
            Vec::new()
        } else {
            version.overlapping_files(output_level, Some(&range.0), Some(&range.1), ucmp)
        };
        if inputs0.iter().chain(&inputs1).any(|f| busy(f)) {
            return None;
        }
        let mut all = inputs0.clone();
        all.extend(inputs1.iter().cloned());
        let range = key_range(&all, ucmp)?;
        if running_into(st, self.id, output_level, &range.0, &range.1, ucmp) {
            return None;
        }
        let grandparents = if output_level + 1 < NUM_LEVELS {
            version.overlapping_files(output_level + 1, Some(&range.0), Some(&range.1), ucmp)
        } else {
            Vec::new()
        };
        Some(Compaction {
            level,
            output_level,
            inputs: [inputs0, inputs1],
            grandparents,
            version: version.clone(),
            range,
            max_move_bytes: self.opts.target_file_size(output_level).saturating_mul(2),
            manual: false,
            read_triggered: false,
        })
    }

    /// How many compactions may run at once: what `max_background_jobs`
    /// leaves after the flush threads (a quarter, at least one), as RocksDB.
    pub(crate) fn max_compactions(&self) -> usize {
        let jobs = self.opts.max_background_jobs;
        let flushes = (jobs / 4).max(1);
        jobs.saturating_sub(flushes).max(1)
    }
}

/// The consecutive files of a level (`files`, in key order) that a
/// trivial move of file `at` takes: rightwards, then leftwards (as RocksDB,
/// so a run that starts at the level's last file still takes the files
/// before it), each file while `may_join(file, lo, hi)` says it may go
/// with the run grown to user keys `[lo, hi]` (not busy, overlapping
/// nothing below), at least [`MULTI_TRIVIAL_MOVE_FILES`] files and beyond
/// them only within the level's `excess` bytes over its target, never
/// past `max_bytes`.
fn trivial_move_run(
    files: &[Arc<FileMetaData>],
    at: usize,
    excess: u64,
    max_bytes: u64,
    may_join: impl Fn(&FileMetaData, &[u8], &[u8]) -> bool,
) -> std::ops::Range<usize> {
    let mut run = at..at + 1;
    let mut total = files[at].file_size;
    let fits = |g: &FileMetaData, run: &std::ops::Range<usize>, total: u64| {
        (run.len() < MULTI_TRIVIAL_MOVE_FILES || total + g.file_size <= excess)
            && total + g.file_size <= max_bytes
    };
    while let Some(g) = files.get(run.end) {
        let lo = files[run.start].smallest.user_key();
        if !fits(g, &run, total) || !may_join(g, lo, g.largest.user_key()) {
            break;
        }
        total += g.file_size;
        run.end += 1;
    }
    while run.start > 0 {
        let g = &files[run.start - 1];
        let hi = files[run.end - 1].largest.user_key();
        if !fits(g, &run, total) || !may_join(g, g.smallest.user_key(), hi) {
            break;
        }
        total += g.file_size;
        run.start -= 1;
    }
    run
}

/// The files `candidates` names (index, size, bytes overlapping it in the
/// next level; given in round-robin order), fewest next-level bytes per
/// byte first; equal ratios keep their order.
fn by_overlap_ratio(mut candidates: Vec<(usize, u64, u64)>) -> Vec<usize> {
    candidates.sort_by_key(|&(_, size, below)| below.saturating_mul(1024) / size.max(1));
    candidates.into_iter().map(|(i, _, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{InternalKey, ValueKind};
    use crate::version::{VersionBuilder, VersionEdit};

    fn version_with(sizes: &[(usize, u64)]) -> Version {
        let icmp = crate::key::InternalKeyComparator::new(Arc::new(crate::key::BytewiseComparator));
        let mut edit = VersionEdit::new();
        for (i, &(level, size)) in sizes.iter().enumerate() {
            let k = format!("k{i:04}");
            let small = InternalKey::new(k.as_bytes(), 1, ValueKind::Value);
            let large = InternalKey::new(format!("{k}z").as_bytes(), 1, ValueKind::Value);
            edit.add_file(level, i as u64 + 10, size, small, large, 1, 1);
        }
        let base = Version::empty();
        let mut b = VersionBuilder::new(icmp, &base);
        b.apply(&edit, "test", 0).unwrap();
        b.build()
    }

    /// Level-0 files `(smallest, largest)`, newest first.
    fn level0(ranges: &[(&str, &str)]) -> Vec<Arc<FileMetaData>> {
        let n = ranges.len() as u64;
        ranges
            .iter()
            .enumerate()
            .map(|(i, &range)| {
                let seq = n - i as u64;
                file(seq, range, (seq, seq))
            })
            .collect()
    }

    /// A table numbered `number` holding user keys `lo..=hi` with
    /// sequence numbers `s_lo..=s_hi`.
    fn file(number: u64, (lo, hi): (&str, &str), (s_lo, s_hi): (u64, u64)) -> Arc<FileMetaData> {
        Arc::new(FileMetaData::new(
            number,
            100,
            InternalKey::new(lo.as_bytes(), s_hi, ValueKind::Value),
            InternalKey::new(hi.as_bytes(), s_lo, ValueKind::Value),
            s_lo,
            s_hi,
        ))
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> Vec<u64> {
        files.iter().map(|f| f.number).collect()
    }

    #[test]
    fn files_go_down_by_least_overlap_then_round_robin() {
        // (index, size, overlapping bytes below), in round-robin order.
        let order = by_overlap_ratio(vec![
            (2, 100, 500),
            (3, 100, 0),
            (0, 100, 50),
            (1, 200, 100),
        ]);
        assert_eq!(order, vec![3, 0, 1, 2]);
        // Equal ratios, nothing below: round robin as given.
        assert_eq!(
            by_overlap_ratio(vec![(5, 10, 0), (1, 20, 0), (4, 0, 0)]),
            vec![5, 1, 4]
        );
    }

    #[test]
    fn trivial_moves_take_four_files_then_the_excess() {
        // Ten files of 100 bytes: [a, a], [b, b], ... [j, j].
        let keys: Vec<String> = (b'a'..=b'j').map(|c| (c as char).to_string()).collect();
        let files: Vec<Arc<FileMetaData>> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| file(i as u64 + 1, (k, k), (1, 1)))
            .collect();
        let any = |_: &FileMetaData, _: &[u8], _: &[u8]| true;
        // No excess: four files, rightwards first.
        assert_eq!(trivial_move_run(&files, 2, 0, u64::MAX, any), 2..6);
        // From the last file: leftwards.
        assert_eq!(trivial_move_run(&files, 9, 0, u64::MAX, any), 6..10);
        // From the second to last: one rightwards, two leftwards.
        assert_eq!(trivial_move_run(&files, 8, 0, u64::MAX, any), 6..10);
        // Beyond four files, only within the excess (600 bytes: six).
        assert_eq!(trivial_move_run(&files, 0, 600, u64::MAX, any), 0..6);
        assert_eq!(trivial_move_run(&files, 5, 650, u64::MAX, any), 4..10);
        // Never past max_compaction_bytes, even under four files.
        assert_eq!(trivial_move_run(&files, 3, 1000, 250, any), 3..5);
        // A file that may not join (busy, or its range would overlap the
        // level below) ends the run on its side.
        let not_f = |g: &FileMetaData, _: &[u8], _: &[u8]| g.number != 6;
        assert_eq!(trivial_move_run(&files, 3, 0, u64::MAX, not_f), 1..5);
        // The range asked about is the run's, grown by the file: here
        // nothing at or below g may go.
        let above_g = |_: &FileMetaData, lo: &[u8], _: &[u8]| lo > b"g".as_slice();
        assert_eq!(trivial_move_run(&files, 9, 0, u64::MAX, above_g), 7..10);
    }

    #[test]
    fn level0_moves_take_only_files_that_overlap_no_other() {
        let ucmp = crate::key::BytewiseComparator;
        // Newest first: 4 = [m, n], 3 = [x, z], 2 = [b, d], 1 = [a, c].
        let files = level0(&[("m", "n"), ("x", "z"), ("b", "d"), ("a", "c")]);
        // 1 and 2 overlap: both stay (2 alone would go under the older 1;
        // 1 alone would only be merged with 2 later). 3 and 4 go, oldest
        // first.
        assert_eq!(numbers(&level0_moves(&files, &ucmp, |_| true)), vec![3, 4]);
        assert_eq!(
            numbers(&level0_moves(&files, &ucmp, |f| f.number != 3)),
            vec![4]
        );
        // Sharing only an end key is overlapping; so is a file reaching
        // over later ones.
        let files = level0(&[("c", "e"), ("a", "c")]);
        assert!(level0_moves(&files, &ucmp, |_| true).is_empty());
        let files = level0(&[("d", "e"), ("b", "c"), ("a", "z")]);
        assert!(level0_moves(&files, &ucmp, |_| true).is_empty());
        let files = level0(&[("y", "z"), ("b", "c"), ("a", "d")]);
        assert_eq!(numbers(&level0_moves(&files, &ucmp, |_| true)), vec![3]);
    }

    #[test]
    fn level0_compactions_leave_newer_files_that_fit_below() {
        let ucmp = crate::key::BytewiseComparator;
        // Newest first: 4 = [m, n], 3 = [x, z], 2 = [a, z], 1 = [b, c].
        let files = level0(&[("m", "n"), ("x", "z"), ("a", "z"), ("b", "c")]);
        // 2 overlaps the level below; 3 and 4 are newer and would not.
        let fits = |f: &FileMetaData| f.number != 2;
        assert_eq!(numbers(&level0_inputs(&files, &ucmp, fits)), vec![2, 1]);
        // Every file fits (they only overlap each other), or the newest
        // does not: all of level 0 is taken.
        assert_eq!(
            numbers(&level0_inputs(&files, &ucmp, |_| true)),
            vec![4, 3, 2, 1]
        );
        let fits = |f: &FileMetaData| f.number != 4;
        assert_eq!(
            numbers(&level0_inputs(&files, &ucmp, fits)),
            vec![4, 3, 2, 1]
        );
        assert!(level0_inputs(&[], &ucmp, |_| false).is_empty());
    }

    #[test]
    fn level0_compactions_take_files_whose_entries_are_not_all_newer() {
        let ucmp = crate::key::BytewiseComparator;
        // Ordered by largest sequence number, newest first. File 3 holds
        // entries 50-100 and shares keys with 2 (entries 60-90): it must go
        // with 2. File 4 shares keys with 3 and is newer than all of it,
        // but once 3 is taken, 4 stays only if newer than 3's entries: it
        // is (101-120). File 5 overlaps nothing taken.
        let files = vec![
            file(5, ("x", "y"), (121, 130)),
            file(4, ("c", "d"), (101, 120)),
            file(3, ("a", "d"), (50, 100)),
            file(2, ("b", "c"), (60, 90)),
            file(1, ("a", "z"), (1, 40)),
        ];
        let fits = |f: &FileMetaData| f.number != 2;
        assert_eq!(numbers(&level0_inputs(&files, &ucmp, fits)), vec![3, 2, 1]);
    }

    #[test]
    fn level0_files_count_once_per_flush() {
        let file = |lo: u64, hi: u64| file(lo, ("a", "b"), (lo, hi));
        assert_eq!(flush_count([].iter()), 0);
        // Two flushes (sequence numbers 1-100 and 101-200), the first cut
        // into three files, the second into two.
        let files = [
            file(1, 90),
            file(3, 100),
            file(2, 99),
            file(101, 200),
            file(105, 190),
        ];
        assert_eq!(flush_count(files.iter()), 2);
        assert_eq!(flush_count(files[..3].iter()), 1);
    }

    #[test]
    fn static_targets_grow_by_the_multiplier() {
        let opts = Options::default();
        let t = level_targets(&opts, &Version::empty());
        assert_eq!(t.base_level, 1);
        assert_eq!(t.max_bytes[1], 256 << 20);
        assert_eq!(t.max_bytes[2], 2560 << 20);
    }

    #[test]
    fn dynamic_targets_follow_the_last_level() {
        let mut opts = Options::default();
        opts.set_level_compaction_dynamic_level_bytes(true);
        opts.set_max_bytes_for_level_base(100);
        opts.set_max_bytes_for_level_multiplier(10.0);
        let t = level_targets(&opts, &Version::empty());
        assert_eq!(t.base_level, LAST_LEVEL);
        // 1,000,000 bytes in L6: L5 100,000, L4 10,000, L3 1,000, L2 100 = base.
        let v = version_with(&[(6, 1_000_000)]);
        let t = level_targets(&opts, &v);
        assert_eq!(t.base_level, 2, "{t:?}");
        assert_eq!(t.max_bytes[2], 100);
        assert_eq!(t.max_bytes[5], 100_000);
        assert_eq!(t.max_bytes[6], 1_000_000);
        // A small last level keeps the base level at it.
        let v = version_with(&[(6, 50)]);
        let t = level_targets(&opts, &v);
        assert_eq!(t.base_level, 6, "{t:?}");
        assert!(t.max_bytes[6] >= 100);
    }
}
