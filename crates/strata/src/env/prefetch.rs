//! Reads made in the background, for scans over files read with direct
//! I/O: a scan asks for the window after the one it is reading and goes on
//! with its work while the device reads it (RocksDB's `async_io` for
//! iterators). Without direct I/O the kernel's own readahead does this.
//!
//! A small pool of threads, started on the first request, makes the reads
//! with [`RandomAccessFile::read_exact_at`], so a read's errors are the
//! file's own. Nothing depends on the pool for progress: a waiter whose
//! read no thread has started yet makes it itself, and a read whose
//! waiter is gone is skipped. Each request owns its buffer and holds its
//! file open until it is done, so a scan dropped while its read is in
//! flight leaves nothing dangling.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use super::RandomAccessFile;
use crate::error::{Error, Result};

/// Threads that make background reads. They spend their time waiting on
/// the device, not on a core; a few let several scans' reads overlap.
const THREADS: usize = 4;

/// A read to make: `buf.len()` bytes at `offset` of `file`.
struct Job {
    file: Arc<dyn RandomAccessFile>,
    offset: u64,
    buf: Vec<u8>,
}

impl Job {
    fn run(mut self) -> (Vec<u8>, Result<()>) {
        let result = self.file.read_exact_at(self.offset, &mut self.buf);
        (self.buf, result)
    }
}

enum State {
    /// Waiting for a thread (or for its waiter, who may make it itself).
    Queued(Job),
    /// A thread is reading.
    Running,
    /// Read: the buffer and how the read went.
    Done(Vec<u8>, Result<()>),
    /// Given to the waiter, or dropped unread.
    Gone,
}

struct Slot {
    state: Mutex<State>,
    done: Condvar,
}

struct Pool {
    queue: Mutex<VecDeque<Arc<Slot>>>,
    work: Condvar,
    /// Threads that started; with none, nothing is queued.
    threads: usize,
}

static POOL: OnceLock<Pool> = OnceLock::new();

fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        // A thread that cannot start leaves its share to the others; the
        // workers wait for this to finish before they look at the queue.
        let threads = (0..THREADS)
            .filter(|i| {
                std::thread::Builder::new()
                    .name(format!("strata-read-{i}"))
                    .spawn(worker)
                    .is_ok()
            })
            .count();
        Pool {
            queue: Mutex::new(VecDeque::new()),
            work: Condvar::new(),
            threads,
        }
    })
}

fn worker() {
    let pool = pool();
    loop {
        let slot = {
            let mut queue = pool.queue.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                match queue.pop_front() {
                    Some(slot) => break slot,
                    None => queue = pool.work.wait(queue).unwrap_or_else(|e| e.into_inner()),
                }
            }
        };
        let job = {
            let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            match std::mem::replace(&mut *state, State::Running) {
                State::Queued(job) => job,
                other => {
                    // Taken by its waiter, or dropped: nothing to do.
                    *state = other;
                    continue;
                }
            }
        };
        // A read that panics (a file system's bug) still wakes its waiter,
        // with an error, and leaves the thread serving the others.
        let (buf, result) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job.run()))
            .unwrap_or_else(|_| {
                let e = std::io::Error::other("the read panicked");
                (Vec::new(), Err(Error::io("background read", e)))
            });
        let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*state, State::Running) {
            *state = State::Done(buf, result);
            slot.done.notify_all();
        }
    }
}

/// A read under way ([`read_in_background`]). Dropping it abandons the
/// read: a thread that has not started it skips it.
pub(crate) struct PendingRead {
    slot: Arc<Slot>,
}

impl std::fmt::Debug for PendingRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PendingRead")
    }
}

/// Starts reading `buf.len()` bytes at `offset` of `file` into `buf` on a
/// background thread; [`PendingRead::wait`] gives the buffer back. `None`
/// where no background thread could be started.
pub(crate) fn read_in_background(
    file: Arc<dyn RandomAccessFile>,
    offset: u64,
    buf: Vec<u8>,
) -> Option<PendingRead> {
    let pool = pool();
    if pool.threads == 0 {
        return None;
    }
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Queued(Job { file, offset, buf })),
        done: Condvar::new(),
    });
    pool.queue
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_back(slot.clone());
    pool.work.notify_one();
    Some(PendingRead { slot })
}

impl PendingRead {
    /// The buffer and the read's result, once it is done: made here if no
    /// thread has started it.
    pub(crate) fn wait(self) -> (Vec<u8>, Result<()>) {
        let mut state = self.slot.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match std::mem::replace(&mut *state, State::Gone) {
                State::Queued(job) => {
                    drop(state);
                    return job.run();
                }
                State::Done(buf, result) => return (buf, result),
                State::Running => {
                    *state = State::Running;
                    state = self
                        .slot
                        .done
                        .wait(state)
                        .unwrap_or_else(|e| e.into_inner());
                }
                State::Gone => unreachable!("a pending read is waited for once"),
            }
        }
    }
}

impl Drop for PendingRead {
    fn drop(&mut self) {
        // A queued job's file and buffer are released now; a running read
        // finishes, sees that nobody waits, and drops its buffer.
        let mut state = self.slot.state.lock().unwrap_or_else(|e| e.into_inner());
        *state = State::Gone;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many reads at once, waited for in any order or dropped unread: each
    /// waited one gives exactly its bytes, or the file's error.
    #[test]
    fn background_reads_give_the_files_bytes_or_its_error() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let fs = crate::env::MemFileSystem::new();
        let path = std::path::Path::new("/f");
        crate::env::write_file_atomic(&fs, path, &data).unwrap();
        let file = crate::env::FileSystem::open_random_access(&fs, path).unwrap();
        let mut pending = Vec::new();
        for i in 0..200u64 {
            let offset = (i * 4_999) % 110_000;
            let len = 1 + (i as usize * 13) % 5_000;
            pending.push((
                offset,
                len,
                read_in_background(file.clone(), offset, vec![0; len]).expect("threads started"),
            ));
        }
        let mut waited = 0;
        for (k, (offset, len, p)) in pending.into_iter().enumerate().rev() {
            if k % 5 == 0 {
                drop(p);
                continue;
            }
            let (buf, result) = p.wait();
            let end = offset as usize + len;
            if end <= data.len() {
                result.unwrap();
                assert_eq!(buf, data[offset as usize..end], "{len} bytes at {offset}");
            } else {
                assert!(result.is_err(), "{len} bytes at {offset}: past the end");
            }
            waited += 1;
        }
        assert_eq!(waited, 160);
    }
}
