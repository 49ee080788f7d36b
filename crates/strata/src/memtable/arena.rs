//! A bump allocator for memtable nodes.
//!
//! Memory is carved from blocks that grow geometrically: the first is
//! 4 KiB, each next one as large as all before it together, up to the
//! arena's block size (a power of two from 4 KiB to 2 MiB, chosen from the
//! write buffer size: RocksDB's `arena_block_size` rule, an eighth of it).
//! A small memtable (an empty column family's) so holds a few KiB, and a
//! full one is made of blocks of the full size. A request larger than a
//! quarter of the next block gets a block of its own, so a large value
//! wastes no more than the tail of the current block.
//!
//! Blocks of 2 MiB are mapped directly (`mmap`), aligned to 2 MiB and
//! marked `MADV_HUGEPAGE`: where transparent huge pages are enabled (the
//! `madvise` or `always` setting) each block is one huge page, and a
//! random insert's search over a 64 MiB memtable stops paying a TLB miss
//! per node it visits. When the memtable drops they go to its database's
//! [`SpareBlocks`], up to one write buffer's worth, for the next
//! memtable to take instead of mapping new ones, and the rest back to the
//! system, without passing through the heap. A new mapping is zeroed by
//! the kernel page by page as it is first written (and, in a virtual
//! machine, often backed by the host then too): a fill spent 2.4% of its
//! samples there, every memtable anew. Smaller blocks come from the
//! global allocator.
//!
//! Nothing is freed until the arena drops, which is what lets readers hold
//! plain pointers into it without reference counting.
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
use std::sync::Arc;

use parking_lot::Mutex;

/// Size of the first block, and the smallest block size.
const MIN_BLOCK: usize = 4096;

/// The largest block size, and the size of a huge page on x86-64 and
/// aarch64 with 4 KiB base pages. Blocks of this size are mapped.
pub(crate) const HUGE_BLOCK: usize = 2 << 20;

/// Alignment of every block, and so the largest alignment `allocate` supports.
pub(crate) const ALIGN_MAX: usize = 16;

/// The block size for a memtable that fills at `write_buffer_size` bytes:
/// an eighth of it (RocksDB's default `arena_block_size`), rounded down to
/// a power of two between 4 KiB and 2 MiB. From a 16 MiB write buffer up
/// (the default is 64 MiB) that is 2 MiB: huge pages.
pub(crate) fn block_size_for(write_buffer_size: usize) -> usize {
    let eighth = (write_buffer_size / 8).clamp(MIN_BLOCK, HUGE_BLOCK);
    1 << eighth.ilog2()
}

/// Where a block's memory came from.
#[derive(Clone, Copy)]
enum Origin {
    /// `alloc::alloc` with this layout.
    Heap(Layout),
    /// A private anonymous mapping of [`HUGE_BLOCK`] bytes.
    Mapped,
}

/// One allocation owned by the arena.
struct Block {
    ptr: NonNull<u8>,
    origin: Origin,
}

/// The allocator's mutable state: the blocks and the free tail of the current one.
struct ArenaState {
    blocks: Vec<Block>,
    /// Next free byte of the current block (dangling while `remaining == 0`).
    cursor: NonNull<u8>,
    /// Free bytes after `cursor` in the current block.
    remaining: usize,
    /// Bytes of ordinary (not dedicated) blocks so far: the next one's size.
    ordinary_bytes: usize,
}

// SAFETY: `ArenaState` owns its blocks outright (nothing else frees them), and
// `cursor` points into one of them; moving the state to another thread moves
// that ownership with it.
unsafe impl Send for ArenaState {}

/// A bump allocator; see the module docs.
pub(crate) struct Arena {
    state: Mutex<ArenaState>,
    /// The largest ordinary block (a power of two, `MIN_BLOCK..=HUGE_BLOCK`).
    block_size: usize,
    /// Bytes of all blocks plus their bookkeeping.
    memory_usage: AtomicUsize,
    /// Where mapped blocks come from first and go back to, if anywhere.
    spare: Option<Arc<SpareBlocks>>,
}

