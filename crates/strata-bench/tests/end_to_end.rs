//! Every benchmark name, run through the library entry point on a tiny
//! database, and the binary's command-line errors.

use std::process::Command;

use strata_bench::BENCHMARKS;

/// Runs the tool; returns its report.
fn run(args: &[String]) -> String {
    let mut out = Vec::new();
    if let Err(e) = strata_bench::run(args, &mut out) {
        panic!("{args:?} failed: {e}\n{}", String::from_utf8_lossy(&out));
    }
    String::from_utf8(out).expect("utf-8 report")
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The result line of `name`, checked against db_bench's layout.
fn result_line<'a>(out: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name:<12} : ");
    let line = out
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {name} line in:\n{out}"));
    let rest = &line[prefix.len()..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    assert!(fields.len() >= 8, "{line}");
    assert!(
        fields[0].parse::<f64>().is_ok() && fields[1] == "micros/op",
        "{line}"
    );
    assert!(
        fields[2].parse::<u64>().is_ok() && fields[3] == "ops/sec",
        "{line}"
    );
    assert!(
        fields[4].parse::<f64>().is_ok() && fields[5] == "seconds",
        "{line}"
    );
    assert!(
        fields[6].parse::<u64>().is_ok() && fields[7].starts_with("operations;"),
        "{line}"
    );
    line
}

fn ops(line: &str) -> u64 {
    let t: Vec<&str> = line.split_whitespace().collect();
    let i = t.iter().position(|w| w.starts_with("operations;")).unwrap();
    t[i - 1].parse().unwrap()
}

/// W5: fillmvcc writes rows of versions; mvccscan visits each row's
/// newest version once with every step, and all agree on what they saw.
#[test]
fn mvcc_fill_and_every_scan_method() {
    mvcc_scans(
        "strata",
        &["next", "next_prefix", "prev_prefix", "seek_successor"],
    );
}

#[cfg(feature = "rocksdb")]
#[test]
fn mvcc_fill_and_scans_on_rocksdb() {
    mvcc_scans("rocksdb", &["next", "seek_successor"]);
    // RocksDB has no prefix steps: a clear refusal.
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    let a = args(&[
        "--engine=rocksdb",
        "--benchmarks=fillmvcc,mvccscan",
        "--num=100",
        "--scan_method=next_prefix",
    ]);
    let mut a = a;
    a.push(format!("--db={}", dir.path().join("db").display()));
    let e = strata_bench::run(&a, &mut out).unwrap_err().to_string();
    assert!(e.contains("no prefix steps"), "{e}");
}

fn mvcc_scans(engine: &str, methods: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let common = |extra: &[String]| {
        let mut a = vec![
            format!("--engine={engine}"),
            format!("--db={}", db.display()),
            "--num=30000".into(),
            "--versions_per_key=30".into(),
            "--value_size=10".into(),
            "--write_buffer_size=65536".into(),
            "--target_file_size_base=65536".into(),
            "--compression_type=none".into(),
            "--seed=3".into(),
        ];
        a.extend_from_slice(extra);
        a
    };
    let out = run(&common(&[
        "--benchmarks=fillmvcc,flush".into(),
        "--batch_size=100".into(),
    ]));
    let fill = result_line(&out, "fillmvcc");
    assert_eq!(ops(fill), 30000, "{fill}");
    assert!(fill.ends_with("(1000 rows of 30 versions)"), "{fill}");
    let mut checksums = Vec::new();
    for m in methods {
        let out = run(&common(&[
            "--use_existing_db=1".into(),
            "--benchmarks=mvccscan".into(),
            format!("--scan_method={m}"),
        ]));
        let line = result_line(&out, "mvccscan");
        assert_eq!(ops(line), 1000, "{line}");
        assert!(
            line.contains(&format!("{m} over 1000 rows of 30 versions")),
            "{line}"
        );
        let sum = line
            .rsplit("checksum ")
            .next()
            .unwrap()
            .trim_end_matches(')')
            .to_string();
        checksums.push(sum);
    }
    assert!(checksums.windows(2).all(|w| w[0] == w[1]), "{checksums:?}");
    // A database written with other flags is refused, not miscounted.
    let mut a = vec![];
    a.extend(common(&[
        "--use_existing_db=1".into(),
        "--benchmarks=mvccscan".into(),
    ]));
    a.retain(|x| !x.starts_with("--versions_per_key"));
    a.push("--versions_per_key=10".into());
    let mut out = Vec::new();
    let e = strata_bench::run(&a, &mut out).unwrap_err().to_string();
    assert!(
        e.contains("not the newest version") || e.contains("visited"),
        "{e}"
    );
}

/// fillseqingest writes table files and ingests them: every key is then
/// found; checkpoint reports its tables hard-linked.
#[test]
fn fill_by_ingestion_and_checkpoint() {
    ingestion("strata");
}

#[cfg(feature = "rocksdb")]
#[test]
fn fill_by_ingestion_and_checkpoint_on_rocksdb() {
    ingestion("rocksdb");
}

fn ingestion(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = run(&args(&[
        &format!("--engine={engine}"),
        &format!("--db={}", db.display()),
        "--num=3000",
        "--reads=3000",
        "--target_file_size_base=65536",
        "--benchmarks=fillseqingest,readrandom,readseq,checkpoint",
    ]));
    let fill = out
        .lines()
        .find(|l| l.starts_with("fillseqingest : "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(fill.contains(" 3000 operations;"), "{fill}");
    assert!(fill.contains("tables written in"), "{fill}");
    assert!(
        result_line(&out, "readrandom").contains("(3000 of 3000 found)"),
        "{out}"
    );
    assert_eq!(ops(result_line(&out, "readseq")), 3000);
    let cp = out
        .lines()
        .find(|l| l.starts_with("checkpoint   : "))
        .unwrap_or_else(|| panic!("{out}"));
    let linked: u64 = cp.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert!(linked > 3000 * 16, "{cp}");
    assert!(!db.with_extension("checkpoint").exists());
    assert!(!db.with_extension("ingest").exists());
}

#[test]
fn every_benchmark_on_a_tiny_database() {
    every_benchmark("strata");
}

#[cfg(feature = "rocksdb")]
#[test]
fn every_benchmark_on_a_tiny_rocksdb_database() {
    every_benchmark("rocksdb");
}

fn every_benchmark(engine: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let common = [
        format!("--engine={engine}"),
        format!("--db={}", db.display()),
        "--num=2000".into(),
        "--key_size=8".into(),
        "--value_size=32".into(),
        "--write_buffer_size=65536".into(),
        "--target_file_size_base=65536".into(),
        "--max_bytes_for_level_base=262144".into(),
        "--compression_type=snappy".into(),
        "--bloom_bits=10".into(),
        "--seed=7".into(),
    ];
    let benches: Vec<&str> = BENCHMARKS
        .iter()
        .copied()
        // W5's benchmarks write and read their own key layout: their own
        // test below.
        .filter(|b| {
            !matches!(
                *b,
                "waitforcompaction"
                    | "fillmvcc"
                    | "mvccscan"
                    | "mergerandom"
                    | "readrandommergerandom"
                    | "fillseqingest"
                    | "checkpoint"
            )
        })
        .collect();
    // Fill first, so the read benchmarks have data; filluniquerandom runs
    // last among the fills so that every key exists for the reads.
    let order = "fillseq,fillrandom,fillsync,fillseekseq,filluniquerandom,overwrite,appendseq,flush,readseq,readreverse,\
                 readrandom,multireadrandom,readmissing,seekrandom,readwhilewriting,compact,stats,levelstats,sstables,memstats,deleterandom";
    for b in &benches {
        assert!(order.split(',').any(|o| o == *b), "{b} not covered");
    }
    let mut a = common.to_vec();
    a.push(format!("--benchmarks={order}"));
    a.push("--threads=2".into());
    a.push("--seek_nexts=5".into());
    a.push("--batch_size=1".into());
    a.push("--histogram=1".into());
    let out = run(&a);
    assert!(
        out.contains("Keys:       8 bytes each (+ 0 bytes user-defined timestamp)\n"),
        "{out}"
    );
    assert!(
        out.contains("Values:     32 bytes each (16 bytes after compression)\n"),
        "{out}"
    );
    assert!(out.contains("Entries:    2000\n"), "{out}");
    assert!(out.contains("Compression: Snappy\n"), "{out}");
    for b in [
        "fillseq",
        "fillrandom",
        "filluniquerandom",
        "overwrite",
        "readseq",
        "readreverse",
        "fillseekseq",
        "compact",
    ] {
        result_line(&out, b);
    }
    // Two threads each write --num keys (db_bench's meaning of --threads);
    // filluniquerandom runs one thread.
    assert_eq!(ops(result_line(&out, "fillseq")), 4000);
    assert_eq!(ops(result_line(&out, "filluniquerandom")), 2000);
    let fillsync = result_line(&out, "fillsync");
    assert!(fillsync.contains("(2 ops)"), "{fillsync}");
    // Every key exists after filluniquerandom: all found. 2 threads x 2000
    // operations; the message is one thread's, as db_bench merges it.
    let rr = result_line(&out, "readrandom");
    assert_eq!(ops(rr), 4000, "{rr}");
    assert!(rr.ends_with("(2000 of 2000 found)"), "{rr}");
    assert!(
        out.contains("(2000 of 2000 found)\n\n"),
        "db_bench leaves an empty line"
    );
    let mr = result_line(&out, "multireadrandom");
    assert_eq!(ops(mr), 4000, "{mr}");
    assert!(mr.ends_with("(2000 of 2000 found)"), "{mr}");
    let rm = result_line(&out, "readmissing");
    assert!(rm.ends_with("(0 of 2000 found)"), "{rm}");
    let sr = result_line(&out, "seekrandom");
    assert!(sr.ends_with("(2000 of 2000 found)"), "{sr}");
    // readwhilewriting reports its 2 readers, not its writer.
    let rww = result_line(&out, "readwhilewriting");
    assert_eq!(ops(rww), 4000, "{rww}");
    assert_eq!(ops(result_line(&out, "readseq")), 4000);
    assert_eq!(ops(result_line(&out, "deleterandom")), 4000);
    assert!(out.contains("flush memtable\n"), "{out}");
    assert!(out.contains("** Compaction Stats"), "stats: {out}");
    assert!(out.contains("Level Files Size(MB)"), "levelstats: {out}");
    // memstats: each property a number; after the reads the table readers
    // hold their indexes and filters (bloom_bits=10) outside the cache.
    let mem = |name: &str| -> u64 {
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("memstats {name}: {out}"));
        line.parse()
            .unwrap_or_else(|_| panic!("memstats {name}: {line}"))
    };
    assert!(mem("estimate-table-readers-mem") > 0);
    assert!(mem("block-cache-usage") > 0);
    assert!(mem("block-cache-capacity") >= mem("block-cache-usage"));
    mem("cur-size-all-mem-tables");
    // On glibc, the allocator's heap: some of it in use, the parts adding up.
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("malloc-heap: "))
            .unwrap_or_else(|| panic!("memstats malloc-heap: {out}"));
        let nums: Vec<f64> = line
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter_map(|w| w.parse().ok())
            .collect();
        let [system, arenas, mapped, in_use, free] = nums[..] else {
            panic!("malloc-heap: {line}")
        };
        assert!(in_use > 0.0 && in_use <= system, "{line}");
        assert!((arenas + mapped - system).abs() < 0.2, "{line}");
        assert!((in_use + free - system).abs() < 0.2, "{line}");
    }
    assert!(
        out.contains("Microseconds per read:\nCount: "),
        "histogram: {out}"
    );
    assert!(out.contains("Microseconds per seek:\n"), "histogram: {out}");
    assert!(out.contains("Percentiles: P50: "), "histogram: {out}");

    // The existing database: fills are skipped, reads see the data left by
    // deleterandom, waitforcompaction runs.
    let mut a = common.to_vec();
    a.push("--benchmarks=fillseq,readseq,waitforcompaction,readrandom".into());
    a.push("--use_existing_db=1".into());
    let out = run(&a);
    assert!(
        out.contains("fillseq      : skipped (--use_existing_db is true)\n"),
        "{out}"
    );
    assert!(out.contains("waitforcompaction("), "{out}");
    assert!(out.contains("): finished with status (OK)\n"), "{out}");
    let rr = result_line(&out, "readrandom");
    assert!(
        !rr.contains("(2000 of 2000 found)") && !rr.contains("(0 of 2000 found)"),
        "some keys were deleted: {rr}"
    );

    // The merge benchmarks: a merge operator is required; with one,
    // counters of 8-byte values over 100 keys.
    let mut a = common.to_vec();
    a.push("--benchmarks=mergerandom".into());
    let mut sink = Vec::new();
    let e = strata_bench::run(&a, &mut sink).unwrap_err().to_string();
    assert!(e.contains("needs --merge_operator"), "{e}");
    let mut a = common.to_vec();
    a.retain(|f| !f.starts_with("--value_size"));
    a.push("--value_size=8".into());
    a.push("--merge_operator=uint64add".into());
    a.push("--merge_keys=100".into());
    a.push("--threads=2".into());
    a.push("--benchmarks=mergerandom,readrandommergerandom,flush,compact,readrandom".into());
    let out = run(&a);
    let m = result_line(&out, "mergerandom");
    assert_eq!(ops(m), 4000, "{m}");
    assert!(m.ends_with("( updates:2000)"), "{m}");
    let rm = result_line(&out, "readrandommergerandom");
    assert_eq!(ops(rm), 4000, "{rm}");
    assert!(
        rm.contains(" total:2000 ") && rm.ends_with("maxlength:8)"),
        "{rm}"
    );
    // readrandom reads keys of the whole --num space: the 100 merged ones
    // (every one of which mergerandom's 4000 merges reached) are found.
    let rr = result_line(&out, "readrandom");
    let found: u64 = rr
        .rsplit('(')
        .next()
        .and_then(|m| m.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{rr}"));
    assert!(found > 0 && found < 2000, "{rr}");
}

#[test]
fn multireadrandom_batches_strides_and_both_calls() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    run(&args(&[
        &format!("--db={}", db.display()),
        "--benchmarks=fillseq,flush",
        "--num=5000",
        "--key_size=16",
        "--value_size=20",
        "--write_buffer_size=65536",
        "--compression_type=none",
    ]));
    for batched in ["0", "1"] {
        for stride in ["0", "16"] {
            let out = run(&args(&[
                &format!("--db={}", db.display()),
                "--benchmarks=multireadrandom",
                "--use_existing_db=1",
                "--num=5000",
                "--reads=1000",
                "--key_size=16",
                "--batch_size=32",
                &format!("--multiread_stride={stride}"),
                &format!("--multiread_batched={batched}"),
                // W3's table options: index and filter in the block cache.
                "--cache_index_and_filter_blocks=1",
                "--pin_l0_filter_and_index_blocks_in_cache=1",
                "--bloom_bits=10",
                "--seed=11",
            ]));
            // As db_bench: batches run while the count stays within
            // --reads (31 x 32), each key one operation, every key found.
            let line = result_line(&out, "multireadrandom");
            assert_eq!(ops(line), 992, "{line}");
            assert!(line.ends_with("(992 of 992 found)"), "{line}");
        }
    }
    // Keys past --num are missing: a stride that runs off the end clamps
    // the group's start back inside (db_bench's rule), so all are found.
    let out = run(&args(&[
        &format!("--db={}", db.display()),
        "--benchmarks=multireadrandom",
        "--use_existing_db=1",
        "--num=5000",
        "--reads=640",
        "--key_size=16",
        "--batch_size=64",
        "--multiread_stride=70",
        "--multiread_batched=1",
    ]));
    let line = result_line(&out, "multireadrandom");
    assert!(line.ends_with("(640 of 640 found)"), "{line}");
}

