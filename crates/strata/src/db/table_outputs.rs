//! The tables one flush, compaction or recovery writes.
//!
//! An output is created at its first entry and synced when it is cut; at
//! the end one directory sync makes every new name durable and every table
//! is opened through the table cache, so a manifest edit only ever names
//! tables that are durable and readable. On an error the caller discards
//! [`TableOutputs::numbers`] (deleting whatever was written).

use crate::error::Result;
use crate::key::{InternalKey, SequenceNumber};
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
        }
    }

    /// Estimated bytes of the open output; None if no output is open.
    pub(crate) fn current_size(&self) -> Option<u64> {
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
        let out = match &mut self.current {
            Some(out) => out,
            None => {
                let number = (self.next_number)();
                self.numbers.push(number);
                let path = table_file_name(&self.db.dir, number);
                let file = self.db.fs.create(&path)?;
                let mut builder = TableWriter::new(
                    self.db.opts.table_options(),
                    self.db.opts.packed_at(self.level),
                    file,
                    path.display().to_string(),
                )?;
                if let Some(op) = &self.db.opts.merge_operator {
                    builder.set_merge_operator(op.name());
                }
                self.current.insert(Output {
                    number,
                    builder,
                    smallest_seqno: SequenceNumber::MAX,
                    largest_seqno: 0,
                })
            }
        };
        out.smallest_seqno = out.smallest_seqno.min(sequence);
        out.largest_seqno = out.largest_seqno.max(sequence);
        out.builder.add(key, value)
    }

    /// Ends the open output, if any: finished and synced.
    pub(crate) fn cut(&mut self) -> Result<()> {
        let Some(mut out) = self.current.take() else {
            return Ok(());
        };
        let props = out.builder.finish()?;
        out.builder.sync()?;
        self.finished.push((out, props));
        Ok(())
    }

    /// Ends the open output and returns every table, each durable (file
    /// and directory entry) and checked to open.
    pub(crate) fn finish(&mut self) -> Result<Vec<NewFile>> {
        self.cut()?;
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
            });
        }
        Ok(files)
    }
}
