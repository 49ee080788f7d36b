//! Leveled compaction: picking by score, trivial moves, and the merge job.
//!
//! One compaction runs at a time. L0 is compacted when it holds
//! `level0_file_num_compaction_trigger` files: every L0 file and the L1
//! files they overlap are merged into L1. Level n >= 1 is compacted when
//! its bytes exceed its target: one file, chosen round robin by key, and
//! the files of level n+1 it overlaps. Output files are cut at the target
//! file size, only where the user key changes, so no user key ever spans
//! two files of a level.

use std::cmp::Ordering as CmpOrdering;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::MutexGuard;

use crate::error::{Error, Result};
use crate::iter::merging::MergingIterator;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, Comparator, InternalKey, SequenceNumber, ValueKind};
use crate::sst::TableBuilder;
use crate::version::{FileMetaData, NewFile, Version, VersionEdit, NUM_LEVELS};

use super::filename::table_file_name;
use super::flush::TableStats;
use super::inner::{DbInner, DbState};

/// A chosen compaction.
#[derive(Debug)]
pub(crate) struct Compaction {
    pub(crate) level: usize,
    /// Inputs from `level` and from `level + 1`.
    pub(crate) inputs: [Vec<Arc<FileMetaData>>; 2],
    pub(crate) version: Arc<Version>,
}

impl Compaction {
    fn output_level(&self) -> usize {
        self.level + 1
    }

    fn is_trivial_move(&self) -> bool {
        self.inputs[0].len() == 1
            && self.inputs[1].is_empty()
            && (self.level > 0 || self.version.num_files(0) == 1)
    }

    fn input_bytes(&self) -> u64 {
        self.inputs.iter().flatten().map(|f| f.file_size).sum()
    }
}

impl DbInner {
    /// The level most in need of compaction and its inputs, if any level's
    /// score is at least 1.
    pub(crate) fn pick_compaction(&self, st: &DbState) -> Option<Compaction> {
        let version = st.versions.current();
        let (level, score) = self.best_level(&version);
        if score < 1.0 {
            return None;
        }
        self.compaction_for_level(st, version, level)
    }

    /// (level, score) with the highest score; L0 scores by file count.
    pub(crate) fn best_level(&self, version: &Version) -> (usize, f64) {
        let mut best = (
            0,
            version.num_files(0) as f64 / self.opts.level0_file_num_compaction_trigger as f64,
        );
        for level in 1..NUM_LEVELS - 1 {
            let score =
                version.level_bytes(level) as f64 / self.opts.max_bytes_for_level(level) as f64;
            if score > best.1 {
                best = (level, score);
            }
        }
        best
    }

    pub(crate) fn compaction_for_level(
        &self,
        st: &DbState,
        version: Arc<Version>,
        level: usize,
    ) -> Option<Compaction> {
        let ucmp = &*self.user_cmp;
        let inputs0: Vec<Arc<FileMetaData>> = if level == 0 {
            version.files(0).to_vec()
        } else {
            let files = version.files(level);
            let pointer = &st.compact_pointer[level];
            let next = files
                .iter()
                .find(|f| {
                    pointer.is_empty()
                        || self.icmp.compare(f.largest.encoded(), pointer) == CmpOrdering::Greater
                })
                .or_else(|| files.first())?;
            vec![next.clone()]
        };
        if inputs0.is_empty() || level + 1 >= NUM_LEVELS {
            return None;
        }
        let smallest = inputs0
            .iter()
            .map(|f| f.smallest.user_key())
            .min_by(|a, b| ucmp.compare(a, b))?;
        let largest = inputs0
            .iter()
            .map(|f| f.largest.user_key())
            .max_by(|a, b| ucmp.compare(a, b))?;
        let inputs1 = version.overlapping_files(level + 1, Some(smallest), Some(largest), ucmp);
        Some(Compaction {
            level,
            inputs: [inputs0, inputs1],
            version,
        })
    }

    /// Runs `c` and installs its result.
    pub(crate) fn run_compaction(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        c: Compaction,
    ) -> Result<()> {
        let start = Instant::now();
        for f in c.inputs.iter().flatten() {
            f.being_compacted.store(true, Ordering::Release);
        }
        let result = self.run_compaction_inner(st, &c, start);
        for f in c.inputs.iter().flatten() {
            f.being_compacted.store(false, Ordering::Release);
        }
        result
    }

