//! The short crash test CI runs: the `strata-stress` binary kills its own
//! stress runs with SIGKILL at random moments and verifies the database
//! after each kill, with the log synced and with the log off (prefix
//! mode). `STRATA_CRASH_TEST_CYCLES=<n>` runs more cycles of each.

use std::path::PathBuf;
use std::process::Command;

fn cycles(default: u32) -> u32 {
    std::env::var("STRATA_CRASH_TEST_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `cycles` kill cycles (plus a clean last run if `extra` asks).
fn crash_test(name: &str, cycles: u32, extra: &[&str]) {
    let dir: PathBuf =
        std::env::temp_dir().join(format!("strata-crash-test-{name}-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_strata-stress"))
        .arg("crash-test")
        .arg(format!("--dir={}", dir.display()))
        .arg(format!("--cycles={cycles}"))
        .args([
            "--kill_min_ms=100",
            "--kill_max_ms=700",
            "--keys=2000",
            "--groups=40",
            "--threads=3",
            "--seed=1",
        ])
        .args(extra)
        .output()
        .expect("strata-stress runs");
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
}

#[test]
fn kill_9_with_synced_writes() {
    // Ten kills, then a run that ends cleanly with an exact check.
    crash_test("sync", cycles(10) + 1, &["--sync=1", "--final_clean_run=1"]);
}

#[test]
fn kill_9_with_the_log_off_recovers_a_flushed_prefix() {
    crash_test(
        "disable-wal",
        cycles(10),
        &["--disable_wal=1", "--flush_interval_ms=150"],
    );
}
