//! Applies version edits to a base version to build the next one.
//!
//! Within one edit, deletions apply before additions, so an edit may move a
//! file (delete it from one level, add it to another). Edits that do not
//! fit the state they apply to are corruption, not something to repair:
//! deleting a file the level does not hold, adding a file number already
//! present, a file whose smallest key is above its largest, or a file in
//! level 1 or deeper that overlaps a file already there.
//!
//! Cost: O(files) to start from the base, then per added or deleted file a
//! binary search and a shift of the level's vector of pointers.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use super::{FileMetaData, NewFile, Version, VersionEdit, NUM_LEVELS};
use crate::error::{Error, Result};
use crate::key::{Comparator, InternalKeyComparator};

/// Accumulates edits on top of a base version. After [`apply`](Self::apply)
/// fails the builder is in an unspecified state and must be dropped.
#[derive(Debug)]
pub struct VersionBuilder {
    icmp: InternalKeyComparator,
    /// The files of each level, kept in the version's level order.
    levels: [Vec<Arc<FileMetaData>>; NUM_LEVELS],
    /// The level of every file in `levels`, and the file.
    level_of: HashMap<u64, (usize, Arc<FileMetaData>)>,
}

impl VersionBuilder {
    /// A builder starting from the files of `base`.
    pub fn new(icmp: InternalKeyComparator, base: &Version) -> VersionBuilder {
        let levels: [Vec<Arc<FileMetaData>>; NUM_LEVELS] =
            std::array::from_fn(|level| base.files(level).to_vec());
        let mut level_of = HashMap::new();
        for (level, files) in levels.iter().enumerate() {
            for f in files {
                let previous = level_of.insert(f.number, (level, f.clone()));
                assert!(previous.is_none(), "file {} twice in a version", f.number);
            }
        }
        VersionBuilder {
            icmp,
            levels,
            level_of,
        }
    }

    /// Applies `edit`. `file` and `offset` name where the edit came from
    /// (the manifest and record offset) for a `Corruption` error.
    pub fn apply(&mut self, edit: &VersionEdit, file: &str, offset: u64) -> Result<()> {
        let corruption = |what: String| Error::corruption(file, offset, what);
        for &(level, number) in edit.deleted_files() {
            match self.level_of.remove(&number) {
                Some((l, file)) if l == level => self.remove(level, &file),
                _ => {
                    return Err(corruption(format!(
                        "edit deletes file {number} not in level {level}"
                    )))
                }
            }
        }
        for (level, new) in edit.new_files() {
            self.add(*level, new).map_err(corruption)?;
        }
        Ok(())
    }

    /// The version holding the files after every applied edit.
    pub fn build(self) -> Version {
        let mut version = Version::from_levels(self.levels);
        version.set_level0_depth(&**self.icmp.user_comparator());
        debug_assert_eq!(version.check_order(&self.icmp), Ok(()));
        #[cfg(feature = "invariants")]
        if let Err(what) = version.check_consistency(&self.icmp) {
            panic!("version builder produced an inconsistent version: {what}");
        }
        version
    }

    /// Removes `file` from `level`, which holds it.
    fn remove(&mut self, level: usize, file: &FileMetaData) {
        let at = if level == 0 {
            self.levels[0].iter().position(|f| f.number == file.number)
        } else {
            // Disjoint ranges: smallest keys are unique, so a binary search
            // on the file's own smallest key finds it.
            Some(self.position_by_smallest(level, file))
        };
        let removed = at.and_then(|at| {
            let found = self.levels[level].get(at)?.number == file.number;
            found.then(|| self.levels[level].remove(at))
        });
        assert!(
            removed.is_some(),
            "file {} indexed but not in level {level}",
            file.number
        );
    }

