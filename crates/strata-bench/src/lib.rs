//! `strata-bench`: RocksDB's `db_bench`, for Strata and RocksDB alike.
//!
//! It takes db_bench's flags with db_bench's meaning and prints db_bench's
//! header and result lines, so one command line runs on both tools and on
//! both engines (`--engine=strata`, or `--engine=rocksdb` in a build with
//! the `rocksdb` feature), and every performance claim is a ratio measured
//! in one session:
//!
//! ```text
//! strata-bench --benchmarks=fillseq,readrandom --num=1000000 --key_size=8
//! fillseq      :       2.500 micros/op 399983 ops/sec 2.500 seconds 1000000 operations;   44.2 MB/s
//! readrandom   :       3.096 micros/op 322935 ops/sec 3.097 seconds 1000000 operations;   35.7 MB/s (1000000 of 1000000 found)
//! ```
//!
//! Benchmarks (`--benchmarks`, comma-separated, run in order):
//!
//! - `fillseq`: write `--num` keys in order, on a fresh database;
//! - `appendseq`: fillseq's writes into the existing database (ours);
//! - `fillrandom`: write `--num` random keys (with repeats), fresh database;
//! - `filluniquerandom`: write every key once in random order, fresh database;
//! - `fillsync`: write `--num`/1000 random keys, syncing each, fresh database;
//! - `overwrite`: write `--num` random keys into the existing database;
//! - `readseq`, `readreverse`: scan forward / backward (at most `--reads`);
//! - `readrandom`: `--reads` point reads of random keys;
//! - `readmissing`: point reads of keys that do not exist;
//! - `multireadrandom`: `--reads` random keys in MultiGets of `--batch_size`
//!   (`--multiread_stride` apart, `--multiread_batched` for the batched call);
//! - `seekrandom`: seek to random keys, then `--seek_nexts` nexts;
//! - `readwhilewriting`: `--threads` readers and one writer;
//! - `deleterandom`: delete random keys (in batches of `--batch_size`);
//! - `fillseekseq`: write keys in order, then seek to each in order (timed);
//! - `fillseqingest` (ours): fillseq's keys and values written to table files
//!   with the engine's table-file writer, then ingested (moved) into a fresh
//!   database; times both phases;
//! - `checkpoint` (ours): a checkpoint of the database beside it, timed, with
//!   the bytes hard-linked and written (removed afterwards);
//! - `flush`, `compact`, `waitforcompaction`: engine operations;
//! - `stats`, `levelstats`, `sstables`: print the engine's statistics;
//! - `memstats` (ours): where the engine's memory is (memtables, block
//!   cache usage and capacity, table readers outside the cache) and, on
//!   glibc, the allocator's heap (taken from the system, in use, free).
//!
//! With no `--db`, the database lives in a temporary directory (under
//! `/dev/shm` when it exists) removed at exit unless `--use_existing_db` or
//! `--keep_db` is given.
//!
//! Layout: [`flags`] (parsing), [`keys`] and [`values`] (db_bench's key and
//! value generation), [`random`] (its generators), [`stats`] and
//! [`histogram`] (timing and reporting), [`engine`] (the engines), `bench`
//! (the benchmarks and the run).

mod bench;
pub mod engine;
pub mod error;
pub mod flags;
pub mod histogram;
pub mod keys;
mod progress;
pub mod random;
pub mod stats;
pub mod values;

pub use bench::BENCHMARKS;
pub use error::{Error, Result};

use std::io::Write;

/// Runs the tool with `args` (without the program name), writing the
/// report to `out` (stdout in the binary); the environment lines, interim
/// stats and the progress bar go to stderr, as in db_bench.
pub fn run<S: AsRef<str>>(args: &[S], out: &mut dyn Write) -> Result<()> {
    match flags::parse(args)? {
        flags::Command::Help => {
            writeln!(
                out,
                "strata-bench: db_bench for Strata (and RocksDB)\n\nUsage: strata-bench [--flag=value]...\n\nBenchmarks: {}\n\nFlags:\n{}",
                BENCHMARKS.join(", "),
                flags::Flags::help()
            )?;
            Ok(())
        }
        flags::Command::Run(f) => bench::Runner::new(*f, out)?.run(),
    }
}
