//! `strata-stress crash-test`: the kill -9 loop.
//!
//! Each cycle starts `strata-stress run` as a child process on the same
//! database and expected-state file, kills it with SIGKILL
//! (`Child::kill`) after a random interval, and then, in this process,
//! reopens the database and verifies it (see `verify.rs`). A child that
//! exits by itself before the kill must have exited cleanly; one that
//! reports a verification failure fails the test. The last cycle may let
//! the child finish its run (`--final_clean_run=1`), which ends with an
//! exact check of the whole database.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use strata::DB;

use crate::expected::{remove_all, ExpectedState};
use crate::failure::Failure;
use crate::flags::Flags;
use crate::run::{db_options, shape};
use crate::verify::verify_after_crash;

/// Totals of a crash test.
#[derive(Debug, Default, Clone, Copy)]
pub struct CrashTestStats {
    /// Kill-and-verify cycles run.
    pub cycles: u64,
    /// SIGKILLs delivered to a running child (the faults injected).
    pub kills: u64,
    /// Operations the children ran.
    pub ops: u64,
    /// Reads the children verified while running.
    pub reads_verified: u64,
    /// Keys verified after the kills.
    pub keys_verified_after_kill: u64,
}

/// Flags of `crash-test` itself; every other flag goes to the children.
pub const OWN_FLAGS: &[&str] = &[
    "dir",
    "cycles",
    "kill_min_ms",
    "kill_max_ms",
    "final_clean_run",
    "randomize_options",
    "power_loss",
];

/// With `--randomize_options=1`, draws the database options of one cycle
/// (as RocksDB's crash test draws its option mixes): buffer and file
/// sizes, compaction trigger, background jobs, subcompactions, compression, bloom bits,
/// block size and cache, stream-aware cutting, a partitioner, packed
/// tables, pipelined and parallel memtable writes. None changes what the
/// database holds, so the child and the
/// verification after the kill may each run with any of them. Returns
/// the drawn flags, for the cycle's line.
fn randomize_options(rng: &mut StdRng, args: &mut Flags) -> String {
    let compression = ["none", "snappy", "lz4", "zstd"][rng.gen_range(0..4)];
    let drawn: Vec<(&str, String)> = vec![
        (
            "write_buffer_size",
            (rng.gen_range(64..1024u64) << 10).to_string(),
        ),
        (
            "target_file_size_base",
            (rng.gen_range(32..512u64) << 10).to_string(),
        ),
        (
            "max_bytes_for_level_base",
            (rng.gen_range(128..2048u64) << 10).to_string(),
        ),
        (
            "level0_file_num_compaction_trigger",
            rng.gen_range(2..7).to_string(),
        ),
        ("max_background_jobs", rng.gen_range(1..5).to_string()),
        ("max_subcompactions", rng.gen_range(1..4).to_string()),
        ("compression", compression.to_string()),
        (
            "bloom_bits",
            [0, 5, 10, 16][rng.gen_range(0..4)].to_string(),
        ),
        ("block_size", (1u64 << rng.gen_range(10..15)).to_string()),
        ("cache_size", (rng.gen_range(64..4096u64) << 10).to_string()),
        ("stream_aware_cutting", rng.gen_range(0..2).to_string()),
        (
            "sst_partitioner_prefix",
            [0, 0, 4, 6][rng.gen_range(0..4)].to_string(),
        ),
        (
            "packed_from_level",
            [-1, -1, 1, 2][rng.gen_range(0..4)].to_string(),
        ),
        ("enable_pipelined_write", rng.gen_range(0..2).to_string()),
        (
            "allow_concurrent_memtable_write",
            rng.gen_range(0..2).to_string(),
        ),
    ];
    let mut line = String::new();
    for (name, value) in drawn {
        line.push_str(&format!(" --{name}={value}"));
        args.set(name, value);
    }
    line
}

