//! A bump allocator for memtable nodes.
//!
//! Memory is carved from 4 KiB blocks; a request larger than a quarter block
//! gets a block of its own, so a large value wastes no more than the tail of
//! the current block. Nothing is freed until the arena drops, which is what
//! lets readers hold plain pointers into it without reference counting.
//!
//! Thread safety: allocation takes an internal mutex (uncontended with one
//! writer; with concurrent inserters it is held for a bump of the cursor,
//! a few instructions, so they seldom meet there); the memory-usage
//! counter is an atomic any thread may read. Returned memory is
//! uninitialized and stays valid, and never moves, until the arena drops.

use std::alloc::{self, Layout};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Size of an ordinary block.
const BLOCK_BYTES: usize = 4096;

/// Alignment of every block, and so the largest alignment `allocate` supports.
pub(crate) const ALIGN_MAX: usize = 16;

/// One heap allocation owned by the arena.
struct Block {
    ptr: NonNull<u8>,
    layout: Layout,
}

/// The allocator's mutable state: the blocks and the free tail of the current one.
struct ArenaState {
    blocks: Vec<Block>,
    /// Next free byte of the current block (dangling while `remaining == 0`).
    cursor: NonNull<u8>,
    /// Free bytes after `cursor` in the current block.
    remaining: usize,
}

// SAFETY: `ArenaState` owns its blocks outright (nothing else frees them), and
// `cursor` points into one of them; moving the state to another thread moves
// that ownership with it.
unsafe impl Send for ArenaState {}

/// A bump allocator; see the module docs.
pub(crate) struct Arena {
    state: Mutex<ArenaState>,
    /// Bytes of all blocks plus their bookkeeping.
    memory_usage: AtomicUsize,
}

impl fmt::Debug for Arena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arena")
            .field("memory_usage", &self.memory_usage())
            .finish_non_exhaustive()
    }
}

impl Arena {
    /// An empty arena; the first allocation creates the first block.
    pub(crate) fn new() -> Arena {
        Arena {
            state: Mutex::new(ArenaState {
                blocks: Vec::new(),
                cursor: NonNull::dangling(),
                remaining: 0,
            }),
            memory_usage: AtomicUsize::new(0),
        }
    }

    /// Returns `bytes` uninitialized bytes aligned to `align` (a power of two
    /// up to [`ALIGN_MAX`]), valid until the arena drops.
    pub(crate) fn allocate(&self, bytes: usize, align: usize) -> NonNull<u8> {
        assert!(bytes > 0, "zero-sized arena allocation");
        assert!(align.is_power_of_two() && align <= ALIGN_MAX);
        let mut state = self.state.lock();
        let slop = state.cursor.as_ptr().addr().wrapping_neg() & (align - 1);
        if let Some(needed) = slop.checked_add(bytes).filter(|&n| n <= state.remaining) {
            // SAFETY: `slop + bytes <= remaining`, so both offsets stay inside
            // the current block, whose provenance `cursor` carries.
            let (ptr, next) = unsafe {
                let ptr = state.cursor.add(slop);
                (ptr, state.cursor.add(needed))
            };
            state.cursor = next;
            state.remaining -= needed;
            return ptr;
        }
        self.allocate_fallback(&mut state, bytes)
    }

    /// Serves a request the current block cannot: from a dedicated block if
    /// it is large, else from a fresh block that becomes the current one.
    fn allocate_fallback(&self, state: &mut ArenaState, bytes: usize) -> NonNull<u8> {
        if bytes > BLOCK_BYTES / 4 {
            // Keep the current block: its tail can still serve small requests.
            return self.new_block(state, bytes);
        }
        let block = self.new_block(state, BLOCK_BYTES);
        // SAFETY: `bytes <= BLOCK_BYTES / 4`, so the offset is inside the new
        // block, which is aligned to ALIGN_MAX and so to any `align`.
        state.cursor = unsafe { block.add(bytes) };
        state.remaining = BLOCK_BYTES - bytes;
        block
    }

    /// Allocates and records a block of `bytes` bytes aligned to [`ALIGN_MAX`].
    fn new_block(&self, state: &mut ArenaState, bytes: usize) -> NonNull<u8> {
        let layout = Layout::from_size_align(bytes, ALIGN_MAX).expect("arena block too large");
        // SAFETY: `layout` has a non-zero size (`allocate` rejects zero).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        state.blocks.push(Block { ptr, layout });
        let usage = bytes + std::mem::size_of::<Block>();
        self.memory_usage.fetch_add(usage, Ordering::Relaxed);
        ptr
    }

    /// Bytes held by the arena: block sizes plus bookkeeping. Any thread may
    /// call this while another allocates.
    pub(crate) fn memory_usage(&self) -> usize {
        self.memory_usage.load(Ordering::Relaxed)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for block in self.state.get_mut().blocks.drain(..) {
            // SAFETY: `block.ptr` came from `alloc::alloc(block.layout)` and is
            // freed once, here; with `&mut self` no pointer into it is in use.
            unsafe { alloc::dealloc(block.ptr.as_ptr(), block.layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(ptr: NonNull<u8>, len: usize, byte: u8) {
        // SAFETY: the arena returned `len` writable bytes at `ptr`.
        unsafe { ptr.as_ptr().write_bytes(byte, len) };
    }

    #[test]
    fn allocations_are_aligned_disjoint_and_counted() {
        let arena = Arena::new();
        assert_eq!(arena.memory_usage(), 0);
        let mut seen: Vec<(usize, usize, u8)> = Vec::new();
        let sizes = [1, 7, 8, 3000, 1025, 100_000, 5, 4096, 16, 999];
        for (i, &len) in sizes.iter().cycle().take(200).enumerate() {
            let align = 1 << (i % 5);
            let ptr = arena.allocate(len, align);
            assert_eq!(ptr.as_ptr().addr() % align, 0);
            fill(ptr, len, i as u8);
            seen.push((ptr.as_ptr().addr(), len, i as u8));
        }
        let total: usize = seen.iter().map(|s| s.1).sum();
        assert!(arena.memory_usage() >= total);
        seen.sort_unstable();
        for pair in seen.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "overlap: {pair:?}");
        }
    }

    #[test]
    fn small_requests_share_blocks() {
        let arena = Arena::new();
        arena.allocate(10, 8);
        let after_first = arena.memory_usage();
        for _ in 0..100 {
            arena.allocate(10, 8);
        }
        assert_eq!(arena.memory_usage(), after_first, "all fit in one block");
        arena.allocate(BLOCK_BYTES, 8);
        assert!(arena.memory_usage() >= after_first + BLOCK_BYTES);
    }
}