    fn run_compaction_inner(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        c: &Compaction,
        start: Instant,
    ) -> Result<()> {
        let out_level = c.output_level();
        let mut edit = VersionEdit::new();
        for (i, files) in c.inputs.iter().enumerate() {
            for f in files {
                edit.delete_file(c.level + i, f.number);
            }
        }
        if c.is_trivial_move() {
            let f = &c.inputs[0][0];
            edit.add_new_file(out_level, f.to_new_file());
            Self::remember_current(st);
            st.versions.log_and_apply(&mut edit)?;
            st.compact_pointer[c.level] = f.largest.encoded().to_vec();
            st.stats[out_level].bytes_moved += f.file_size;
            st.stats[out_level].count += 1;
            return Ok(());
        }
        let smallest_snapshot = Self::smallest_snapshot(st);
        let outputs = MutexGuard::unlocked(st, || self.merge_inputs(c, smallest_snapshot));
        let outputs = match outputs {
            Ok(o) => o,
            Err((e, numbers)) => {
                for n in numbers {
                    st.pending_outputs.remove(&n);
                    self.table_cache.evict(n);
                    let _ = self.fs.remove(&table_file_name(&self.dir, n));
                }
                return Err(e);
            }
        };
        let written: u64 = outputs.iter().map(|f| f.file_size).sum();
        for f in &outputs {
            edit.add_new_file(out_level, f.clone());
        }
        Self::remember_current(st);
        let applied = st.versions.log_and_apply(&mut edit);
        for f in &outputs {
            st.pending_outputs.remove(&f.number);
        }
        applied?;
        if let Some(last) = c.inputs[0]
            .iter()
            .map(|f| f.largest.encoded())
            .max_by(|a, b| self.icmp.compare(a, b))
        {
            st.compact_pointer[c.level] = last.to_vec();
        }
        let s = &mut st.stats[out_level];
        s.bytes_read += c.input_bytes();
        s.bytes_written += written;
        s.micros += start.elapsed().as_micros() as u64;
        s.count += 1;
        self.delete_obsolete_files(st);
        Ok(())
    }

    /// Merges the inputs into new tables. On failure, returns the numbers
    /// of the outputs started so the caller can remove them.
    fn merge_inputs(
        &self,
        c: &Compaction,
        smallest_snapshot: SequenceNumber,
    ) -> std::result::Result<Vec<NewFile>, (Error, Vec<u64>)> {
        let mut out = Outputs {
            done: Vec::new(),
            numbers: Vec::new(),
            current: None,
        };
        match self.merge_into(c, smallest_snapshot, &mut out) {
            Ok(()) => Ok(out.done),
            Err(e) => Err((e, out.numbers)),
        }
    }

    fn merge_into(
        &self,
        c: &Compaction,
        smallest_snapshot: SequenceNumber,
        out: &mut Outputs,
    ) -> Result<()> {
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for f in c.inputs.iter().flatten() {
            children.push(Box::new(self.table_cache.get(f.number)?.iter_opt(false)));
        }
        let icmp: Arc<dyn Comparator> = Arc::new(self.icmp.clone());
        let mut it = MergingIterator::new(icmp, children);
        it.seek_to_first();
        let ucmp = &*self.user_cmp;
        let target = self.opts.target_file_size(c.output_level());
        let mut current_user_key: Option<Vec<u8>> = None;
        let mut last_seq_for_key = u64::MAX;
        let mut processed = 0u64;
        while it.valid() {
            processed += 1;
            if processed.is_multiple_of(1024) && self.shutting_down.load(Ordering::Acquire) {
                return Err(Error::Busy(
                    "compaction stopped: the database is closing".into(),
                ));
            }
            let key = it.key();
            let Some(p) = parse_internal_key(key) else {
                return Err(Error::corruption(
                    "compaction input",
                    0,
                    "malformed internal key",
                ));
            };
            let new_user_key = current_user_key
                .as_deref()
                .is_none_or(|k| ucmp.compare(k, p.user_key) != CmpOrdering::Equal);
            if new_user_key {
                current_user_key = Some(p.user_key.to_vec());
                last_seq_for_key = u64::MAX;
                // Cut only between user keys.
                if out
                    .current
                    .as_ref()
                    .is_some_and(|b| b.builder.estimated_file_size() >= target)
                {
                    self.finish_output(out)?;
                }
            }
            let drop = if last_seq_for_key <= smallest_snapshot {
                // A newer entry for this key is visible to every snapshot.
                true
            } else {
                p.kind == ValueKind::Deletion
                    && p.sequence <= smallest_snapshot
                    && is_base_level_for_key(&c.version, c.output_level(), p.user_key, ucmp)
            };
            last_seq_for_key = p.sequence;
            if !drop {
                if out.current.is_none() {
                    self.start_output(out)?;
                }
                let cur = out.current.as_mut().expect("output just started");
                cur.stats.observe(key)?;
                cur.builder.add(key, it.value())?;
            }
            it.next();
        }
        it.status()?;
        self.finish_output(out)
    }

