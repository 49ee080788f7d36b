//! strata-stress: a randomized stress test with an expected state that
//! survives `kill -9`, and the crash-test driver built on it (RocksDB's
//! db_stress and db_crashtest.py in one binary).
//!
//! ```text
//! strata-stress run --db=DIR --expected=FILE [flags]
//!     Threads doing random puts, deletes, batches and group writes, gets,
//!     group consistency checks (one snapshot must show every member of a
//!     group at the same write), bounded scans both ways and long-held
//!     snapshots, over a bounded key space, with small buffers and files so
//!     flushes and compactions never stop. Every read is checked against
//!     the expected-state file. Ends (after --duration_ms or
//!     --ops_per_thread) with an exact check of the whole database and a
//!     check that the table files on disk are exactly the live ones.
//! strata-stress verify --db=DIR --expected=FILE [flags]
//!     After a crash: reopens and checks every key (the acknowledged value
//!     or the one in flight; with --disable_wal, a prefix of the history at
//!     least as long as the last flush) and that scans and gets agree, then
//!     makes the expected state exact again. Both the database and the
//!     expected-state file must exist.
//! strata-stress crash-test --dir=DIR [--cycles=10] [--kill_min_ms=200]
//!                          [--kill_max_ms=2000] [--final_clean_run=0]
//!                          [--randomize_options=0] [run flags]
//!     Loops: start `run --sync=1` as a child, SIGKILL it after a random
//!     interval, `verify`. With --power_loss=1 the child cuts its own
//!     power instead of being killed (`run --power_loss_after_ms`), so
//!     every unsynced byte is lost, not only the process. With --randomize_options=1 each cycle (child and
//!     verification) draws its own database options (buffer, file and
//!     block sizes, compaction trigger, jobs, subcompactions, compression, bloom bits,
//!     cache, cutting, partitioner, packed tables), printed on its line.
//!     Creates the database and the expected state first (so bad
//!     database flags fail before any child runs). Prints
//!     cycles, kills, operations and keys verified. Exits 0 only if every
//!     check passed.
//!
//! run flags: --threads=4 --keys=10000 --groups=100 --group_size=5
//!     --value_size_max=100 --seed=0 --sync=0 --disable_wal=0
//!     --streams=4 (ascending insert streams half the single puts follow)
//!     --flush_interval_ms=300 (explicit flushes when the log is off)
//!     --duration_ms=10000 --ops_per_thread=unlimited
//!     --manifest_fault_interval_ms=0 (N > 0: every N ms, fail one manifest
//!       write while readers are held, reopen, settle, check the files)
//!     --power_loss_after_ms=0 (N > 0: the database runs on the
//!       fault-injecting file system over the disk, and after N ms the
//!       power is cut: every byte not synced is dropped, every directory
//!       entry not synced undone, and the process exits with status 3;
//!       with --power_loss_keep_prefix=1 a random prefix of each file's
//!       unsynced bytes survives instead. Without --sync=1 the run keeps a
//!       write history, as with --disable_wal, for `verify`)
//!     --write_buffer_size=65536 --target_file_size_base=65536
//!     --max_bytes_for_level_base=262144 --level0_file_num_compaction_trigger=4
//!     --max_background_jobs=2 --max_subcompactions=1 --compression=snappy --bloom_bits=10
//!     --block_size=4096 --cache_size=1048576 --stream_aware_cutting=1
//!     --sst_partitioner_prefix=0 (N > 0: a fixed-prefix SST partitioner)
//!     --packed_from_level=-1 (0-6: packed tables from that level down)
//!     --enable_pipelined_write=0 --allow_concurrent_memtable_write=1
//! ```
//!
//! Exit status: 0 passed, 1 bad usage or setup, 2 verification failed.

mod crash_test;
mod expected;
mod failure;
mod flags;
mod run;
mod value;
mod verify;

use flags::Flags;

const RUN_FLAGS: &[&str] = &[
    "db",
    "expected",
    "threads",
    "keys",
    "groups",
    "group_size",
    "value_size_max",
    "seed",
    "sync",
    "disable_wal",
    "flush_interval_ms",
    "duration_ms",
    "manifest_fault_interval_ms",
    "power_loss_after_ms",
    "power_loss_keep_prefix",
    "ops_per_thread",
    "streams",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(command) = args.first() else {
        usage("missing command");
    };
    let known: Vec<&str> = match command.as_str() {
        "run" | "verify" => RUN_FLAGS.iter().chain(run::DB_FLAGS).copied().collect(),
        "crash-test" => RUN_FLAGS
            .iter()
            .chain(run::DB_FLAGS)
            .chain(crash_test::OWN_FLAGS)
            .copied()
            .filter(|f| !matches!(*f, "db" | "expected"))
            .collect(),
        "-h" | "--help" | "help" => {
            println!(
                "{}",
                include_str!("main.rs")
                    .lines()
                    .take_while(|l| l.starts_with("//!"))
                    .map(|l| l.trim_start_matches("//!").strip_prefix(' ').unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            return;
        }
        other => usage(&format!("unknown command {other:?}")),
    };
    let flags = match Flags::parse(&args[1..], &known) {
        Ok(f) => f,
        Err(e) => usage(&e),
    };
    let result = match command.as_str() {
        "run" => run::run(&flags).map(|_| ()),
        "verify" => {
            verify::verify_after_crash(&flags).map(|n| println!("verify: {n} keys verified"))
        }
        _ => crash_test::crash_test(&flags).map(|_| ()),
    };
    if let Err(e) = result {
        // After a simulated power cut the run's own failures are expected;
        // the cut ends the process (status 3).
        run::wait_if_power_lost();
        match &e {
            failure::Failure::Setup(_) => eprintln!("strata-stress {command}: {e}"),
            failure::Failure::Check(_) => eprintln!("{e}"),
        }
        std::process::exit(e.exit_code());
    }
}

fn usage(what: &str) -> ! {
    eprintln!("strata-stress: {what}\nusage: strata-stress run|verify|crash-test [--flag=value ...]; see --help");
    std::process::exit(1);
}