#[test]
fn prefixes_batches_and_duration() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let out = run(&args(&[
        &format!("--db={}", db.display()),
        "--benchmarks=fillseq,readrandom,fillrandom,seekrandom",
        "--num=1000",
        "--key_size=16",
        "--keys_per_prefix=250",
        "--prefix_size=8",
        "--batch_size=10",
        "--multiread_stride=3",
        "--use_data_block_hash_index=1",
        "--compression_type=none",
        "--seed=3",
    ]));
    assert_eq!(ops(result_line(&out, "fillseq")), 1000);
    // Strided groups of 10 stay inside the key space: all found.
    assert!(
        result_line(&out, "readrandom").ends_with("(1000 of 1000 found)"),
        "{out}"
    );
    result_line(&out, "seekrandom");

    let out = run(&args(&[
        &format!("--db={}", db.display()),
        "--benchmarks=readrandom",
        "--use_existing_db=1",
        "--num=1000",
        "--duration=1",
        "--key_size=16",
        "--keys_per_prefix=250",
        "--prefix_size=8",
        "--compression_type=none",
        "--stats_interval_seconds=1",
    ]));
    let line = result_line(&out, "readrandom");
    assert!(
        line.contains(" 1.0") || line.contains(" 1.1"),
        "ran for about a second: {line}"
    );
    assert!(
        out.starts_with("Set seed to "),
        "seed 0 is taken from the clock: {out}"
    );
}

