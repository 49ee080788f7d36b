//! User iterators, shaped as the `rocksdb` crate's: a cursor
//! ([`DBRawIterator`]) and a Rust iterator ([`DBIterator`]).

use std::marker::PhantomData;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::util::random::{next_random, thread_seed};

use super::db_iter::DBIter;
use super::inner::{DbInner, SuperVersion};
use super::options::ReadOptions;
use super::DB;

/// A cursor over the database at one sequence number, as
/// `rocksdb::DBRawIterator`. Holds the memtables and files it reads.
///
/// Check [`status`](Self::status) when it stops being valid: an error ends
/// the iteration like the last key does.
///
/// ```
/// use strata_kv::{Options, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// # let mut opts = Options::default();
/// # opts.create_if_missing(true);
/// let db = DB::open(&opts, &dir)?;
/// for k in ["apple", "banana", "cherry"] {
///     db.put(k, "fruit")?;
/// }
/// let mut it = db.raw_iterator();
/// it.seek(b"b"); // the first key at or after "b"
/// assert_eq!(it.key(), Some(&b"banana"[..]));
/// it.next();
/// assert_eq!(it.key(), Some(&b"cherry"[..]));
/// it.seek_for_prev(b"b"); // the last key at or before "b"
/// assert_eq!(it.key(), Some(&b"apple"[..]));
/// it.prev();
/// assert!(!it.valid());
/// it.status()?;
/// drop(it);
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
pub struct DBRawIterator<'a> {
    iter: DBIter,
    /// `ReadOptions::set_verify_checksums`, applied around every step.
    verify_checksums: bool,
    /// Positionings and steps not yet added to the database's counter.
    steps: u64,
    /// When the next read sample is due; `None` with read-triggered
    /// compactions off.
    sampling: Option<ReadSampling>,
    // Declared after `iter` so it drops last, when it may hold the last
    // reference to its version.
    version: VersionRef,
    _db: PhantomData<&'a DB>,
}

/// A reader's reference to a version, released through
/// [`DbInner::release_version`] so that the last reader of an old version
/// deletes the files it kept alive.
struct VersionRef {
    db: Arc<DbInner>,
    sv: Option<SuperVersion>,
}

impl Drop for VersionRef {
    fn drop(&mut self) {
        if let Some(sv) = self.sv.take() {
            self.db.release_super_version(sv);
        }
    }
}

/// Steps an iterator counts before adding them to the database's counter.
const STEPS_PER_ADD: u64 = 1024;

/// Mean bytes (keys and values returned) between two read samples of an
/// iterator: LevelDB's `kReadBytesPeriod` and Pebble's default.
const READ_SAMPLE_PERIOD_BYTES: u32 = 1 << 20;

/// Moves per measurement of the bytes returned: every eighth entry's size
/// stands for the eight moves up to it. Measuring every entry costs two
/// calls through the merged iterator's levels per move (3-4% of a cached
/// `readseq` step); over a sampling period's thousands of entries the
/// estimate is as good.
const MOVES_PER_MEASURE: u8 = 8;

/// An iterator's read sampling (LevelDB's and Pebble's): after every
/// `READ_SAMPLE_PERIOD_BYTES` or so of keys and values returned (each gap
/// drawn at random from 0 to twice that, so that the samples do not fall
/// into step with the data), the key returned is a sample
/// ([`DbInner::sample_read`]). A scan over files that overlap thereby
/// charges the newest of them toward a read-triggered compaction, as
/// gets that search a file in vain do.
struct ReadSampling {
    /// Moves until the next measurement.
    moves_left: u8,
    bytes_left: u64,
    rng: u64,
}

impl ReadSampling {
    fn new() -> ReadSampling {
        let mut rng = thread_seed();
        let bytes_left = Self::gap(&mut rng);
        ReadSampling {
            moves_left: MOVES_PER_MEASURE,
            bytes_left,
            rng,
        }
    }

    fn gap(rng: &mut u64) -> u64 {
        u64::from(next_random(rng) % (2 * READ_SAMPLE_PERIOD_BYTES))
    }
}

