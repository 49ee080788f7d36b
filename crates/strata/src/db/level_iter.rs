//! Iterates over the files of one sorted level (1 or deeper) as one
//! sequence, opening each table only when the iteration reaches it.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::Result;
use crate::iter::{InternalIterator, PrefixRun, SeekReads};
use crate::key::Comparator;
use crate::key::InternalKeyComparator;
use crate::sst::{BlockPropertyFilter, TableIter};
use crate::version::Version;

use super::inner::DbInner;

/// A concatenating iterator over `version.files(level)`.
pub(crate) struct LevelIterator {
    db: Arc<DbInner>,
    version: Arc<Version>,
    level: usize,
    icmp: InternalKeyComparator,
    fill_cache: bool,
    /// Index of the open file; `files.len()` when none.
    index: usize,
    table: Option<TableIter>,
    status: Result<()>,
    /// The read's block property filters, applied to every table opened.
    filters: Vec<Arc<dyn BlockPropertyFilter>>,
}

impl LevelIterator {
    pub(crate) fn new(
        db: Arc<DbInner>,
        version: Arc<Version>,
        level: usize,
        fill_cache: bool,
    ) -> LevelIterator {
        let icmp = db.icmp.clone();
        let n = version.num_files(level);
        LevelIterator {
            db,
            version,
            level,
            icmp,
            fill_cache,
            index: n,
            table: None,
            status: Ok(()),
            filters: Vec::new(),
        }
    }

    /// Applies a read's block property filters to every table it opens.
    pub(crate) fn with_filters(mut self, filters: &[Arc<dyn BlockPropertyFilter>]) -> Self {
        self.filters = filters.to_vec();
        self
    }

    fn num_files(&self) -> usize {
        self.version.num_files(self.level)
    }

    /// Opens file `index` (or closes when out of range).
    fn open(&mut self, index: usize) {
        if index >= self.num_files() {
            self.index = self.num_files();
            self.table = None;
            return;
        }
        if self.table.is_some() && self.index == index {
            return;
        }
        let file = &self.version.files(self.level)[index];
        let opened = (self.db.table_cache)
            .get_for(file, self.level)
            .map(|t| t.iter_opt(self.fill_cache).with_filters(&self.filters));
        match opened {
            Ok(t) => {
                self.table = Some(t);
                self.index = index;
            }
            Err(e) => {
                if self.status.is_ok() {
                    self.status = Err(e);
                }
                self.table = None;
                self.index = self.num_files();
            }
        }
    }

    fn table_failed(&mut self) -> bool {
        if let Some(t) = &self.table {
            if let Err(e) = t.status() {
                if self.status.is_ok() {
                    self.status = Err(e);
                }
                self.table = None;
                return true;
            }
        }
        self.status.is_err()
    }