/// Mapped [`HUGE_BLOCK`]s of dropped arenas, kept for the next arenas of
/// the same database (one pool for all its column families), up to a
/// limit (the largest family's write buffer): a memtable's blocks, freed
/// by its flush, serve the memtable that follows without being mapped and
/// zeroed again. A block is kept only as an arena drops it, and an arena
/// maps a new one only when none is kept, so the blocks mapped at any
/// time (in memtables and kept) never exceed what the database's
/// memtables held together at their peak; only the dips between flushes
/// are gone. Unmapped when the last holder drops.
pub(crate) struct SpareBlocks {
    /// Start addresses of the kept blocks.
    blocks: Mutex<Vec<NonNull<u8>>>,
    /// Most blocks kept.
    max_blocks: AtomicUsize,
}

// SAFETY: the kept blocks are owned by the pool alone (no arena points into
// them any more); handing one to an arena on another thread moves that
// ownership with it.
unsafe impl Send for SpareBlocks {}
// SAFETY: every access to the blocks goes through the mutex.
unsafe impl Sync for SpareBlocks {}

impl fmt::Debug for SpareBlocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpareBlocks")
            .field("kept", &self.blocks.lock().len())
            .field("max_blocks", &self.max_blocks.load(Ordering::Relaxed))
            .finish()
    }
}

impl SpareBlocks {
    /// A pool that keeps up to `max_bytes` of blocks (rounded down to
    /// whole blocks): the write buffer size of the database's first
    /// column family.
    pub(crate) fn new(max_bytes: usize) -> Arc<SpareBlocks> {
        Arc::new(SpareBlocks {
            blocks: Mutex::new(Vec::new()),
            max_blocks: AtomicUsize::new(max_bytes / HUGE_BLOCK),
        })
    }

    /// Raises the limit to `max_bytes` if it is below: a column family
    /// with a larger write buffer was opened or created.
    pub(crate) fn keep_up_to(&self, max_bytes: usize) {
        self.max_blocks
            .fetch_max(max_bytes / HUGE_BLOCK, Ordering::Relaxed);
    }

    /// A kept block, if any.
    fn take(&self) -> Option<NonNull<u8>> {
        self.blocks.lock().pop()
    }

    /// Keeps `block` (made by [`map_huge_block`], no longer used by its
    /// arena), or unmaps it if the pool is full.
    fn keep(&self, block: NonNull<u8>) {
        let mut blocks = self.blocks.lock();
        if blocks.len() < self.max_blocks.load(Ordering::Relaxed) {
            blocks.push(block);
        } else {
            drop(blocks);
            unmap_huge_block(block);
        }
    }

    /// Blocks kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.blocks.lock().len()
    }
}

impl Drop for SpareBlocks {
    fn drop(&mut self) {
        for block in self.blocks.get_mut().drain(..) {
            unmap_huge_block(block);
        }
    }
}

impl fmt::Debug for Arena {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arena")
            .field("block_size", &self.block_size)
            .field("memory_usage", &self.memory_usage())
            .finish_non_exhaustive()
    }
}