impl Drop for DBRawIterator<'_> {
    fn drop(&mut self) {
        self.add_steps();
    }
}

impl std::fmt::Debug for DBRawIterator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DBRawIterator")
            .field("valid", &self.iter.valid())
            .finish()
    }
}

impl<'a> DBRawIterator<'a> {
    pub(crate) fn new(db: &Arc<DbInner>, ro: &ReadOptions) -> DBRawIterator<'a> {
        Self::new_or_failed(db, ro, db.check_live().err())
    }

    /// An iterator over nothing whose `status` is `e`.
    pub(crate) fn failed(db: &Arc<DbInner>, e: Error) -> DBRawIterator<'a> {
        Self::new_or_failed(db, &ReadOptions::default(), Some(e))
    }

    fn new_or_failed(
        db: &Arc<DbInner>,
        ro: &ReadOptions,
        error: Option<Error>,
    ) -> DBRawIterator<'a> {
        let sv = db.super_version();
        let seq = ro.snapshot.unwrap_or(sv.sequence);
        let mut range_dels = crate::range_del::RangeDelView::default();
        let opened = match error {
            Some(e) => Err(e),
            None => db.range_del_view(&sv).and_then(|view| {
                range_dels = view;
                db.internal_iter(&sv, seq, ro.cache_fill(), &ro.block_property_filters.0)
            }),
        };
        let inner: Box<dyn InternalIterator> = match opened {
            Ok(it) => Box::new(it),
            Err(e) => Box::new(ErrorIterator(e)),
        };
        let iter = DBIter::new(
            inner,
            db.user_cmp.clone(),
            seq,
            ro.lower_bound.clone(),
            ro.upper_bound.clone(),
        )
        .with_prefix_extractor(db.opts.prefix_extractor.clone())
        .with_merge_operator(db.opts.merge_operator.clone())
        .with_range_deletions(range_dels)
        .with_prefix_same_as_start(ro.prefix_same_as_start && !ro.total_order_seek);
        let sampling = db.opts.read_triggered_compactions.then(ReadSampling::new);
        DBRawIterator {
            iter,
            verify_checksums: ro.verify_checksums,
            steps: 0,
            sampling,
            version: VersionRef {
                db: db.clone(),
                sv: Some(sv),
            },
            _db: PhantomData,
        }
    }

    /// Counts one positioning or step (`strata.num-iterator-steps`).
    #[inline]
    fn step(&mut self) {
        self.steps += 1;
        if self.steps >= STEPS_PER_ADD {
            self.add_steps();
        }
    }

    fn add_steps(&mut self) {
        if self.steps > 0 {
            self.version.db.iterator_steps.add(self.steps);
            self.steps = 0;
        }
    }

    /// Counts a move toward the iterator's next read sample: every
    /// [`MOVES_PER_MEASURE`] moves, the entry it is at stands for them
    /// all, and the sample is taken when it is due.
    #[inline]
    fn sample(&mut self) {
        let Some(sampling) = &mut self.sampling else {
            return;
        };
        sampling.moves_left -= 1;
        if sampling.moves_left > 0 {
            return;
        }
        sampling.moves_left = MOVES_PER_MEASURE;
        if !self.iter.valid() {
            return;
        }
        let entry = self.iter.key().len() + self.iter.value().len();
        let bytes = u64::from(MOVES_PER_MEASURE) * entry as u64;
        match sampling.bytes_left.checked_sub(bytes) {
            Some(left) => sampling.bytes_left = left,
            None => self.take_samples(bytes),
        }
    }

    /// The samples due over the `bytes` just counted (one per gap they
    /// cross, all of the current key).
    #[cold]
    #[inline(never)]
    fn take_samples(&mut self, bytes: u64) {
        let (Some(sampling), Some(sv)) = (&mut self.sampling, &self.version.sv) else {
            return;
        };
        let mut samples = 0;
        while sampling.bytes_left < bytes {
            sampling.bytes_left += ReadSampling::gap(&mut sampling.rng);
            samples += 1;
        }
        sampling.bytes_left -= bytes;
        self.version.db.sample_read(sv, self.iter.key(), samples);
    }

    /// True while positioned at an entry.
    pub fn valid(&self) -> bool {
        self.iter.valid()
    }
    /// Positions at the first key.
    pub fn seek_to_first(&mut self) {
        self.step();
        let _verify = crate::sst::ChecksumMode::for_read(self.verify_checksums);
        self.iter.seek_to_first();
        self.sample();
    }
    /// Positions at the last key.
    pub fn seek_to_last(&mut self) {
        self.step();
        let _verify = crate::sst::ChecksumMode::for_read(self.verify_checksums);
        self.iter.seek_to_last();
        self.sample();
    }
    /// Positions at the first key >= `key`.
    pub fn seek<K: AsRef<[u8]>>(&mut self, key: K) {
        self.step();
        let _verify = crate::sst::ChecksumMode::for_read(self.verify_checksums);
        self.iter.seek(key.as_ref());
        self.sample();
    }
    /// Positions at the last key <= `key`.
    pub fn seek_for_prev<K: AsRef<[u8]>>(&mut self, key: K) {
        self.step();
        let _verify = crate::sst::ChecksumMode::for_read(self.verify_checksums);
        self.iter.seek_for_prev(key.as_ref());
        self.sample();
    }
    /// Moves to the next key.
    pub fn next(&mut self) {
        self.step();
        let _verify = crate::sst::ChecksumMode::for_read(self.verify_checksums);
        if self.iter.valid() {
            self.iter.next();
            self.sample();
        }
    }
    /// Moves to the previous key.
    pub fn prev(&mut self) {
        self.step();
        let _verify = crate::sst::ChecksumMode::for_read(self.verify_checksums);
        if self.iter.valid() {
            self.iter.prev();
            self.sample();
        }
    }
    /// Moves to the first entry (in key order) of the next distinct
    /// prefix, as the options' prefix extractor defines prefixes: with
    /// keys made of a row and a descending version suffix, the newest
    /// visible version of the next row. Honours the snapshot, deletions and
    /// bounds; invalid past the end. Without a prefix extractor the
    /// iterator becomes invalid and [`DBRawIterator::status`] is
    /// `InvalidArgument`. Keys of one prefix must be adjacent in key order
    /// (see [`SliceTransform`](crate::SliceTransform)).
    ///
    /// ```
    /// use strata_kv::{Options, SliceTransform, DB};
    ///
    /// # let dir = std::env::temp_dir().join(format!("strata-doc-np-{}", std::process::id()));
    /// let mut opts = Options::default();
    /// opts.create_if_missing(true);
    /// opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(4));
    /// let db = DB::open(&opts, &dir)?;
    /// // Row "row1" in three versions (descending: the newest sorts first).
    /// for (key, value) in [("row1\x01", "new"), ("row1\x02", "mid"), ("row1\x03", "old"), ("row2\x07", "only")] {
    ///     db.put(key, value)?;
    /// }
    /// let mut it = db.raw_iterator();
    /// it.seek_to_first();
    /// let mut newest = Vec::new();
    /// while it.valid() {
    ///     newest.push(it.value().unwrap().to_vec());
    ///     it.next_prefix();
    /// }
    /// it.status()?;
    /// assert_eq!(newest, [b"new".to_vec(), b"only".to_vec()]);
    /// # drop(it); drop(db); DB::destroy(&Options::default(), &dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn next_prefix(&mut self) {
        self.step();
        let _verify = crate::sst::ChecksumMode::for_read(self.verify_checksums);
        if self.iter.valid() {
            self.iter.next_prefix();
            self.sample();
        }
    }
    /// Moves to the first entry (in key order) of the previous distinct
    /// prefix: with a descending version suffix, the newest visible version
    /// of the previous row. The rules of [`DBRawIterator::next_prefix`]
    /// apply.
    pub fn prev_prefix(&mut self) {
        self.step();
        let _verify = crate::sst::ChecksumMode::for_read(self.verify_checksums);
        if self.iter.valid() {
            self.iter.prev_prefix();
            self.sample();
        }
    }
    /// The current key.
    pub fn key(&self) -> Option<&[u8]> {
        self.iter.valid().then(|| self.iter.key())
    }
    /// The current value.
    pub fn value(&self) -> Option<&[u8]> {
        self.iter.valid().then(|| self.iter.value())
    }
    /// The current key and value.
    pub fn item(&self) -> Option<(&[u8], &[u8])> {
        self.iter
            .valid()
            .then(|| (self.iter.key(), self.iter.value()))
    }
    /// The first error met, if any.
    pub fn status(&self) -> Result<()> {
        self.iter.status()
    }
}

