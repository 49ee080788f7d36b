//! The tables one flush, compaction or recovery writes.
//!
//! An output is created at its first entry and synced when it is cut; at
//! the end one directory sync makes every new name durable and every table
//! is opened through the table cache, so a manifest edit only ever names
//! tables that are durable and readable. On an error the caller discards
//! [`TableOutputs::numbers`] (deleting whatever was written).

use std::cmp::Ordering;

use crate::error::Result;
use crate::key::{extract_user_key, InternalKey, SequenceNumber};
use crate::range_del::{Fragment, RangeTombstone};
use crate::sst::{TableProperties, TableWriter};
use crate::version::NewFile;

use super::filename::table_file_name;
use super::inner::DbInner;

struct Output {
    number: u64,
    builder: TableWriter,
    smallest_seqno: SequenceNumber,
    largest_seqno: SequenceNumber,
}

/// Tables written one after another into one level.
pub(crate) struct TableOutputs<'a, F: FnMut() -> u64> {
    db: &'a DbInner,
    /// The level the tables go to (the table cache opens them for it).
    level: usize,
    /// Hands out the number of each new table.
    next_number: F,
    current: Option<Output>,
    finished: Vec<(Output, TableProperties)>,
    numbers: Vec<u64>,
    /// Range deletions to write, ascending: each output takes their pieces
    /// between its first key and the next output's first key (the first
    /// output from the start, the last to the end), so the outputs' ranges
    /// stay disjoint.
    range_dels: Vec<Fragment>,
    /// The first user key of the open output; `None` for the first output.
    lower: Option<Vec<u8>>,
    /// The open output is cut, but stays open until the next output's
    /// first key, its upper bound, is known.
    cut_pending: bool,
}

impl<'a, F: FnMut() -> u64> TableOutputs<'a, F> {
    pub(crate) fn new(db: &'a DbInner, level: usize, next_number: F) -> Self {
        TableOutputs {
            db,
            level,
            next_number,
            current: None,
            finished: Vec::new(),
            numbers: Vec::new(),
            range_dels: Vec::new(),
            lower: None,
            cut_pending: false,
        }
    }

    /// Sets the range deletions the outputs hold (fragments, ascending).
    /// Call before the first entry.
    pub(crate) fn set_range_deletions(&mut self, fragments: Vec<Fragment>) {
        debug_assert!(self.numbers.is_empty());
        self.range_dels = fragments;
    }

    /// Estimated bytes of the open output; None if no output is open.
    pub(crate) fn current_size(&self) -> Option<u64> {
        if self.cut_pending {
            return None;
        }
        self.current
            .as_ref()
            .map(|o| o.builder.estimated_file_size())
    }

    /// Every table number used so far, written or not.
    pub(crate) fn numbers(&self) -> &[u64] {
        &self.numbers
    }

    /// Adds an entry (internal key, value, the key's sequence number) to
    /// the open output, opening one first if none is.
    pub(crate) fn add(&mut self, key: &[u8], value: &[u8], sequence: SequenceNumber) -> Result<()> {
        if self.cut_pending {
            let next_first = extract_user_key(key).to_vec();
            self.end_output(Some(&next_first))?;
            self.lower = Some(next_first);
        }
        self.output()?;
        let out = self.current.as_mut().expect("output is open");
        out.smallest_seqno = out.smallest_seqno.min(sequence);
        out.largest_seqno = out.largest_seqno.max(sequence);
        out.builder.add(key, value)
    }