    fn add(&mut self, level: usize, new: &NewFile) -> std::result::Result<(), String> {
        let number = new.number;
        if let Some((other, _)) = self.level_of.get(&number) {
            return Err(format!(
                "edit adds file {number} to level {level}, but level {other} already holds it"
            ));
        }
        let key_order = self
            .icmp
            .compare(new.smallest.encoded(), new.largest.encoded());
        if key_order == Ordering::Greater {
            return Err(format!(
                "edit adds file {number} whose smallest key is above its largest"
            ));
        }
        let file = Arc::new(FileMetaData::from(new));
        let at = if level == 0 {
            let key = (new.largest_seqno, number);
            self.levels[0].partition_point(|f| (f.largest_seqno, f.number) > key)
        } else {
            let at = self.position_by_smallest(level, &file);
            if let Some(other) = self.overlapping_neighbour(level, at, &file) {
                return Err(format!(
                    "edit adds file {number} to level {level} overlapping file {other}"
                ));
            }
            at
        };
        self.levels[level].insert(at, file.clone());
        self.level_of.insert(number, (level, file));
        Ok(())
    }

    /// In level 1 or deeper: the index of the first file whose smallest key
    /// is not below `file`'s.
    fn position_by_smallest(&self, level: usize, file: &FileMetaData) -> usize {
        let key = file.smallest.encoded();
        self.levels[level]
            .partition_point(|f| self.icmp.compare(f.smallest.encoded(), key) == Ordering::Less)
    }

