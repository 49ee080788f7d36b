//! Gives the memory a background job freed back to the system.
//!
//! glibc's allocator keeps freed memory in its per-thread arenas. Once a
//! freed block larger than its mapping threshold raises that threshold
//! (up to 32 MiB), it serves every later buffer up to that size from an
//! arena too. A flush or compaction allocates and frees several MB of
//! such buffers per output (the index builders, readahead buffers, the
//! index block read back at open). Between the tables' long-lived index
//! blocks, the freed pages stay resident, since free() returns only the
//! top of an arena. `malloc_trim` hands back the free pages inside every
//! arena (`MADV_DONTNEED`). Under another global allocator (jemalloc,
//! mimalloc), glibc's arenas hold little and the call has little to do.

/// Returns the C allocator's free pages to the system (glibc on Linux;
/// elsewhere nothing to do). It walks every arena under that arena's
/// lock: 0.9 ms at the median and 10 ms at most after the jobs of a 50M
/// fill. Call it with no lock held.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
    // SAFETY: malloc_trim takes a plain integer and only walks and
    // releases the allocator's own free lists, under its own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// [`release_free_memory`] with `guard`'s lock released: after a flush or
/// compaction has woken its waiters.
pub(crate) fn release_free_memory_unlocked<T>(guard: &mut parking_lot::MutexGuard<'_, T>) {
    parking_lot::MutexGuard::unlocked(guard, release_free_memory);
}
