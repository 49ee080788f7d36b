//! Batched point lookups in one table: the table's share of a MultiGet.
//!
//! The keys come sorted, so the work is done in passes over all of them
//! rather than key after key, and what ascending keys share is done once:
//!
//! 1. filter: every key's filter line is prefetched, then every key tested,
//!    so the cache misses of the probes overlap instead of following one
//!    another;
//! 2. index: a key at or before the separator of the previous key's block
//!    lands in that block (one comparison instead of a search);
//! 3. blocks: each distinct data block is fetched once (from the block cache
//!    or the file), with the lines each of its keys reads first prefetched
//!    on a cache hit, all blocks before any seek, the cache's lookups of up
//!    to 16 blocks made together so that their misses overlap
//!    ([`LruCache::get_many_with`](crate::cache::LruCache::get_many_with));
//!    with direct reads, the blocks the cache lacks are first read together
//!    (io_uring), back-to-back ones as one read;
//! 4. seeks: each key seeks in its block, in stages (every block's restart
//!    keys asked for, then every key's restart search, which asks for the
//!    interval it will scan, then every scan); values are slices of the
//!    block (no copy).
//!
//! A failed block read fails only the keys of that block.

use smallvec::SmallVec;

use super::{read_ahead, TableReader, READ_AHEAD_INLINE};
use crate::error::{Error, Result};
use crate::key::extract_user_key;
use crate::sst::block::{Block, BlockIter};
use crate::sst::format::BlockHandle;
use crate::sst::index_array::IndexArray;
use crate::sst::TableEntry;

/// Restart keys of each block asked for before the restart searches: all
/// of them in a 4 KiB block of entries over 100 bytes (16 per interval).
const RESTART_KEYS_PREFETCHED: u32 = 8;

/// One key of a batched lookup: its lookup key (user key, the read's
/// sequence number, kind `FOR_SEEK`) and its user key's
/// [`filter_hash`](crate::sst::filter::filter_hash).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableProbe<'a> {
    pub(crate) lookup: &'a [u8],
    pub(crate) hash: u64,
}

/// Data blocks whose cache lookups are made together
/// ([`TableReader::read_data_blocks_with`]).
const BLOCKS_LOOKED_UP_TOGETHER: usize = crate::cache::GET_MANY_MAX;

/// A run of surviving probes that land in one data block.
struct BlockRun {
    /// Index of the data block in the table's index.
    block_index: usize,
    /// Range of the run in the survivors list.
    start: usize,
    end: usize,
}

/// The working vectors of [`TableReader::multi_get`], kept by the caller
/// across the tables of a batch so that each table's share allocates
/// nothing once they have grown.
#[derive(Default)]
pub(crate) struct MultiGetScratch {
    survivors: Vec<Survivor>,
    runs: Vec<BlockRun>,
    /// Each run's block (pass 3).
    blocks: Vec<Result<Block>>,
    iters: Vec<Result<BlockIter>>,
    /// The buffer of the blocks read at once before pass 3 (direct reads).
    ahead_buf: Vec<u8>,
}

impl MultiGetScratch {
    /// The probes (indices into the last [`TableReader::multi_get`]'s
    /// probes) that the table's filter let through to a data block: those
    /// it searched, found or not. None after a packed table's lookups
    /// ([`forget_searched`](Self::forget_searched)).
    pub(crate) fn searched(&self) -> impl Iterator<Item = usize> + '_ {
        self.survivors.iter().map(|s| s.probe)
    }

    /// Clears what [`searched`](Self::searched) reports, for lookups that
    /// searched no block.
    pub(crate) fn forget_searched(&mut self) {
        self.survivors.clear();
    }
}

/// A probe that the filter lets through.
#[derive(Clone, Copy)]
struct Survivor {
    /// Index in the probes.
    probe: usize,
    /// Where its staged seek starts: the restart interval its restart
    /// search found (`None`: a block with a hash index, not searched, or
    /// a search that met corruption).
    start: Option<u32>,
}