    /// The number of a file next to position `at` of `level` whose range
    /// meets `file`'s, if any. The neighbours are the only candidates: the
    /// level is sorted and disjoint.
    fn overlapping_neighbour(&self, level: usize, at: usize, file: &FileMetaData) -> Option<u64> {
        let files = &self.levels[level];
        let before = at.checked_sub(1).and_then(|i| files.get(i));
        if let Some(prev) = before {
            let order = self
                .icmp
                .compare(prev.largest.encoded(), file.smallest.encoded());
            if order != Ordering::Less {
                return Some(prev.number);
            }
        }
        let next = files.get(at)?;
        let order = self
            .icmp
            .compare(file.largest.encoded(), next.smallest.encoded());
        (order != Ordering::Less).then_some(next.number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{BytewiseComparator, InternalKey, ValueKind};

    fn icmp() -> InternalKeyComparator {
        InternalKeyComparator::new(Arc::new(BytewiseComparator))
    }

    fn add(e: &mut VersionEdit, level: usize, number: u64, lo: &str, hi: &str, seq: u64) {
        let smallest = InternalKey::new(lo.as_bytes(), seq, ValueKind::Value);
        let largest = InternalKey::new(hi.as_bytes(), seq, ValueKind::Value);
        e.add_file(level, number, 100 * number, smallest, largest, seq, seq);
    }

    fn numbers(v: &Version, level: usize) -> Vec<u64> {
        v.files(level).iter().map(|f| f.number).collect()
    }

    fn apply(base: &Version, e: &VersionEdit) -> Result<Version> {
        let mut b = VersionBuilder::new(icmp(), base);
        b.apply(e, "MANIFEST-000001", 77)?;
        Ok(b.build())
    }

    #[test]
    fn adds_sorted_and_deletes() {
        let mut e = VersionEdit::new();
        add(&mut e, 1, 10, "m", "p", 5);
        add(&mut e, 1, 11, "a", "c", 6);
        add(&mut e, 1, 12, "x", "z", 7);
        add(&mut e, 0, 13, "a", "z", 8);
        add(&mut e, 0, 14, "b", "y", 9);
        add(&mut e, 0, 15, "c", "d", 3);
        let v = apply(&Version::empty(), &e).unwrap();
        assert_eq!(numbers(&v, 1), [11, 10, 12]);
        assert_eq!(numbers(&v, 0), [14, 13, 15], "newest first");
        assert_eq!(v.level_bytes(1), 3300);
        assert_eq!(v.check_consistency(&icmp()), Ok(()));

        let mut e = VersionEdit::new();
        e.delete_file(1, 10);
        e.delete_file(0, 13);
        add(&mut e, 1, 16, "d", "q", 9); // fits in the gap 10 leaves
        let v2 = apply(&v, &e).unwrap();
        assert_eq!(numbers(&v2, 1), [11, 16, 12]);
        assert_eq!(numbers(&v2, 0), [14, 15]);
        // The base is untouched.
        assert_eq!(numbers(&v, 1), [11, 10, 12]);
        // Unchanged files are shared, not copied.
        assert!(Arc::ptr_eq(&v.files(1)[0], &v2.files(1)[0]));
    }

    #[test]
    fn moves_a_file_within_one_edit() {
        let mut e = VersionEdit::new();
        add(&mut e, 1, 10, "a", "c", 5);
        let v = apply(&Version::empty(), &e).unwrap();
        let mut e = VersionEdit::new();
        e.delete_file(1, 10);
        add(&mut e, 2, 10, "a", "c", 5);
        let v = apply(&v, &e).unwrap();
        assert_eq!((numbers(&v, 1), numbers(&v, 2)), (vec![], vec![10]));
    }

    #[test]
    fn deleting_a_missing_file_is_corruption() {
        let mut e = VersionEdit::new();
        add(&mut e, 1, 10, "a", "c", 5);
        let v = apply(&Version::empty(), &e).unwrap();
        for (level, number) in [(1, 11), (2, 10)] {
            let mut e = VersionEdit::new();
            e.delete_file(level, number);
            let err = apply(&v, &e).unwrap_err();
            assert!(err.is_corruption());
            let expected = format!(
                "Corruption: MANIFEST-000001 at offset 77: edit deletes file {number} not in level {level}"
            );
            assert_eq!(err.to_string(), expected);
        }
    }

    #[test]
    fn overlapping_add_in_sorted_level_is_corruption() {
        let mut e = VersionEdit::new();
        add(&mut e, 1, 10, "d", "f", 5);
        let v = apply(&Version::empty(), &e).unwrap();
        // Internal keys order newer sequence numbers first: d@4 is after d@5.
        let cases = [
            ("a", "d", 4),
            ("f", "g", 6),
            ("e", "e", 6),
            ("a", "z", 6),
            ("d", "f", 6),
        ];
        for (lo, hi, seq) in cases {
            let mut e = VersionEdit::new();
            add(&mut e, 1, 11, lo, hi, seq);
            let err = apply(&v, &e).unwrap_err().to_string();
            assert!(
                err.contains("adds file 11 to level 1 overlapping file 10"),
                "{err}"
            );
            // Level 0 takes overlapping files.
            let mut e = VersionEdit::new();
            add(&mut e, 0, 11, lo, hi, seq);
            apply(&v, &e).unwrap();
        }
        // A user key may span two files when the internal keys do not
        // overlap (as in LevelDB): f@4 is after file 10's largest key f@5,
        // d@6 before its smallest key d@5.
        let mut e = VersionEdit::new();
        add(&mut e, 1, 11, "f", "g", 4);
        add(&mut e, 1, 12, "a", "d", 6);
        assert_eq!(numbers(&apply(&v, &e).unwrap(), 1), [12, 10, 11]);
        // Two new files overlapping each other in one edit.
        let mut e = VersionEdit::new();
        add(&mut e, 2, 11, "a", "c", 4);
        add(&mut e, 2, 12, "b", "d", 4);
        assert!(apply(&v, &e).unwrap_err().is_corruption());
    }

    #[test]
    fn duplicate_number_and_inverted_range_are_corruption() {
        let mut e = VersionEdit::new();
        add(&mut e, 1, 10, "a", "c", 5);
        let v = apply(&Version::empty(), &e).unwrap();
        let mut e = VersionEdit::new();
        add(&mut e, 3, 10, "x", "y", 5);
        let err = apply(&v, &e).unwrap_err().to_string();
        assert!(err.contains("level 1 already holds it"), "{err}");
        let mut e = VersionEdit::new();
        add(&mut e, 0, 11, "y", "x", 5);
        let err = apply(&v, &e).unwrap_err().to_string();
        assert!(err.contains("smallest key is above its largest"), "{err}");
    }
}
