//! Iterates over a packed table in internal-key order: user keys by id,
//! each key's versions newest first. The current key is rebuilt into one
//! buffer (user key + trailer); values are slices of the mapping.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{extract_user_key, TRAILER_BYTES};
use crate::util::coding::decode_fixed64;

use super::PackedTableReader;

/// An iterator over every entry of a packed table.
pub struct PackedTableIterator {
    table: Arc<PackedTableReader>,
    valid: bool,
    /// The current user key's id and its entries `first..end`.
    id: usize,
    first: usize,
    end: usize,
    /// The current entry.
    entry: usize,
    /// The current internal key: user key, then the trailer.
    key: Vec<u8>,
    user_len: usize,
    value: (usize, usize),
    status: Result<()>,
}

impl std::fmt::Debug for PackedTableIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedTableIterator")
            .field("table", self.table.name())
            .field("entry", &self.valid.then_some(self.entry))
            .finish()
    }
}

impl PackedTableIterator {
    pub(super) fn new(table: Arc<PackedTableReader>) -> PackedTableIterator {
        let status = table.ensure_read_sections();
        PackedTableIterator {
            table,
            valid: false,
            id: 0,
            first: 0,
            end: 0,
            entry: 0,
            key: Vec::new(),
            user_len: 0,
            value: (0, 0),
            status,
        }
    }

    fn fail(&mut self, e: crate::Error) {
        self.valid = false;
        if self.status.is_ok() {
            self.status = Err(e);
        }
    }

    /// Makes user key `id` current (no entry yet).
    fn load_key(&mut self, id: usize) -> Result<()> {
        self.key.clear();
        self.table.key_into(id, &mut self.key)?;
        self.user_len = self.key.len();
        (self.first, self.end) = self.table.versions(id)?;
        self.id = id;
        Ok(())
    }

    /// Makes entry `e` (of the current key) current.
    fn load_entry(&mut self, e: usize) -> Result<()> {
        let t = self.table.trailer(e)?;
        self.value = self.table.value_range(e)?;
        self.key.truncate(self.user_len);
        self.key.extend_from_slice(&t.to_le_bytes());
        self.entry = e;
        self.valid = true;
        Ok(())
    }

    /// Runs a positioning step unless the iterator has failed; an error
    /// leaves it invalid with that status.
    fn step(&mut self, f: impl FnOnce(&mut Self) -> Result<bool>) {
        if self.status.is_err() {
            self.valid = false;
            return;
        }
        match f(self) {
            Ok(valid) => self.valid = valid,
            Err(e) => self.fail(e),
        }
    }

    fn first_of(&mut self, id: usize) -> Result<bool> {
        if id >= self.table.num_keys() {
            return Ok(false);
        }
        self.load_key(id)?;
        self.load_entry(self.first)?;
        Ok(true)
    }

    fn last_of(&mut self, id: usize) -> Result<bool> {
        self.load_key(id)?;
        self.load_entry(self.end - 1)?;
        Ok(true)
    }
}

impl InternalIterator for PackedTableIterator {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) {
        self.step(|it| it.first_of(0));
    }

    fn seek_to_last(&mut self) {
        self.step(|it| match it.table.num_keys() {
            0 => Ok(false),
            c => it.last_of(c - 1),
        });
    }

    fn seek(&mut self, target: &[u8]) {
        self.step(|it| {
            let user = extract_user_key(target);
            let id = it.table.lower_bound(user)?;
            if id >= it.table.num_keys() {
                return Ok(false);
            }
            it.load_key(id)?;
            let same = it
                .table
                .user_comparator()
                .compare(&it.key[..it.user_len], user)
                == Ordering::Equal;
            if !same {
                it.load_entry(it.first)?;
                return Ok(true);
            }
            // Newest first: the first version at or below the target's.
            let t =
                decode_fixed64(&target[target.len().saturating_sub(TRAILER_BYTES)..]).unwrap_or(0);
            for e in it.first..it.end {
                if it.table.trailer(e)? <= t {
                    it.load_entry(e)?;
                    return Ok(true);
                }
            }
            it.first_of(id + 1)
        });
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.status.is_err() {
            return;
        }
        if !self.valid {
            self.seek_to_last();
        } else if self.table.internal_comparator().compare(&self.key, target) == Ordering::Greater {
            self.prev();
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid);
        self.step(|it| {
            if it.entry + 1 < it.end {
                it.load_entry(it.entry + 1)?;
                Ok(true)
            } else {
                it.first_of(it.id + 1)
            }
        });
    }

    fn prev(&mut self) {
        debug_assert!(self.valid);
        self.step(|it| {
            if it.entry > it.first {
                it.load_entry(it.entry - 1)?;
                Ok(true)
            } else if it.id > 0 {
                it.last_of(it.id - 1)
            } else {
                Ok(false)
            }
        });
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid);
        &self.key
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid);
        &self.table.values()[self.value.0..self.value.1]
    }

    fn status(&self) -> Result<()> {
        self.status.clone()
    }
}