impl TableReader {
    /// Looks up every probe of `probes`, which ascend by lookup key under
    /// the table's internal-key order, and calls `answer(i, result)` for
    /// each probe `i` this table decides: `Ok(entry)` for the newest version
    /// at or below the lookup's sequence number, `Err` when reading the
    /// block that may hold it failed. Probes the table does not hold get no
    /// call. Each answer equals what [`TableReader::get_opt`] gives.
    pub(crate) fn multi_get(
        &self,
        probes: &[TableProbe<'_>],
        fill_cache: bool,
        scratch: &mut MultiGetScratch,
        answer: &mut dyn FnMut(usize, Result<TableEntry>),
    ) {
        #[cfg(debug_assertions)]
        for w in probes.windows(2) {
            debug_assert!(
                self.icmp.compare(w[0].lookup, w[1].lookup).is_le(),
                "{}: multi_get probes out of order",
                self.name
            );
        }
        // Nothing searched until pass 2 says so (`MultiGetScratch::searched`).
        scratch.survivors.clear();
        // The index and filter once for the batch (from the cache, maybe).
        // Failing that, every probe fails with the error.
        let fail_all = |e: Error, answer: &mut dyn FnMut(usize, Result<TableEntry>)| {
            (0..probes.len()).for_each(|i| answer(i, Err(e.clone())))
        };
        let (filter, index) = match (self.filter(), self.index()) {
            (Ok(f), Ok(i)) => (f, i),
            (Err(e), _) | (_, Err(e)) => return fail_all(e, answer),
        };
        let index = match index.array() {
            Ok(array) => array,
            Err(e) => return fail_all(e, answer),
        };
        // Pass 1: the filter, every line asked for before any is tested.
        if let Some(filter) = &filter {
            for p in probes {
                if let Some(h) = self.probe_hash(extract_user_key(p.lookup), p.hash) {
                    filter.prefetch(h);
                }
            }
        }
        // Pass 2: filter tests and the block of each survivor. `survivors`
        // are in probe order, so their blocks ascend too.
        let num_blocks = index.len();
        let MultiGetScratch {
            survivors,
            runs,
            blocks,
            iters,
            ahead_buf,
        } = scratch;
        survivors.clear();
        runs.clear();
        for (i, p) in probes.iter().enumerate() {
            let probe = self.probe_hash(extract_user_key(p.lookup), p.hash);
            if let (Some(f), Some(h)) = (&filter, probe) {
                if !f.may_contain_hash(h) {
                    continue;
                }
            }
            let block_index = match runs.last() {
                Some(run) if index.at_or_before(run.block_index, p.lookup) => run.block_index,
                _ => index.lower_bound(p.lookup),
            };
            if block_index >= num_blocks {
                // Past the last separator: in no block of this table, and
                // so is every later probe.
                break;
            }
            match runs.last_mut() {
                Some(run) if run.block_index == block_index => run.end += 1,
                _ => runs.push(BlockRun {
                    block_index,
                    start: survivors.len(),
                    end: survivors.len() + 1,
                }),
            }
            survivors.push(Survivor {
                probe: i,
                start: None,
            });
        }
        // With direct reads, the blocks the cache lacks are read at once
        // first (adjacent ones as one read: `read_ahead`), so that pass 3
        // finds them cached.
        if fill_cache && self.reads_blocks_directly() {
            let lacking: SmallVec<[(&TableReader, BlockHandle); READ_AHEAD_INLINE]> = runs
                .iter()
                .map(|run| index.handle(run.block_index))
                .filter(|&h| self.cache_lacks(h))
                .map(|h| (self, h))
                .collect();
            read_ahead(&lacking, ahead_buf);
        }
        // Pass 3: each block once, all of them before any seek, so that the
        // lines the seeks read first are on their way for every block; the
        // cache's lookups of a group of blocks together, so that their own
        // cache misses overlap.
        blocks.clear();
        for group in runs.chunks(BLOCKS_LOOKED_UP_TOGETHER) {
            let handles: SmallVec<[BlockHandle; BLOCKS_LOOKED_UP_TOGETHER]> = group
                .iter()
                .map(|run| index.handle(run.block_index))
                .collect();
            let on_hit = |i: usize, b: &Block| {
                let run: &BlockRun = &group[i];
                for s in &survivors[run.start..run.end] {
                    b.prefetch_for_get(probes[s.probe].hash);
                }
            };
            self.read_data_blocks_with(&handles, fill_cache, on_hit, blocks);
        }
        // Pass 4: the seeks, each stage for every block or key before the
        // next (`BlockIter`'s staged seek): restart keys, restart searches
        // (which ask for the intervals), then the scans. Blocks with a hash
        // index seek through it instead.
        iters.clear();
        iters.extend(
            blocks
                .drain(..)
                .map(|block| block.map(|b| self.data_block_iter(b))),
        );
        for it in iters.iter().flatten() {
            if !it.has_hash_index() {
                it.prefetch_restart_keys(RESTART_KEYS_PREFETCHED);
            }
        }
        for (run, it) in runs.iter().zip(iters.iter_mut()) {
            let Ok(it) = it else { continue };
            if it.has_hash_index() {
                continue;
            }
            for s in &mut survivors[run.start..run.end] {
                s.start = it.seek_start(probes[s.probe].lookup);
            }
        }
        for (run, it) in runs.iter().zip(iters.drain(..)) {
            let keys = &survivors[run.start..run.end];
            match it {
                Err(e) => keys.iter().for_each(|s| answer(s.probe, Err(e.clone()))),
                Ok(it) => {
                    let run_at = (index, run.block_index);
                    self.seek_run(it, run_at, keys, probes, fill_cache, answer)
                }
            }
        }
    }

    /// The seeks of the probes `keys` that land in data block `block_index`
    /// of `index`, which `it` iterates.
    fn seek_run(
        &self,
        mut it: BlockIter,
        (index, block_index): (&IndexArray, usize),
        keys: &[Survivor],
        probes: &[TableProbe<'_>],
        fill_cache: bool,
        answer: &mut dyn FnMut(usize, Result<TableEntry>),
    ) {
        let offset = index.handle(block_index).offset;
        for &Survivor { probe: i, start } in keys {
            let TableProbe { lookup, hash } = probes[i];
            match start {
                // Started by the staged seek.
                Some(start) => it.seek_from(lookup, start),
                // A hash-indexed block, or a corrupt one (whose status
                // `entry_at` reports).
                None => it.seek_for_get(lookup, hash),
            }
            let decided = match self.entry_at(&it, lookup, offset) {
                Ok(Some(found)) => Ok(found),
                // Every key of the block is below the lookup: a separator
                // that is not tight, so the answer may be in a later block.
                Ok(None) => {
                    self.get_from_block(index, block_index + 1, lookup, hash, fill_cache, None)
                }
                Err(e) => Err(e),
            };
            match decided {
                Ok(Some(entry)) => answer(i, Ok(entry)),
                Ok(None) => {}
                Err(e) => answer(i, Err(e)),
            }
        }
    }
}