    fn skip_forward(&mut self) {
        while !self.table.as_ref().is_some_and(|t| t.valid()) {
            if self.table_failed() || self.index + 1 >= self.num_files() {
                self.table = None;
                return;
            }
            self.open(self.index + 1);
            if let Some(t) = &mut self.table {
                t.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while !self.table.as_ref().is_some_and(|t| t.valid()) {
            if self.table_failed() || self.index == 0 || self.index >= self.num_files() {
                self.table = None;
                return;
            }
            self.open(self.index - 1);
            if let Some(t) = &mut self.table {
                t.seek_to_last();
            }
        }
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.status.is_ok() && self.table.as_ref().is_some_and(|t| t.valid())
    }

    fn seek_to_first(&mut self) {
        self.open(0);
        if let Some(t) = &mut self.table {
            t.seek_to_first();
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        let n = self.num_files();
        if n == 0 {
            self.table = None;
            return;
        }
        self.open(n - 1);
        if let Some(t) = &mut self.table {
            t.seek_to_last();
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        let i = self.version.find_file(&self.icmp, self.level, target);
        self.open(i);
        if let Some(t) = &mut self.table {
            t.seek(target);
        }
        self.skip_forward();
    }

    fn plan_seek(&mut self, target: &[u8], reads: &mut SeekReads) {
        let i = self.version.find_file(&self.icmp, self.level, target);
        self.open(i);
        if let Some(t) = &mut self.table {
            t.plan_seek(target, reads);
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        let i = self.version.find_file(&self.icmp, self.level, target);
        let n = self.num_files();
        // The file that may hold the last key <= target is file i, unless
        // its smallest key is already past the target.
        let i = if i < n
            && self
                .icmp
                .compare(self.version.files(self.level)[i].smallest.encoded(), target)
                != Ordering::Greater
        {
            i
        } else if i == 0 {
            self.table = None;
            return;
        } else {
            i - 1
        };
        self.open(i);
        if let Some(t) = &mut self.table {
            t.seek_for_prev(target);
        }
        self.skip_backward();
    }

    fn next(&mut self) {
        if let Some(t) = &mut self.table {
            t.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        if let Some(t) = &mut self.table {
            t.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.table
            .as_ref()
            .expect("key() on an invalid LevelIterator")
            .key()
    }

    fn value(&self) -> &[u8] {
        self.table
            .as_ref()
            .expect("value() on an invalid LevelIterator")
            .value()
    }

    fn plan_seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>, reads: &mut SeekReads) {
        // The first file only: `seek_within` goes on to the next only when
        // this one holds nothing of the run past the target.
        let i = self.version.find_file(&self.icmp, self.level, target);
        self.open(i);
        if let Some(t) = &mut self.table {
            t.plan_seek_within(target, run, reads);
        }
    }

    fn seek_within(&mut self, target: &[u8], run: &PrefixRun<'_>) {
        let mut i = self.version.find_file(&self.icmp, self.level, target);
        // Bounded by the level: each turn opens a later file.
        loop {
            self.open(i);
            let Some(t) = &mut self.table else { return };
            t.seek_within(target, run);
            if t.valid() || self.table_failed() {
                return;
            }
            // Nothing of the run at or after the target in this file: the
            // next file matters only if it starts inside the run.
            let files = self.version.files(self.level);
            if i + 1 >= files.len() || !run.covers(files[i + 1].smallest.encoded()) {
                self.table = None;
                return;
            }
            i += 1;
        }
    }

    fn skip_run_forward(&mut self, run: &PrefixRun<'_>) {
        // Bounded by the level: each turn opens a later file.
        loop {
            let Some(t) = &mut self.table else { return };
            t.skip_run_forward(run);
            if t.valid() || self.table_failed() {
                return;
            }
            // When the run is an interval, a file whose largest key it
            // covers is covered whole and is not opened.
            let files = self.version.files(self.level);
            let mut next = self.index + 1;
            while run.is_interval()
                && next < files.len()
                && run.covers(files[next].largest.encoded())
            {
                next += 1;
            }
            if next >= files.len() {
                self.table = None;
                return;
            }
            self.open(next);
            if let Some(t) = &mut self.table {
                t.seek_to_first();
            }
        }
    }

    fn prev_run_first(&mut self, run: &PrefixRun<'_>) -> bool {
        // Within the current file only (a run before its first entry may
        // go on in the file before, which the table cannot see).
        match &mut self.table {
            Some(t) => t.prev_run_first(run),
            None => false,
        }
    }

    fn skip_run_backward(&mut self, run: &PrefixRun<'_>) {
        // Bounded by the level: each turn opens an earlier file.
        loop {
            let Some(t) = &mut self.table else { return };
            t.skip_run_backward(run);
            if t.valid() || self.table_failed() {
                return;
            }
            let files = self.version.files(self.level);
            let mut prev = self.index;
            while prev > 0 && run.is_interval() && run.covers(files[prev - 1].smallest.encoded()) {
                prev -= 1;
            }
            if prev == 0 || self.index >= files.len() {
                self.table = None;
                return;
            }
            self.open(prev - 1);
            if let Some(t) = &mut self.table {
                t.seek_to_last();
            }
        }
    }

    fn status(&self) -> Result<()> {
        self.status.clone()?;
        match &self.table {
            Some(t) => t.status(),
            None => Ok(()),
        }
    }
}
