//! The short crash test CI runs: the `strata-stress` binary kills its own
//! stress runs with SIGKILL at random moments and verifies the database
//! after each kill, with the log synced and with the log off (prefix
//! mode). `STRATA_CRASH_TEST_CYCLES=<n>` runs more cycles of each. Also
//! the exit statuses: 1 for a bad setup, 2 for a failed check.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cycles(default: u32) -> u32 {
    std::env::var("STRATA_CRASH_TEST_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A scratch directory for test `name` of this process.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("strata-stress-test-{name}-{}", std::process::id()))
}

/// Runs `strata-stress command args...`.
fn stress(command: &str, args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata-stress"))
        .arg(command)
        .args(args)
        .output()
        .expect("strata-stress runs")
}

/// `--db` and `--expected` flags for a database and its expected state in
/// `dir`, followed by `extra`.
fn db_flags(dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        format!("--db={}", dir.join("db").display()),
        format!("--expected={}", dir.join("expected").display()),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs `cycles` kill cycles (plus a clean last run if `extra` asks);
/// returns the output.
fn crash_test(name: &str, cycles: u32, extra: &[&str]) -> String {
    let dir = scratch(name);
    let mut args = vec![
        format!("--dir={}", dir.display()),
        format!("--cycles={cycles}"),
    ];
    args.extend(
        [
            "--kill_min_ms=100",
            "--kill_max_ms=700",
            "--keys=2000",
            "--groups=40",
            "--threads=3",
            "--seed=1",
        ]
        .iter()
        .chain(extra)
        .map(|s| s.to_string()),
    );
    let output = stress("crash-test", &args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "crash test {name} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("crash-test:"))
        .unwrap_or_else(|| panic!("no summary in:\n{stdout}"));
    println!("{name}: {summary}");
    assert!(
        summary.starts_with(&format!("crash-test: {cycles} cycles")),
        "{summary}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    stdout.into_owned()
}

#[test]
fn kill_9_with_synced_writes() {
    // Ten kills, then a run that ends cleanly with an exact check.
    crash_test("sync", cycles(10) + 1, &["--sync=1", "--final_clean_run=1"]);
}

#[test]
fn kill_9_with_packed_tables() {
    // Packed tables from L1 down (L0 block-based: flushes, then the
    // format changes on the way down), synced writes, a clean last run.
    crash_test(
        "packed",
        cycles(6) + 1,
        &["--sync=1", "--packed_from_level=1", "--final_clean_run=1"],
    );
}

#[test]
fn kill_9_with_the_log_off_recovers_a_flushed_prefix() {
    // Ten kills, then a run that ends cleanly: its writes since the last
    // flush must survive the clean close, with the history gone.
    crash_test(
        "disable-wal",
        cycles(10) + 1,
        &[
            "--disable_wal=1",
            "--flush_interval_ms=150",
            "--final_clean_run=1",
        ],
    );
}

/// Power cuts instead of kills: the child runs on the fault-injecting
/// file system over the disk and cuts its own power, dropping every byte
/// and directory entry not synced. Synced writes: every acknowledged
/// write survives.
#[test]
fn power_loss_with_synced_writes() {
    let out = crash_test(
        "power-sync",
        cycles(8) + 1,
        &["--power_loss=1", "--sync=1", "--final_clean_run=1"],
    );
    assert!(out.contains("power cut after"), "{out}");
}

/// Power cuts with the log on but unsynced: what survives is a prefix of
/// the writes, at least everything the last flush made durable. With a
/// whole unsynced tail dropped at each cut, some cycle must lose
/// acknowledged writes (a kill -9 would lose none: the page cache keeps
/// them), which shows the cut is real; with a random prefix kept, the
/// prefix may end anywhere.
#[test]
fn power_loss_without_sync_recovers_a_flushed_prefix() {
    let out = crash_test(
        "power-nosync",
        cycles(8),
        &["--power_loss=1", "--sync=0", "--flush_interval_ms=150"],
    );
    let lost = out.lines().filter_map(|l| {
        let rest = l.strip_prefix("verify: the database holds the first ")?;
        let mut words = rest.split(' ');
        let held: u64 = words.next()?.parse().ok()?;
        let total: u64 = words.nth(1)?.parse().ok()?;
        Some(held < total)
    });
    assert!(lost.clone().count() > 0, "no prefix verified:\n{out}");
    assert!(
        lost.into_iter().any(|l| l),
        "no power cut lost an unsynced write:\n{out}"
    );
    crash_test(
        "power-nosync-prefix",
        cycles(6) + 1,
        &[
            "--power_loss=1",
            "--sync=0",
            "--power_loss_keep_prefix=1",
            "--flush_interval_ms=150",
            "--final_clean_run=1",
        ],
    );
}

/// Manifest writes fail while the workers hold snapshots and iterators:
/// the run reopens after each failure (a deleted table the manifest names
/// fails that open), settles the writes in flight, checks that the files
/// on disk are exactly the live ones, and ends with an exact check.
#[test]
fn injected_manifest_failures_with_readers_held() {
    let dir = scratch("manifest-faults");
    let output = stress(
        "run",
        &db_flags(
            &dir,
            &[
                "--keys=2000",
                "--groups=40",
                "--threads=3",
                "--duration_ms=3000",
                "--manifest_fault_interval_ms=250",
            ],
        ),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("run:"))
        .unwrap_or_else(|| panic!("no summary in:\n{stdout}"));
    let survived: u64 = summary
        .split(", ")
        .find_map(|p| p.strip_suffix(" injected manifest failures survived"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no failure count in {summary}"));
    assert!(
        survived >= 2,
        "too few failures to mean anything: {summary}"
    );
    // The flag needs the log: a setup error otherwise.
    let output = stress(
        "run",
        &db_flags(
            &dir,
            &["--manifest_fault_interval_ms=250", "--disable_wal=1"],
        ),
    );
    assert_eq!(output.status.code(), Some(1));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_database_flags_fail_before_any_child_runs() {
    let dir = scratch("badflags");
    let output = stress(
        "crash-test",
        &[
            format!("--dir={}", dir.display()),
            "--cycles=3".into(),
            "--compression=lzma".into(),
        ],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(1),
        "a setup error:\n{stdout}\n{stderr}"
    );
    assert!(stderr.contains("--compression=lzma"), "{stderr}");
    assert!(!stderr.contains("VERIFICATION FAILED"), "{stderr}");
    assert!(
        !stdout.contains("cycle") && !stderr.contains("cycle"),
        "a child ran:\n{stdout}\n{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn verify_refuses_a_missing_expected_state_or_database() {
    let dir = scratch("verify-missing");
    let output = stress("verify", &db_flags(&dir, &[]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "a setup error: {stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    assert!(!dir.join("expected").exists() && !dir.join("db").exists());
    // A real expected state (from a short clean run), the database gone.
    let run = stress(
        "run",
        &db_flags(
            &dir,
            &[
                "--keys=100",
                "--groups=2",
                "--duration_ms=200",
                "--threads=1",
            ],
        ),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::remove_dir_all(dir.join("db")).unwrap();
    let output = stress("verify", &db_flags(&dir, &["--keys=100", "--groups=2"]));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "a setup error: {stderr}");
    assert!(stderr.contains("no such database"), "{stderr}");
    assert!(!dir.join("db").exists(), "verify made an empty database");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_database_that_lost_acknowledged_writes_fails_verify_with_status_2() {
    let dir = scratch("verify-lost");
    let db = dir.join("db");
    let shape = ["--keys=100", "--groups=2"];
    let run = stress(
        "run",
        &db_flags(
            &dir,
            &[
                &shape[..],
                &["--duration_ms=200", "--threads=1", "--sync=1"],
            ]
            .concat(),
        ),
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // Replace the database with an empty one: every acknowledged write is gone.
    std::fs::remove_dir_all(&db).unwrap();
    let mut opts = strata::Options::default();
    opts.create_if_missing(true);
    drop(strata::DB::open(&opts, &db).unwrap());
    let output = stress("verify", &db_flags(&dir, &shape));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("VERIFICATION FAILED"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