    /// Opens an output if none is open.
    fn output(&mut self) -> Result<()> {
        match &mut self.current {
            Some(_) => {}
            None => {
                let number = (self.next_number)();
                self.numbers.push(number);
                let path = table_file_name(&self.db.dir, number);
                let mut file = if self.db.opts.use_direct_io_for_flush_and_compaction {
                    self.db.fs.create_direct(&path)?
                } else {
                    self.db.fs.create(&path)?
                };
                if let Some(limiter) = &self.db.opts.rate_limiter {
                    file = crate::env::rate_limiter::RateLimitedFile::wrap(file, limiter.clone());
                }
                let mut builder = TableWriter::new(
                    self.db.opts.table_options(),
                    // Packed tables hold no range deletions: an output
                    // with some is block-based (both live in one level).
                    self.db.opts.packed_at(self.level) && self.range_dels.is_empty(),
                    file,
                    path.display().to_string(),
                )?;
                if let Some(op) = &self.db.opts.merge_operator {
                    builder.set_merge_operator(op.name());
                }
                self.current = Some(Output {
                    number,
                    builder,
                    smallest_seqno: SequenceNumber::MAX,
                    largest_seqno: 0,
                });
            }
        }
        Ok(())
    }

    /// Ends the open output, if any: finished and synced. With range
    /// deletions to write, it ends at the next entry (whose key bounds
    /// them) or at [`TableOutputs::finish`].
    pub(crate) fn cut(&mut self) -> Result<()> {
        if self.current.is_none() {
            return Ok(());
        }
        if !self.range_dels.is_empty() {
            self.cut_pending = true;
            return Ok(());
        }
        self.end_output(None)
    }

    /// Writes the pieces of the range deletions between `lower` and
    /// `upper` (`None`: unbounded) into the open output, and ends it.
    fn end_output(&mut self, upper: Option<&[u8]>) -> Result<()> {
        self.cut_pending = false;
        let Some(mut out) = self.current.take() else {
            return Ok(());
        };
        let ucmp = &*self.db.user_cmp;
        for f in &self.range_dels {
            let start = match &self.lower {
                Some(lo) if ucmp.compare(&f.start, lo) == Ordering::Less => lo,
                _ => &f.start,
            };
            let end = match upper {
                Some(hi) if ucmp.compare(hi, &f.end) == Ordering::Less => hi,
                _ => &f.end[..],
            };
            if ucmp.compare(start, end) != Ordering::Less {
                continue;
            }
            for &seq in &f.seqs {
                out.smallest_seqno = out.smallest_seqno.min(seq);
                out.largest_seqno = out.largest_seqno.max(seq);
                out.builder.add_range_deletion(RangeTombstone {
                    start: start.to_vec(),
                    end: end.to_vec(),
                    seq,
                })?;
            }
        }
        let props = out.builder.finish()?;
        out.builder.sync()?;
        self.finished.push((out, props));
        Ok(())
    }

    /// Ends the open output and returns every table, each durable (file
    /// and directory entry) and checked to open.
    pub(crate) fn finish(&mut self) -> Result<Vec<NewFile>> {
        // Range deletions with no entry after them still need a table.
        let after_last = match (&self.lower, self.range_dels.last()) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(lo), Some(last)) => self.db.user_cmp.compare(lo, &last.end) == Ordering::Less,
        };
        if self.current.is_none() && after_last {
            self.output()?;
        }
        self.end_output(None)?;
        if self.finished.is_empty() {
            return Ok(Vec::new());
        }
        // The manifest may name a table only once its directory entry is
        // durable too, or a power loss leaves a dangling reference.
        self.db.fs.sync_dir(&self.db.dir)?;
        let mut files = Vec::with_capacity(self.finished.len());
        for (out, props) in std::mem::take(&mut self.finished) {
            // A table that cannot be read back is never recorded.
            self.db
                .table_cache
                .get(out.number, out.builder.file_size(), self.level)?;
            files.push(NewFile {
                number: out.number,
                file_size: out.builder.file_size(),
                smallest: InternalKey::from_encoded(props.smallest_key),
                largest: InternalKey::from_encoded(props.largest_key),
                smallest_seqno: out.smallest_seqno,
                largest_seqno: out.largest_seqno,
                has_range_deletions: props.num_range_deletions > 0,
            });
        }
        Ok(files)
    }
}