/// Iteration direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Increasing keys.
    Forward,
    /// Decreasing keys.
    Reverse,
}

/// Where a [`DBIterator`] starts.
#[derive(Debug, Clone, Copy)]
pub enum IteratorMode<'a> {
    /// The first key, forward.
    Start,
    /// The last key, backward.
    End,
    /// From a key, in a direction (Reverse starts at the last key <= it).
    From(&'a [u8], Direction),
}

/// A Rust iterator of `(key, value)` pairs, as `rocksdb::DBIterator`.
/// Yields one `Err` and then ends if a read fails.
///
/// ```
/// use strata_kv::{Direction, IteratorMode, Options, DB};
/// # let dir = std::env::temp_dir().join(format!("strata-doc-{}-{}", std::process::id(), line!()));
/// # let mut opts = Options::default();
/// # opts.create_if_missing(true);
/// let db = DB::open(&opts, &dir)?;
/// for (k, v) in [("k1", "a"), ("k2", "b"), ("k3", "c")] {
///     db.put(k, v)?;
/// }
/// let values: Vec<Box<[u8]>> = db
///     .iterator(IteratorMode::From(b"k2", Direction::Reverse))
///     .map(|r| r.map(|(_, v)| v))
///     .collect::<Result<_, _>>()?;
/// assert_eq!(values, vec![b"b".to_vec().into_boxed_slice(), b"a".to_vec().into_boxed_slice()]);
/// # drop(db);
/// # DB::destroy(&Options::default(), &dir)?;
/// # Ok::<(), strata_kv::Error>(())
/// ```
pub struct DBIterator<'a> {
    raw: DBRawIterator<'a>,
    direction: Direction,
    done: bool,
}

