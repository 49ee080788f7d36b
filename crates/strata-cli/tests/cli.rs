//! Every subcommand of `strata`, end to end, on databases the test builds:
//! outputs checked, exit statuses checked, damage found by `verify` and
//! `sst verify` naming the file, and bad input (no database, a locked
//! database, bad hex) with clear messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use strata::{Options, PackedTableOptions, DB};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata")
}

fn ok(args: &[&str]) -> String {
    let out = strata(args);
    assert!(
        out.status.success(),
        "strata {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn status(args: &[&str]) -> (i32, String, String) {
    let out = strata(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A database of keys k000..k099 (values v000..), flushed into tables, and
/// k050 deleted.
fn build(dir: &Path, packed: bool) {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    if packed {
        opts.set_packed_table_factory(&PackedTableOptions::default());
    }
    let db = DB::open(&opts, dir).unwrap();
    for i in 0..100 {
        db.put(format!("k{i:03}"), format!("v{i:03}")).unwrap();
    }
    db.flush().unwrap();
    db.delete("k050").unwrap();
    db.flush().unwrap();
}

#[test]
fn data_commands_read_and_write_in_every_encoding() {
    let dir = temp("data");
    build(&dir, false);
    let db = dir.to_str().unwrap();
    assert_eq!(ok(&["--db", db, "get", "k007"]), "v007\n");
    assert_eq!(status(&["--db", db, "get", "k050"]).0, 1, "deleted key");
    ok(&["--db", db, "put", "new", "value with spaces"]);
    assert_eq!(ok(&["--db", db, "get", "new"]), "value with spaces\n");
    ok(&["--db", db, "delete", "new"]);
    assert_eq!(status(&["--db", db, "get", "new"]).0, 1);
    // Hex and base64 both ways: "k001" is 6b303031.
    assert_eq!(ok(&["--db", db, "--hex", "get", "6b303031"]), "76303031\n");
    ok(&["--db", db, "--hex", "put", "00ff", "0102"]);
    assert_eq!(ok(&["--db", db, "--base64", "get", "AP8="]), "AQI=\n");
    ok(&["--db", db, "--hex", "delete", "00ff"]);
    // Scans: bounds, limit, reverse.
    assert_eq!(
        ok(&["--db", db, "scan", "--from", "k048", "--to", "k053"]),
        "k048 v048\nk049 v049\nk051 v051\nk052 v052\n"
    );
    assert_eq!(
        ok(&["--db", db, "scan", "--reverse", "--limit", "2"]),
        "k099 v099\nk098 v098\n"
    );
    assert_eq!(ok(&["--db", db, "scan"]).lines().count(), 99);
    // Dump, then load into a new database: the same scan.
    let file = dir.with_extension("dump");
    ok(&["--db", db, "dump", file.to_str().unwrap()]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().next().unwrap(), "6b303030 76303030");
    let copy = temp("data-copy");
    let copy_s = copy.to_str().unwrap();
    ok(&["--db", copy_s, "--create", "load", file.to_str().unwrap()]);
    assert_eq!(ok(&["--db", copy_s, "scan"]), ok(&["--db", db, "scan"]));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&copy);
    let _ = std::fs::remove_file(&file);
}

#[test]
fn inspection_commands_describe_the_tree_and_its_files() {
    for packed in [false, true] {
        let dir = temp(&format!("inspect-{packed}"));
        build(&dir, packed);
        let db = dir.to_str().unwrap();
        let levels = ok(&["--db", db, "levels"]);
        assert!(
            levels.starts_with("level  files        bytes\n"),
            "{levels}"
        );
        assert!(levels.contains("L0 /"), "{levels}");
        assert!(levels.contains("[k000 .. k099]"), "{levels}");
        assert!(ok(&["--db", db, "stats"]).contains("Compaction Stats"));
        let verify = ok(&["--db", db, "verify"]);
        assert!(verify.ends_with("2 table files, 0 damaged\n"), "{verify}");
        let table = dir.join(
            std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .filter(|n| n.ends_with(".sst"))
                .min()
                .unwrap(),
        );
        let t = table.to_str().unwrap();
        let dump = ok(&["sst", "dump", t]);
        let format = if packed { "packed" } else { "block-based" };
        assert!(dump.contains(&format!("{format} table")), "{dump}");
        assert!(dump.contains(" 0 with a bad checksum"), "{dump}");
        if packed {
            assert!(dump.contains("key index"), "{dump}");
        } else {
            assert!(
                dump.contains("data ") && dump.contains("properties"),
                "{dump}"
            );
        }
        let scan = ok(&["sst", "scan", t]);
        assert_eq!(scan.lines().count(), 100, "{scan}");
        assert!(scan.starts_with("k000 @ 1 value => v000\n"), "{scan}");
        assert!(ok(&["sst", "props", t]).contains("num_entries: 100"));
        assert_eq!(ok(&["sst", "verify", t]), "ok: 100 entries\n");
        ok(&["--db", db, "compact"]);
        assert!(ok(&["--db", db, "verify"]).ends_with("1 table files, 0 damaged\n"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn damage_is_found_with_the_file_named() {
    for packed in [false, true] {
        let dir = temp(&format!("damage-{packed}"));
        build(&dir, packed);
        let db = dir.to_str().unwrap();
        let levels = ok(&["--db", db, "levels"]);
        let name = levels
            .lines()
            .find(|l| l.contains("100 entries"))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap()
            .trim_start_matches('/')
            .to_string();
        let path = dir.join(&name);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[10] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let (code, out, _) = status(&["--db", db, "verify"]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("DAMAGED") && out.contains(&name), "{out}");
        assert!(out.ends_with("1 damaged\n"), "{out}");
        let (code, out, _) = status(&["sst", "verify", path.to_str().unwrap()]);
        assert_eq!(code, 1);
        assert!(out.starts_with("DAMAGED: Corruption"), "{out}");
        let (code, out, _) = status(&["sst", "dump", path.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("BAD"), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn bad_input_gets_clear_messages_and_exit_statuses() {
    let dir = temp("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    // Not a database (and not created without --create).
    let (code, _, err) = status(&["--db", d, "get", "a"]);
    assert_eq!(code, 3);
    assert!(err.contains("holds no database"), "{err}");
    // No --db.
    let (code, _, err) = status(&["get", "a"]);
    assert_eq!(code, 2);
    assert!(err.contains("--db"), "{err}");
    // Bad hex.
    ok(&["--db", d, "--create", "put", "a", "b"]);
    let (code, _, err) = status(&["--db", d, "--hex", "get", "zz"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a hex digit"), "{err}");
    // A database held by another process (here: this one): reads open it
    // read-only and work; writes need the lock and say so.
    let db = DB::open(&Options::default(), &dir).unwrap();
    db.put("held", "yes").unwrap();
    assert_eq!(ok(&["--db", d, "get", "held"]), "yes\n");
    assert!(ok(&["--db", d, "verify"]).contains("0 damaged"));
    let (code, _, err) = status(&["--db", d, "put", "a", "c"]);
    assert_eq!(code, 3);
    assert!(err.to_lowercase().contains("lock"), "{err}");
    drop(db);
    assert_eq!(ok(&["--db", d, "get", "a"]), "b\n");
    // A malformed dump line.
    let file = dir.join("bad.txt");
    std::fs::write(&file, "6b31 7631\nnot hex\n").unwrap();
    let (code, _, err) = status(&["--db", d, "load", file.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("line 2"), "{err}");
    // Unknown subcommand: clap's usage error.
    assert_eq!(status(&["--db", d, "frobnicate"]).0, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn manifest_and_wal_dumps_list_every_edit_and_write() {
    let dir = temp("logs");
    build(&dir, false);
    let d = dir.to_str().unwrap();
    // Held by this process: the manifest listing reads files only.
    let db = DB::open(&Options::default(), &dir).unwrap();
    let manifest = ok(&["--db", d, "manifest"]);
    assert!(
        manifest.lines().next().unwrap().contains("MANIFEST-"),
        "{manifest}"
    );
    assert!(
        manifest.contains("comparator=leveldb.BytewiseComparator"),
        "{manifest}"
    );
    assert!(
        manifest.contains("add L0 #") && manifest.contains("[k000 @1 .. k099 @100]"),
        "{manifest}"
    );
    db.put("w1", "one").unwrap();
    db.delete("k001").unwrap();
    drop(db);
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max()
        .unwrap();
    let wal = ok(&["wal", "dump", log.to_str().unwrap()]);
    assert!(
        wal.contains("  put w1 one\n") && wal.contains("  delete k001\n"),
        "{wal}"
    );
    assert!(wal.contains(", 1 entries\n"), "{wal}");
    let hex = ok(&["--hex", "wal", "dump", log.to_str().unwrap()]);
    assert!(hex.contains("  put 7731 6f6e65\n"), "{hex}");
    assert!(!wal.contains("follows log"), "{wal}");
    // A log a memtable switch started names the one before it.
    let db = DB::open(&Options::default(), &dir).unwrap();
    db.put("w2", "two").unwrap();
    db.flush().unwrap();
    db.put("w3", "three").unwrap();
    drop(db);
    let logs = || {
        let mut logs: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        logs.sort();
        logs
    };
    let newest = logs().pop().unwrap();
    let wal = ok(&["wal", "dump", newest.to_str().unwrap()]);
    assert!(
        wal.starts_with("follows log #") && wal.contains(" bytes when this one was started\n"),
        "{wal}"
    );
    assert!(wal.contains("  put w3 three\n"), "{wal}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn options_come_from_the_database_or_a_file() {
    // A database ordered in reverse: opened with default options it would
    // be refused (comparator mismatch); its OPTIONS file says how.
    let dir = temp("options");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_comparator_object(std::sync::Arc::new(strata::ReverseBytewiseComparator));
    let db = DB::open(&opts, &dir).unwrap();
    for k in ["a", "b", "c"] {
        db.put(k, k).unwrap();
    }
    drop(db);
    let text = std::fs::read_to_string(dir.join("OPTIONS")).unwrap();
    assert!(
        text.contains("comparator = \"rocksdb.ReverseBytewiseComparator\""),
        "{text}"
    );
    let d = dir.to_str().unwrap();
    assert_eq!(ok(&["--db", d, "scan"]), "c c\nb b\na a\n");
    // An explicit file wins: the default comparator is refused by the
    // database, with both names.
    let file = dir.with_extension("toml");
    std::fs::write(&file, "write_buffer_size = 1048576\n").unwrap();
    let (code, _, err) = status(&["--db", d, "--options-file", file.to_str().unwrap(), "scan"]);
    assert_eq!(code, 3);
    assert!(err.contains("ReverseBytewise"), "{err}");
    // A malformed file names the key.
    std::fs::write(&file, "write_buffer_sise = 1\n").unwrap();
    let (code, _, err) = status(&["--db", d, "--options-file", file.to_str().unwrap(), "scan"]);
    assert_eq!(code, 3);
    assert!(err.contains("write_buffer_sise: unknown key"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&file);
}

#[test]
fn checkpoint_makes_an_openable_copy() {
    let dir = temp("checkpoint");
    let db = dir.join("db");
    build(&db, false);
    let db_s = db.to_str().unwrap();
    ok(&["--db", db_s, "put", "unflushed", "yes"]);
    let copy = dir.join("copy");
    let copy_s = copy.to_str().unwrap();
    let out = ok(&["--db", db_s, "checkpoint", copy_s]);
    assert!(out.contains("checkpoint written"), "{out}");
    assert_eq!(ok(&["--db", copy_s, "get", "k007"]), "v007\n");
    assert_eq!(ok(&["--db", copy_s, "get", "unflushed"]), "yes\n");
    assert_eq!(
        ok(&["--db", copy_s, "scan"]),
        ok(&["--db", db_s, "scan"]),
        "the copy holds what the source holds"
    );
    ok(&["--db", copy_s, "verify"]);
    // A second checkpoint into the same directory is refused, with the reason.
    let (code, _, err) = status(&["--db", db_s, "checkpoint", copy_s]);
    assert_ne!(code, 0);
    assert!(err.contains("already exists"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sst_scan_lists_range_deletions() {
    let dir = temp("range-del");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    let db = DB::open(&opts, &dir).unwrap();
    for i in 0..10 {
        db.put(format!("k{i}"), "v").unwrap();
    }
    db.delete_range("k2", "k5").unwrap();
    db.flush().unwrap();
    drop(db);
    let table = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let scan = ok(&["sst", "scan", table.to_str().unwrap()]);
    assert!(scan.ends_with("k2 @ 11 range deletion => k5\n"), "{scan}");
    let db = dir.to_str().unwrap();
    assert_eq!(
        status(&["--db", db, "get", "k3"]).0,
        1,
        "deleted by the range"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn column_families_are_listed_and_each_is_reachable_with_cf() {
    let dir = temp("cf");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.create_missing_column_families(true);
    {
        let db = DB::open_cf(&opts, &dir, ["users"]).unwrap();
        db.put(b"k", b"in-default").unwrap();
        db.put_cf(db.cf_handle("users").unwrap(), b"k", b"in-users")
            .unwrap();
        db.flush_cf(db.cf_handle("users").unwrap()).unwrap();
    }
    let db = dir.to_str().unwrap();
    assert_eq!(ok(&["--db", db, "list-cf"]), "default\nusers\n");
    assert_eq!(ok(&["--db", db, "get", "k"]), "in-default\n");
    assert_eq!(ok(&["--db", db, "--cf", "users", "get", "k"]), "in-users\n");
    ok(&["--db", db, "--cf", "users", "put", "k2", "v2"]);
    assert_eq!(
        ok(&["--db", db, "--cf", "users", "scan"]),
        "k in-users\nk2 v2\n"
    );
    assert_eq!(ok(&["--db", db, "scan"]), "k in-default\n");
    let levels = ok(&["--db", db, "--cf", "users", "levels"]);
    assert!(levels.contains("L0 "), "{levels}");
    let manifest = ok(&["--db", db, "manifest"]);
    assert!(
        manifest.contains("column_family=1 add_column_family=\"users\""),
        "{manifest}"
    );
    let (code, _, err) = status(&["--db", db, "--cf", "nope", "get", "k"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nope"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
