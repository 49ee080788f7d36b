//! Cache-line prefetch hints for the read path: a lookup that knows which
//! bytes it will read next asks for all their lines at once, so their
//! misses overlap instead of following one another.

/// Bytes in a cache line on the CPUs Strata targets.
pub const CACHE_LINE: usize = 64;

/// Hints the CPU to load the cache line holding `bytes[at]`. A no-op when
/// `at` is out of range, and off x86_64.
#[inline(always)]
pub fn prefetch_at(bytes: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(byte) = bytes.get(at) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is only a hint: it never dereferences the
        // pointer, cannot fault and has no effect on program state. The
        // pointer is in bounds anyway, and SSE, which the intrinsic needs, is
        // part of every x86_64 CPU.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, at);
}

/// Hints the CPU to load every cache line of `bytes[start..end]`, at most
/// `max_lines` of them (from the start). Out-of-range parts are skipped.
#[inline]
pub fn prefetch_range(bytes: &[u8], start: usize, end: usize, max_lines: usize) {
    for at in line_offsets(
        bytes.as_ptr() as usize,
        start,
        end.min(bytes.len()),
        max_lines,
    ) {
        prefetch_at(bytes, at);
    }
}

/// Hints the CPU to load every cache line of `items` (at most 8 lines).
#[inline]
pub fn prefetch_slice(items: &[u64]) {
    // SAFETY: the bytes of initialized `u64`s are initialized `u8`s, which
    // need no alignment; the view lives no longer than `items`.
    let bytes = unsafe {
        std::slice::from_raw_parts(items.as_ptr().cast::<u8>(), std::mem::size_of_val(items))
    };
    prefetch_range(bytes, 0, bytes.len(), 8);
}

/// One offset in each of the first `max_lines` cache lines that
/// `[start, end)` touches, for bytes whose offset 0 is at address `base`:
/// `start` itself, then the first byte of each later line.
fn line_offsets(
    base: usize,
    start: usize,
    end: usize,
    max_lines: usize,
) -> impl Iterator<Item = usize> {
    let (first, lines) = if start < end {
        let first = (base + start) / CACHE_LINE;
        let last = (base + end - 1) / CACHE_LINE;
        (first, (last - first + 1).min(max_lines))
    } else {
        (0, 0)
    };
    (0..lines).map(move |line| ((first + line) * CACHE_LINE).max(base + start) - base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(base: usize, start: usize, end: usize, max: usize) -> Vec<usize> {
        line_offsets(base, start, end, max).collect()
    }

    #[test]
    fn one_offset_per_line_touched() {
        // Aligned base: lines at 0, 64, 128.
        assert_eq!(offsets(4096, 0, 130, 16), [0, 64, 128]);
        assert_eq!(offsets(4096, 10, 64, 16), [10]);
        assert_eq!(offsets(4096, 63, 65, 16), [63, 64]);
        // Unaligned base: offset 0 is 8 bytes into a line.
        assert_eq!(offsets(4104, 0, 57, 16), [0, 56]);
        assert_eq!(offsets(4104, 0, 56, 16), [0]);
        // Capped, empty and reversed ranges.
        assert_eq!(offsets(4096, 0, 1024, 4), [0, 64, 128, 192]);
        assert_eq!(offsets(4096, 0, 1024, 0), Vec::<usize>::new());
        assert_eq!(offsets(4096, 10, 10, 4), Vec::<usize>::new());
        assert_eq!(offsets(4096, 20, 10, 4), Vec::<usize>::new());
    }

    #[test]
    fn out_of_range_hints_are_ignored() {
        let bytes = vec![7u8; 1000];
        prefetch_at(&bytes, 5000);
        prefetch_at(&[], 0);
        prefetch_range(&bytes, 900, 5000, 64);
        prefetch_range(&[], 0, 10, 64);
        assert!(bytes.iter().all(|&b| b == 7), "hints change nothing");
    }
}
