//! Recycled buffers for blocks read from files.
//!
//! Every block-cache miss decompresses (or copies) a block into a new
//! buffer, and every eviction frees one: for a read-heavy workload over a
//! small cache that is a 4 KiB `malloc`, its zero fill and a `free` per
//! read (about a tenth of a W6 `readrandom` in a profile, most of it in
//! glibc's `_int_free` and in page faults of fresh memory). Instead a
//! block's buffer goes back to a small per-thread pool when its last
//! reference drops, and the next block read on that thread reuses it,
//! without zeroing what it overwrites.
//!
//! Bounds: per thread at most [`POOL_BUFFERS_MAX`] buffers holding at
//! most [`POOLED_BYTES_MAX`] bytes together (each at most
//! [`POOLED_CAPACITY_MAX`]), so a hundred reading threads keep at most
//! 25 MiB; a buffer is reused only for a block of at least half its
//! capacity, so a cached block never holds more than twice its size.

use std::cell::RefCell;

use bytes::Bytes;

/// Buffers kept per thread.
pub(crate) const POOL_BUFFERS_MAX: usize = 32;
/// Larger buffers are freed, not kept.
pub(crate) const POOLED_CAPACITY_MAX: usize = 64 << 10;
/// Bytes of the buffers kept per thread.
pub(crate) const POOLED_BYTES_MAX: usize = 256 << 10;

thread_local! {
    static POOL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer for a block of `n` bytes: a pooled one whose capacity fits
/// (`n` to `2n`), or a new one. Its length is whatever it had; callers set
/// it (`resize` only zero-fills growth).
pub(crate) fn take(n: usize) -> Vec<u8> {
    let pooled = POOL
        .try_with(|p| {
            let mut p = p.borrow_mut();
            let at = p
                .iter()
                .rposition(|b| b.capacity() >= n && b.capacity() <= n.saturating_mul(2))?;
            Some(p.swap_remove(at))
        })
        .ok()
        .flatten();
    pooled.unwrap_or_else(|| Vec::with_capacity(n))
}

/// Wraps a block's buffer; it goes back to the pool of the thread that
/// drops the last reference.
struct Pooled(Vec<u8>);

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        if buf.capacity() == 0 || buf.capacity() > POOLED_CAPACITY_MAX {
            return;
        }
        // During thread teardown the pool may be gone: then it is freed.
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut() {
                let held: usize = p.iter().map(Vec::capacity).sum();
                if p.len() < POOL_BUFFERS_MAX && held + buf.capacity() <= POOLED_BYTES_MAX {
                    p.push(buf);
                }
            }
        });
    }
}

/// The block in `buf` as shared bytes whose buffer is recycled.
pub(crate) fn into_bytes(buf: Vec<u8>) -> Bytes {
    Bytes::from_owner(Pooled(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_and_fit() {
        let mut a = take(4000);
        a.resize(4000, 7);
        let ptr = a.as_ptr();
        let bytes = into_bytes(a);
        assert_eq!(bytes.len(), 4000);
        let copy = bytes.clone();
        drop(bytes);
        // Still referenced: not back yet.
        let other = take(4000);
        assert_ne!(other.as_ptr(), ptr);
        drop(copy);
        // Back, and reused for a block of a fitting size, contents intact
        // up to its length (the caller overwrites them).
        let again = take(3000);
        assert_eq!(again.as_ptr(), ptr);
        assert_eq!(again.len(), 4000);
        // Not for a block under half its capacity.
        let small = into_bytes(again);
        drop(small);
        let tiny = take(100);
        assert_ne!(tiny.as_ptr(), ptr);
    }

    #[test]
    fn the_pool_is_bounded() {
        let held: Vec<Bytes> = (0..POOL_BUFFERS_MAX + 10)
            .map(|_| {
                let mut b = take(1000);
                b.resize(1000, 1);
                into_bytes(b)
            })
            .collect();
        drop(held);
        POOL.with(|p| {
            let p = p.borrow();
            assert!(p.len() <= POOL_BUFFERS_MAX);
            assert!(p.iter().map(Vec::capacity).sum::<usize>() <= POOLED_BYTES_MAX);
        });
        let large: Vec<Bytes> = (0..10).map(|_| into_bytes(vec![0; 60_000])).collect();
        drop(large);
        POOL.with(|p| {
            assert!(p.borrow().iter().map(Vec::capacity).sum::<usize>() <= POOLED_BYTES_MAX)
        });
        let big = into_bytes(vec![0; POOLED_CAPACITY_MAX + 1]);
        drop(big);
        POOL.with(|p| {
            assert!(p
                .borrow()
                .iter()
                .all(|b| b.capacity() <= POOLED_CAPACITY_MAX))
        });
    }
}