#[test]
fn temporary_database_is_removed_unless_kept() {
    let path_of = |out: &str| {
        let l = out
            .lines()
            .find(|l| l.starts_with("DB path: ["))
            .expect("DB path line");
        std::path::PathBuf::from(&l["DB path: [".len()..l.len() - 1])
    };
    let out = run(&args(&["--benchmarks=fillseq", "--num=100", "--seed=1"]));
    let p = path_of(&out);
    if std::path::Path::new("/dev/shm").is_dir() {
        assert!(p.starts_with("/dev/shm"), "{}", p.display());
    }
    assert!(!p.exists(), "{} was not removed", p.display());
    let out = run(&args(&[
        "--benchmarks=fillseq",
        "--num=100",
        "--seed=1",
        "--keep_db=1",
    ]));
    let p = path_of(&out);
    assert!(p.exists(), "{} was not kept", p.display());
    std::fs::remove_dir_all(p.parent().unwrap()).unwrap();
}

#[test]
fn unsupported_and_unknown_requests_are_errors() {
    let err = |a: &[&str]| {
        let mut out = Vec::new();
        strata_bench::run(&args(a), &mut out)
            .expect_err("must fail")
            .to_string()
    };
    let e = err(&["--benchmarks=fillseq", "--perf_level=2"]);
    assert!(e.contains("not supported"), "{e}");
    let e = err(&["--benchmarks=readrandm"]);
    assert!(
        e.contains("unknown benchmark 'readrandm'; did you mean readrandom?"),
        "{e}"
    );
    let e = err(&["--compression_type=zlib"]);
    assert!(e.contains("not supported"), "{e}");
    let e = err(&["--keys_per_prefix=10", "--num=5"]);
    assert!(e.contains("keys_per_prefix"), "{e}");
    if !cfg!(feature = "rocksdb") {
        let e = err(&["--engine=rocksdb"]);
        assert!(e.contains("--features rocksdb"), "{e}");
    }
}