/// Runs the crash test described by `flags` (see `main.rs`).
pub fn crash_test(flags: &Flags) -> Result<CrashTestStats, Failure> {
    let dir = flags.required("dir")?;
    let cycles: u64 = flags.get("cycles", 10)?;
    let kill_min_ms: u64 = flags.get("kill_min_ms", 200)?;
    let kill_max_ms: u64 = flags.get("kill_max_ms", 2000)?.max(kill_min_ms + 1);
    let seed: u64 = flags.get("seed", 0)?;
    let final_clean_run = flags.flag("final_clean_run", false)?;
    let randomize = flags.flag("randomize_options", false)?;
    let power_loss = flags.flag("power_loss", false)?;
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let db = dir.join("db");
    let expected = dir.join("expected");
    // A fresh start: the expected state describes this database only.
    let _ = std::fs::remove_dir_all(&db);
    remove_all(&expected);
    let mut child_flags = flags.clone();
    for own in OWN_FLAGS {
        child_flags.remove(own);
    }
    child_flags.set("db", db.display());
    child_flags.set("expected", expected.display());
    if flags.get::<String>("sync", String::new())?.is_empty() {
        child_flags.set("sync", 1);
    }
    // The database and the expected state exist before the first child:
    // a child killed before it made them leaves something to verify, and
    // bad database or key-space flags fail here, once, not in every child.
    let shape = shape(&child_flags)?;
    ExpectedState::open_or_create(&expected, shape)?;
    DB::open(&db_options(&child_flags)?, &db)
        .map_err(|e| format!("create {}: {e}", db.display()))?;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut stats = CrashTestStats::default();
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let start = Instant::now();
    for cycle in 0..cycles {
        let clean = final_clean_run && cycle + 1 == cycles;
        let mut args = child_flags.clone();
        args.set("seed", seed.wrapping_mul(1_000_003).wrapping_add(cycle));
        let drawn = if randomize {
            randomize_options(&mut rng, &mut args)
        } else {
            String::new()
        };
        let kill_after = Duration::from_millis(rng.gen_range(kill_min_ms..kill_max_ms));
        if power_loss && !clean {
            args.set("power_loss_after_ms", kill_after.as_millis());
        }
        if clean {
            args.set("duration_ms", kill_after.as_millis());
        } else if flags
            .get::<String>("duration_ms", String::new())?
            .is_empty()
        {
            args.set("duration_ms", 3_600_000);
        }
        let mut child = Command::new(&exe)
            .arg("run")
            .args(args.to_args())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", exe.display()))?;
        // A child cutting its own power gets time to do it; one that has
        // not by then is killed, and fails the test below.
        let cut_by_child = power_loss && !clean;
        let deadline =
            Instant::now() + kill_after + Duration::from_secs(if cut_by_child { 60 } else { 0 });
        let mut exited = None;
        // Polls until the deadline or an early exit.
        while Instant::now() < deadline || clean {
            if let Some(status) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
                exited = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let killed = match exited {
            Some(status) if status.success() => false,
            Some(status) if cut_by_child && status.code() == Some(crate::run::POWER_LOSS_EXIT) => {
                stats.kills += 1;
                true
            }
            Some(status) => {
                // The child's own status: 1 is its setup, anything else
                // (2, a signal) the database failing it.
                let what =
                    format!("cycle {cycle}: the run failed ({status}); see its output above");
                return Err(match status.code() {
                    Some(1) => Failure::Setup(what),
                    _ => Failure::Check(what),
                });
            }
            None if cut_by_child => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Failure::Check(format!(
                    "cycle {cycle}: the run did not cut its power within 60 s of the {} ms asked",
                    kill_after.as_millis()
                )));
            }
            None => {
                child.kill().map_err(|e| format!("kill: {e}"))?;
                child.wait().map_err(|e| format!("wait: {e}"))?;
                stats.kills += 1;
                true
            }
        };
        // The verification opens with this cycle's options too.
        let verify_flags = if randomize {
            let mut f = args.clone();
            f.remove("seed");
            f
        } else {
            child_flags.clone()
        };
        let verified = verify_after_crash(&verify_flags)
            .map_err(|e| e.context(format!("cycle {cycle}: after kill{drawn}")))?;
        stats.keys_verified_after_kill += verified;
        stats.cycles += 1;
        let (ops, reads) = ExpectedState::open_existing(&expected, shape)?.counters();
        println!(
            "cycle {cycle}: {} after {} ms; {ops} ops and {reads} reads verified so far; {verified} keys verified{drawn}",
            match (killed, cut_by_child) {
                (true, true) => "power cut",
                (true, false) => "killed",
                _ => "finished",
            },
            kill_after.as_millis()
        );
        (stats.ops, stats.reads_verified) = (ops, reads);
    }
    println!(
        "crash-test: {} cycles, {} kills (faults injected), {} operations, {} reads verified during runs, \
         {} keys verified after kills, {:.1} s",
        stats.cycles,
        stats.kills,
        stats.ops,
        stats.reads_verified,
        stats.keys_verified_after_kill,
        start.elapsed().as_secs_f64()
    );
    Ok(stats)
}