impl Arena {
    /// An empty arena whose ordinary blocks grow to `block_size` bytes (see
    /// [`block_size_for`]); the first allocation creates the first block.
    /// Its mapped blocks come from `spare` when it has some, and go back
    /// to it when the arena drops.
    pub(crate) fn new(block_size: usize, spare: Option<Arc<SpareBlocks>>) -> Arena {
        assert!(
            block_size.is_power_of_two() && (MIN_BLOCK..=HUGE_BLOCK).contains(&block_size),
            "arena block size {block_size} is not a power of two from 4 KiB to 2 MiB"
        );
        Arena {
            state: Mutex::new(ArenaState {
                blocks: Vec::new(),
                cursor: NonNull::dangling(),
                remaining: 0,
                ordinary_bytes: 0,
            }),
            block_size,
            memory_usage: AtomicUsize::new(0),
            spare,
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

    /// The size of the next ordinary block: as large as all before it, from
    /// [`MIN_BLOCK`] up to `block_size`.
    fn next_block_size(&self, state: &ArenaState) -> usize {
        state.ordinary_bytes.clamp(MIN_BLOCK, self.block_size)
    }

    /// Serves a request the current block cannot: from a dedicated block if
    /// it is large, else from a fresh block that becomes the current one.
    fn allocate_fallback(&self, state: &mut ArenaState, bytes: usize) -> NonNull<u8> {
        let size = self.next_block_size(state);
        if bytes > size / 4 {
            // Keep the current block: its tail can still serve small requests.
            return self.new_block(state, bytes);
        }
        let block = self.new_block(state, size);
        state.ordinary_bytes += size;
        // SAFETY: `bytes <= size / 4`, so the offset is inside the new block,
        // which is aligned to ALIGN_MAX and so to any `align`.
        state.cursor = unsafe { block.add(bytes) };
        state.remaining = size - bytes;
        block
    }

    /// Allocates and records a block of `bytes` bytes aligned to [`ALIGN_MAX`]:
    /// mapped if it is a huge block, from the heap otherwise.
    fn new_block(&self, state: &mut ArenaState, bytes: usize) -> NonNull<u8> {
        let kept = match &self.spare {
            Some(spare) if bytes == HUGE_BLOCK => spare.take(),
            _ => None,
        };
        let block = match kept.or_else(|| map_huge_block(bytes)) {
            Some(ptr) => Block {
                ptr,
                origin: Origin::Mapped,
            },
            None => {
                let layout =
                    Layout::from_size_align(bytes, ALIGN_MAX).expect("arena block too large");
                // SAFETY: `layout` has a non-zero size (`allocate` rejects zero).
                let raw = unsafe { alloc::alloc(layout) };
                let Some(ptr) = NonNull::new(raw) else {
                    alloc::handle_alloc_error(layout)
                };
                Block {
                    ptr,
                    origin: Origin::Heap(layout),
                }
            }
        };
        let ptr = block.ptr;
        state.blocks.push(block);
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

/// Maps a [`HUGE_BLOCK`]-sized block aligned to its size and asks for huge
/// pages. `None` when `bytes` is another size, under Miri, off Linux, or
/// when the mapping fails (the process's map count limit, say): the
/// caller then takes the block from the heap, which decides whether the
/// memory is there.
#[cfg(all(target_os = "linux", not(miri)))]
fn map_huge_block(bytes: usize) -> Option<NonNull<u8>> {
    if bytes != HUGE_BLOCK {
        return None;
    }
    let span = 2 * HUGE_BLOCK;
    // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let start = raw.addr();
    let aligned = (start + HUGE_BLOCK - 1) & !(HUGE_BLOCK - 1);
    let head = aligned - start;
    let tail = span - head - HUGE_BLOCK;
    // SAFETY: `[start, start + head)` and `[aligned + HUGE_BLOCK, start +
    // span)` are the parts of the mapping just made outside the aligned
    // block; nothing points into them. Unmapping page-aligned parts of a
    // private mapping cannot fail but for resource limits, which only
    // leave the slack mapped.
    unsafe {
        if head > 0 {
            libc::munmap(raw, head);
        }
        if tail > 0 {
            libc::munmap(raw.byte_add(head + HUGE_BLOCK), tail);
        }
    }
    let block = raw.wrapping_byte_add(head);
    // SAFETY: advice on the block just mapped; an error (THP compiled out)
    // only means 4 KiB pages.
    unsafe { libc::madvise(block, HUGE_BLOCK, libc::MADV_HUGEPAGE) };
    NonNull::new(block.cast())
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn map_huge_block(_bytes: usize) -> Option<NonNull<u8>> {
    None
}

impl Drop for Arena {
    fn drop(&mut self) {
        for block in self.state.get_mut().blocks.drain(..) {
            match block.origin {
                // SAFETY: `block.ptr` came from `alloc::alloc(layout)` and is
                // freed once, here; with `&mut self` no pointer into it is in use.
                Origin::Heap(layout) => unsafe { alloc::dealloc(block.ptr.as_ptr(), layout) },
                Origin::Mapped => match &self.spare {
                    Some(spare) => spare.keep(block.ptr),
                    None => unmap_huge_block(block.ptr),
                },
            }
        }
    }
}

/// Unmaps a block made by [`map_huge_block`].
#[cfg(all(target_os = "linux", not(miri)))]
fn unmap_huge_block(ptr: NonNull<u8>) {
    // SAFETY: `ptr` starts a mapping of HUGE_BLOCK bytes made by
    // `map_huge_block`, unmapped once, here, when nothing points into it.
    let rc = unsafe { libc::munmap(ptr.as_ptr().cast(), HUGE_BLOCK) };
    debug_assert_eq!(rc, 0, "munmap of an arena block failed");
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn unmap_huge_block(_ptr: NonNull<u8>) {
    unreachable!("no block is mapped off Linux or under Miri");
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Block {
        /// The block's size in bytes.
        fn size(&self) -> usize {
            match self.origin {
                Origin::Heap(layout) => layout.size(),
                Origin::Mapped => HUGE_BLOCK,
            }
        }
    }

    fn fill(ptr: NonNull<u8>, len: usize, byte: u8) {
        // SAFETY: the arena returned `len` writable bytes at `ptr`.
        unsafe { ptr.as_ptr().write_bytes(byte, len) };
    }

    fn aligned_disjoint_and_counted(block_size: usize, rounds: usize) {
        let arena = Arena::new(block_size, None);
        assert_eq!(arena.memory_usage(), 0);
        let mut seen: Vec<(usize, usize, u8)> = Vec::new();
        let sizes = [1, 7, 8, 3000, 1025, 100_000, 5, 4096, 16, 999, 700_000];
        for (i, &len) in sizes.iter().cycle().take(rounds).enumerate() {
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
        // Every byte still holds what its own allocation wrote.
        for &(addr, len, byte) in &seen {
            let ptr = seen_ptr(&arena, addr);
            // SAFETY: `len` bytes at `addr` were allocated and filled above.
            let bytes = unsafe { std::slice::from_raw_parts(ptr, len) };
            if cfg!(miri) {
                assert_eq!((bytes[0], bytes[len - 1]), (byte, byte));
            } else {
                assert!(bytes.iter().all(|&b| b == byte));
            }
        }
    }

    /// The pointer to `addr` with the provenance of the block holding it.
    fn seen_ptr(arena: &Arena, addr: usize) -> *const u8 {
        let state = arena.state.lock();
        for block in &state.blocks {
            let start = block.ptr.as_ptr().addr();
            if (start..start + block.size()).contains(&addr) {
                return block.ptr.as_ptr().wrapping_add(addr - start);
            }
        }
        panic!("{addr:#x} is in no block");
    }

    #[test]
    fn allocations_are_aligned_disjoint_and_counted() {
        aligned_disjoint_and_counted(MIN_BLOCK, 200);
        aligned_disjoint_and_counted(64 << 10, 200);
        aligned_disjoint_and_counted(HUGE_BLOCK, if cfg!(miri) { 12 } else { 400 });
    }

    #[test]
    fn small_requests_share_blocks() {
        let arena = Arena::new(MIN_BLOCK, None);
        arena.allocate(10, 8);
        let after_first = arena.memory_usage();
        for _ in 0..100 {
            arena.allocate(10, 8);
        }
        assert_eq!(arena.memory_usage(), after_first, "all fit in one block");
        arena.allocate(MIN_BLOCK, 8);
        assert!(arena.memory_usage() >= after_first + MIN_BLOCK);
    }

    #[test]
    fn block_size_follows_the_write_buffer() {
        assert_eq!(block_size_for(0), MIN_BLOCK);
        assert_eq!(block_size_for(64 << 10), 8 << 10);
        assert_eq!(block_size_for(100 << 10), 8 << 10);
        assert_eq!(block_size_for(4 << 20), 512 << 10);
        assert_eq!(block_size_for(16 << 20), HUGE_BLOCK);
        assert_eq!(block_size_for(64 << 20), HUGE_BLOCK);
        assert_eq!(block_size_for(usize::MAX), HUGE_BLOCK);
    }

    /// Blocks double from 4 KiB to the block size, so a small memtable
    /// stays small and a large one is made of full blocks; 2 MiB blocks
    /// are mapped and aligned to 2 MiB (off Miri, on Linux).
    #[test]
    fn blocks_grow_to_the_block_size() {
        let arena = Arena::new(HUGE_BLOCK, None);
        arena.allocate(100, 8);
        let first = arena.memory_usage();
        assert!(
            first < 2 * MIN_BLOCK,
            "an arena with one entry holds {first} bytes"
        );
        let entries = 6_000;
        for _ in 0..entries {
            arena.allocate(1000, 8);
        }
        let state = arena.state.lock();
        let sizes: Vec<usize> = state.blocks.iter().map(Block::size).collect();
        let mut expect = Vec::new();
        let mut total = 0;
        while expect.len() < sizes.len() {
            let size = usize::clamp(total, MIN_BLOCK, HUGE_BLOCK);
            expect.push(size);
            total += size;
        }
        assert_eq!(sizes, expect);
        assert!(total >= entries * 1000);
        assert!(sizes.ends_with(&[HUGE_BLOCK, HUGE_BLOCK]), "{sizes:?}");
        for (block, &size) in state.blocks.iter().zip(&sizes) {
            let mapped = matches!(block.origin, Origin::Mapped);
            assert_eq!(
                mapped,
                cfg!(all(target_os = "linux", not(miri))) && size == HUGE_BLOCK
            );
            if mapped {
                assert_eq!(block.ptr.as_ptr().addr() % HUGE_BLOCK, 0);
            }
        }
    }

    /// A dropped arena's mapped blocks go to its pool, up to the pool's
    /// limit (the rest are unmapped), and the next arena takes them before
    /// mapping new ones.
    #[test]
    fn dropped_blocks_serve_the_next_arena() {
        if !cfg!(all(target_os = "linux", not(miri))) {
            return; // no block is mapped, so none is kept
        }
        let spare = SpareBlocks::new(3 * HUGE_BLOCK + 1);
        let mapped = |arena: &Arena| -> Vec<usize> {
            let state = arena.state.lock();
            let blocks = state.blocks.iter();
            blocks
                .filter(|b| matches!(b.origin, Origin::Mapped))
                .map(|b| b.ptr.as_ptr().addr())
                .collect()
        };
        let first = Arena::new(HUGE_BLOCK, Some(spare.clone()));
        while mapped(&first).len() < 5 {
            fill(first.allocate(1000, 8), 1000, 1);
        }
        let old = mapped(&first);
        drop(first);
        assert_eq!(spare.len(), 3, "kept up to the limit");
        let second = Arena::new(HUGE_BLOCK, Some(spare.clone()));
        while mapped(&second).len() < 4 {
            fill(second.allocate(1000, 8), 1000, 2);
        }
        let new = mapped(&second);
        assert_eq!(spare.len(), 0);
        // The first three are the kept ones (the fourth is a new mapping,
        // which the kernel may place where an unmapped old block was).
        assert!(
            new[..3].iter().all(|a| old.contains(a)),
            "old {old:x?}, new {new:x?}"
        );
        assert!(new.iter().all(|a| a % HUGE_BLOCK == 0));
    }

    /// A pool's limit rises with the largest write buffer it is told of
    /// and never falls.
    #[test]
    fn the_pool_keeps_up_to_the_largest_limit() {
        if !cfg!(all(target_os = "linux", not(miri))) {
            return; // no block is mapped, so none is kept
        }
        let spare = SpareBlocks::new(HUGE_BLOCK);
        spare.keep_up_to(3 * HUGE_BLOCK);
        spare.keep_up_to(2 * HUGE_BLOCK);
        let arena = Arena::new(HUGE_BLOCK, Some(spare.clone()));
        while arena.memory_usage() < 6 * HUGE_BLOCK {
            fill(arena.allocate(1000, 8), 1000, 3);
        }
        drop(arena);
        assert_eq!(spare.len(), 3);
    }
}