#[test]
fn a_fresh_database_is_never_made_over_a_directory_that_holds_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("000001.log");
    std::fs::write(&precious, b"not a benchmark's").unwrap();
    let mut out = Vec::new();
    let e = strata_bench::run(
        &args(&[
            &format!("--db={}", dir.path().display()),
            "--benchmarks=fillseq",
            "--num=10",
        ]),
        &mut out,
    )
    .expect_err("must refuse")
    .to_string();
    assert!(e.contains("no database (no CURRENT file)"), "{e}");
    assert!(precious.exists(), "the file was deleted");
    let e = strata_bench::run(
        &args(&[
            &format!("--db={}", precious.display()),
            "--benchmarks=fillseq",
            "--num=10",
        ]),
        &mut out,
    )
    .expect_err("must refuse")
    .to_string();
    assert!(e.contains("is a file, not a database directory"), "{e}");
}

#[test]
fn binary_reports_unknown_flags_with_a_suggestion() {
    let out = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .args(["--benchmarks=fillseq", "-num_keys=10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown flag --num_keys; did you mean --num?"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "nothing runs");
    let help = Command::new(env!("CARGO_BIN_EXE_strata-bench"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("--compression_ratio"));
}

#[test]
fn use_existing_db_without_db_is_a_usage_error() {
    let mut out = Vec::new();
    let a = args(&["--benchmarks=readrandom", "--use_existing_db=1", "--num=10"]);
    let err = strata_bench::run(&a, &mut out).unwrap_err();
    assert!(
        err.to_string().contains("--use_existing_db=1 needs --db"),
        "{err}"
    );
}

#[test]
fn huge_multiread_strides_clamp_instead_of_overflowing() {
    let out = run(&args(&[
        "--benchmarks=fillseq,readrandom",
        "--num=200",
        "--reads=40",
        "--batch_size=4",
        "--multiread_stride=9223372036854775807",
    ]));
    assert_eq!(ops(result_line(&out, "readrandom")), 40);
}

/// The output says what could be misread: where the database lives, and
/// that readrandom after fillrandom finds about 63% of its keys because
/// random keys repeat (not because data was lost); no rate-limit lines.
#[test]
fn output_explains_itself() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    let out = run(&args(&[
        "--benchmarks=fillrandom,readrandom",
        "--num=2000",
        "--seed=5",
        &db,
    ]));
    // Every header line is on the report, in db_bench's order.
    let header: Vec<&str> = out.lines().take_while(|l| !l.starts_with("----")).collect();
    let starts = [
        "Strata:     version",
        "Date:",
        "Keys:",
        "Values:",
        "Entries:",
        "Storage:    ",
    ];
    let mut at = 0;
    for start in starts {
        let found = header[at..].iter().position(|l| l.starts_with(start));
        at += found.unwrap_or_else(|| panic!("no {start:?} after line {at} in:\n{out}"));
    }
    assert!(
        !out.contains("Write rate") && !out.contains("Read rate"),
        "{out}"
    );
    let note = out
        .lines()
        .find(|l| l.starts_with("  note: readrandom"))
        .unwrap_or_else(|| panic!("no note in:\n{out}"));
    assert!(note.contains("about 63% of the key space exists"), "{note}");
    let out = run(&args(&[
        "--benchmarks=fillseq,readrandom",
        "--num=2000",
        "--seed=5",
        &db,
    ]));
    assert!(!out.contains("note:"), "{out}");
    let mut sink = Vec::new();
    let e = strata_bench::run(&args(&["--key_size=0", &db]), &mut sink)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--key_size must be positive"), "{e}");
}

/// W4's sequential runs: fillseq into the middle of the key space, then
/// appendseq (ours) into the existing database below and above it, with
/// --key_offset; a scan sees every key once, and the partitioner and
/// cutting flags are accepted.
#[test]
fn sequential_runs_with_key_offsets_fill_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    let common = [
        db.as_str(),
        "--num=1000",
        "--key_size=16",
        "--value_size=10",
        "--sst_partitioner_fixed_prefix=4",
        "--stream_aware_cutting=0",
    ];
    let with = |extra: &[&str]| {
        let mut a = args(&common);
        a.extend(args(extra));
        run(&a)
    };
    with(&["--benchmarks=fillseq", "--key_offset=1000"]);
    let low = with(&["--benchmarks=appendseq", "--use_existing_db=1"]);
    assert_eq!(ops(result_line(&low, "appendseq")), 1000);
    with(&[
        "--benchmarks=appendseq",
        "--use_existing_db=1",
        "--key_offset=2000",
    ]);
    let scan = with(&[
        "--benchmarks=readseq",
        "--use_existing_db=1",
        "--num=3000",
        "--reads=100000",
    ]);
    let line = result_line(&scan, "readseq");
    assert_eq!(ops(line), 3000, "{line}");
    // A fill benchmark still refuses an existing database.
    let skipped = with(&["--benchmarks=fillseq", "--use_existing_db=1"]);
    assert!(
        skipped.contains("fillseq      : skipped (--use_existing_db is true)"),
        "{skipped}"
    );
}