    fn start_output(&self, out: &mut Outputs) -> Result<()> {
        let number = {
            let mut st = self.state.lock();
            let n = st.versions.new_file_number();
            st.pending_outputs.insert(n);
            n
        };
        out.numbers.push(number);
        let path = table_file_name(&self.dir, number);
        let file = self.fs.create(&path)?;
        let builder =
            TableBuilder::new(self.opts.table_options(), file, path.display().to_string())?;
        out.current = Some(Output {
            number,
            builder,
            stats: TableStats::default(),
        });
        Ok(())
    }

    fn finish_output(&self, out: &mut Outputs) -> Result<()> {
        let Some(mut cur) = out.current.take() else {
            return Ok(());
        };
        let props = cur.builder.finish()?;
        cur.builder.sync()?;
        self.table_cache.get(cur.number)?;
        out.done.push(NewFile {
            number: cur.number,
            file_size: cur.builder.file_size(),
            smallest: InternalKey::from_encoded(props.smallest_key),
            largest: InternalKey::from_encoded(props.largest_key),
            smallest_seqno: cur.stats.smallest_seqno,
            largest_seqno: cur.stats.largest_seqno,
        });
        Ok(())
    }
}

struct Output {
    number: u64,
    builder: TableBuilder,
    stats: TableStats,
}

struct Outputs {
    done: Vec<NewFile>,
    numbers: Vec<u64>,
    current: Option<Output>,
}

/// True if no level below `output_level` may hold `user_key`, so a deletion
/// of it has nothing left to hide.
fn is_base_level_for_key(
    version: &Version,
    output_level: usize,
    user_key: &[u8],
    ucmp: &dyn Comparator,
) -> bool {
    for level in output_level + 1..NUM_LEVELS {
        let files = version.files(level);
        let i = files
            .partition_point(|f| ucmp.compare(f.largest.user_key(), user_key) == CmpOrdering::Less);
        if i < files.len()
            && ucmp.compare(files[i].smallest.user_key(), user_key) != CmpOrdering::Greater
        {
            return false;
        }
    }
    true
}

impl DbInner {
    /// Compacts every file overlapping `[begin, end]` (user keys, None =
    /// unbounded) level by level down to the last level holding data in
    /// the range, as LevelDB's `CompactRange`. Waits for a running
    /// automatic compaction first and keeps others out while it runs.
    pub(crate) fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let mut st = self.state.lock();
        while st.compaction_running {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            self.bg_done.wait(&mut st);
        }
        st.compaction_running = true;
        let result = (|| {
            let version = st.versions.current();
            let last = (1..NUM_LEVELS)
                .rev()
                .find(|&l| {
                    !version
                        .overlapping_files(l, begin, end, &*self.user_cmp)
                        .is_empty()
                })
                .unwrap_or(0);
            for level in 0..last.max(1) {
                if let Some(e) = &st.bg_error {
                    return Err(e.clone());
                }
                let version = st.versions.current();
                let inputs0 = version.overlapping_files(level, begin, end, &*self.user_cmp);
                if inputs0.is_empty() {
                    continue;
                }
                let ucmp = &*self.user_cmp;
                let lo = inputs0
                    .iter()
                    .map(|f| f.smallest.user_key())
                    .min_by(|a, b| ucmp.compare(a, b));
                let hi = inputs0
                    .iter()
                    .map(|f| f.largest.user_key())
                    .max_by(|a, b| ucmp.compare(a, b));
                let inputs1 = version.overlapping_files(level + 1, lo, hi, ucmp);
                let c = Compaction {
                    level,
                    inputs: [inputs0, inputs1],
                    version,
                };
                self.run_compaction(&mut st, c)?;
            }
            Ok(())
        })();
        st.compaction_running = false;
        self.bg_done.notify_all();
        self.bg_work.notify_all();
        result
    }

    /// Waits until no flush or compaction is running or needed.
    pub(crate) fn wait_for_compact(&self) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            if let Some(e) = &st.bg_error {
                return Err(e.clone());
            }
            let idle = st.imm.is_empty()
                && !st.flush_running
                && !st.compaction_running
                && (self.opts.disable_auto_compactions || self.pick_compaction(&st).is_none());
            if idle {
                return Ok(());
            }
            self.bg_work.notify_all();
            self.bg_done
                .wait_for(&mut st, std::time::Duration::from_millis(50));
        }
    }
}