impl std::fmt::Debug for DBIterator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DBIterator")
            .field("direction", &self.direction)
            .finish()
    }
}

impl<'a> DBIterator<'a> {
    pub(crate) fn new(raw: DBRawIterator<'a>, mode: IteratorMode<'_>) -> DBIterator<'a> {
        let mut it = DBIterator {
            raw,
            direction: Direction::Forward,
            done: false,
        };
        it.set_mode(mode);
        it
    }

    /// Repositions the iterator.
    pub fn set_mode(&mut self, mode: IteratorMode<'_>) {
        self.done = false;
        match mode {
            IteratorMode::Start => {
                self.raw.seek_to_first();
                self.direction = Direction::Forward;
            }
            IteratorMode::End => {
                self.raw.seek_to_last();
                self.direction = Direction::Reverse;
            }
            IteratorMode::From(key, Direction::Forward) => {
                self.raw.seek(key);
                self.direction = Direction::Forward;
            }
            IteratorMode::From(key, Direction::Reverse) => {
                self.raw.seek_for_prev(key);
                self.direction = Direction::Reverse;
            }
        }
    }
}

impl Iterator for DBIterator<'_> {
    type Item = Result<(Box<[u8]>, Box<[u8]>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let Some((k, v)) = self.raw.item() else {
            self.done = true;
            return self.raw.status().err().map(Err);
        };
        let item = (Box::from(k), Box::from(v));
        match self.direction {
            Direction::Forward => self.raw.next(),
            Direction::Reverse => self.raw.prev(),
        }
        Some(Ok(item))
    }
}

/// An iterator with nothing in it but an error.
struct ErrorIterator(Error);

impl InternalIterator for ErrorIterator {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _: &[u8]) {}
    fn seek_for_prev(&mut self, _: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        Err(self.0.clone())
    }
}