#[test]
fn options_file_replaces_the_option_flags_and_bad_ones_are_usage_errors() {
    let dir = std::env::temp_dir().join(format!("strata-bench-options-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("opts.toml");
    std::fs::write(
        &file,
        "write_buffer_size = 131072\n[packed_table_factory]\nfrom_level = 0\n",
    )
    .unwrap();
    let db = dir.join("db");
    let out = run(&args(&[
        "--benchmarks=fillseq,flush,readrandom",
        "--num=2000",
        "--seed=1",
        &format!("--options_file={}", file.display()),
        &format!("--db={}", db.display()),
        "--keep_db=1",
    ]));
    assert!(
        result_line(&out, "readrandom").contains("(2000 of 2000 found)"),
        "{out}"
    );
    // The database ran with the file's options: its OPTIONS says so, and
    // its tables are packed.
    let written = std::fs::read_to_string(db.join("OPTIONS")).unwrap();
    assert!(written.contains("write_buffer_size = 131072"), "{written}");
    assert!(written.contains("[packed_table_factory]"), "{written}");
    let tables: Vec<_> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    assert!(!tables.is_empty());
    assert!(tables
        .iter()
        .all(|t| std::fs::read(t).unwrap().ends_with(b"STRATAP1")));
    std::fs::write(&file, "write_buffer_sise = 1\n").unwrap();
    let mut sink = Vec::new();
    let err = strata_bench::run(
        &args(&[
            "--benchmarks=fillseq",
            "--num=10",
            &format!("--options_file={}", file.display()),
        ]),
        &mut sink,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("write_buffer_sise: unknown key"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
