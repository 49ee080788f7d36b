//! The web view: every page over HTTP checked against the database, and
//! the dashboard of `strata web` loaded in headless Chromium (Debian's
//! `chromium`): its content must match the database. `.ci/run` installs
//! Chromium and sets STRATA_REQUIRE_BROWSER_TEST=1, so there a missing
//! browser fails the test; elsewhere (a newcomer's `cargo test --workspace`
//! on a machine without Chromium) only the browser check is skipped, with a
//! message.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata::{Options, PackedTableOptions, DB};

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("strata-web-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn build(dir: &Path) {
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(64 << 10);
    let mut p = PackedTableOptions::default();
    p.set_from_level(1);
    opts.set_packed_table_factory(&p);
    let db = DB::open(&opts, dir).unwrap();
    for i in 0..5000u64 {
        db.put(i.to_be_bytes(), [7u8; 30]).unwrap();
    }
    db.flush().unwrap();
    db.compact_range::<&[u8], &[u8]>(None, None).unwrap();
    for i in 0..500u64 {
        db.put((i * 7).to_be_bytes(), [8u8; 30]).unwrap();
    }
    db.flush().unwrap();
}

/// GET `path`: (status, body).
fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[test]
fn every_page_matches_the_database() {
    let dir = temp("pages");
    build(&dir);
    let db = Arc::new(DB::open(&Options::default(), &dir).unwrap());
    let files = db.live_files().unwrap();
    assert!(files.iter().any(|f| f.level == 0) && files.iter().any(|f| f.level > 0));
    let view = strata_cli::web::serve(db.clone(), "127.0.0.1:0").unwrap();
    assert!(view.addr().ip().is_loopback());
    let (status, home) = get(view.addr(), "/");
    assert_eq!(status, 200);
    let total: usize = files.iter().map(|f| f.size).sum();
    assert!(
        home.contains(&format!("{} table files, {total} bytes", files.len())),
        "{home}"
    );
    for f in &files {
        let name = f.name.trim_start_matches('/');
        assert!(
            home.contains(&format!("data-level=\"{}\" data-file=\"{name}\"", f.level)),
            "{name}"
        );
    }
    assert!(home.contains("Compaction Stats"));
    // JSON: the same files.
    let (status, json) = get(view.addr(), "/api/state.json");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let listed = v["files"].as_array().unwrap();
    assert_eq!(listed.len(), files.len());
    for (j, f) in listed.iter().zip(&files) {
        assert_eq!(j["name"], f.name.as_str());
        assert_eq!(j["size"], f.size);
        assert_eq!(j["entries"], f.num_entries);
    }
    // A page per table, in its format.
    for f in &files {
        let name = f.name.trim_start_matches('/');
        let (status, page) = get(view.addr(), &format!("/table/{name}"));
        assert_eq!(status, 200, "{page}");
        let format = if f.level >= 1 {
            "packed table"
        } else {
            "block-based table"
        };
        assert!(page.contains(format), "{name}: {page}");
        assert!(
            page.contains(&format!("num_entries: {}", f.num_entries)),
            "{page}"
        );
    }
    assert_eq!(get(view.addr(), "/nope").0, 404);
    assert_eq!(get(view.addr(), "/table/..%2FCURRENT").0, 500);
    drop(view);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_dashboard_in_headless_chromium_shows_the_database() {
    let have_chromium = Command::new("chromium")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_chromium {
        assert!(
            std::env::var_os("STRATA_REQUIRE_BROWSER_TEST").is_none(),
            "chromium is not installed, and STRATA_REQUIRE_BROWSER_TEST is set"
        );
        eprintln!(
            "chromium is not installed: the browser check is skipped (apt-get install chromium)"
        );
        return;
    }
    let dir = temp("browser");
    build(&dir);
    let files = DB::open_for_read_only(&Options::default(), &dir, false)
        .unwrap()
        .live_files()
        .unwrap();
    // The tool itself, read-only, on a free port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--db", dir.to_str().unwrap(), "web", "--addr", &addr])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while TcpStream::connect(&addr).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "strata web did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("http://{addr}/"))
        .output();
    let _ = server.kill();
    let _ = server.wait();
    let out = out.expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains(&format!("{} table files", files.len())),
        "{}\n{dom}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The browser parsed the SVG: one rect per file, each named.
    assert_eq!(dom.matches("class=\"file\"").count(), files.len(), "{dom}");
    for f in &files {
        assert!(dom.contains(&format!("data-file=\"{}\"", f.name.trim_start_matches('/'))));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plots_follow_a_database_being_written() {
    let dir = temp("live");
    let mut opts = Options::default();
    opts.create_if_missing(true);
    opts.set_write_buffer_size(64 << 10);
    let db = Arc::new(DB::open(&opts, &dir).unwrap());
    let view = strata_cli::web::serve(db.clone(), "127.0.0.1:0").unwrap();
    // Writes for about 2.5 seconds: the sampler takes one a second.
    let start = Instant::now();
    let mut i = 0u64;
    while start.elapsed() < Duration::from_millis(2500) {
        db.put(i.to_be_bytes(), [3u8; 100]).unwrap();
        assert!(db.get((i / 2).to_be_bytes()).unwrap().is_some());
        if i.is_multiple_of(100) {
            let mut it = db.raw_iterator();
            it.seek_to_first();
            for _ in 0..10 {
                it.next();
            }
        }
        i += 1;
        if i.is_multiple_of(1000) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    std::thread::sleep(Duration::from_millis(1100));
    let (_, json) = get(view.addr(), "/api/state.json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let history = v["history"].as_array().unwrap();
    assert!(history.len() >= 3, "{json}");
    let first = history[0]["user_bytes"].as_u64().unwrap();
    let last = history[history.len() - 1]["user_bytes"].as_u64().unwrap();
    assert!(last > first, "user bytes grew: {first} -> {last}");
    let user: u64 = db
        .property_value("strata.user-bytes-written")
        .unwrap()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(last, user, "the last sample is the database's counter");
    assert!(
        history[history.len() - 1]["written_bytes"]
            .as_u64()
            .unwrap()
            > 0
    );
    let (_, home) = get(view.addr(), "/");
    let newest = &history[history.len() - 1];
    let reads = newest["point_reads"].as_u64().unwrap();
    assert!(reads > 0 && reads <= i, "point reads {reads} of {i} gets");
    let steps = newest["iterator_steps"].as_u64().unwrap();
    assert!(
        steps > 0 && steps <= (i / 100 + 1) * 11,
        "iterator steps {steps}"
    );
    assert!(newest["flushes"].as_u64().unwrap() > 0, "{newest}");
    for id in [
        "write-amp",
        "user-rate",
        "compaction-rate",
        "table-bytes",
        "read-rate",
        "scan-rate",
        "flushes",
        "compactions",
    ] {
        let at = home.find(&format!("id=\"{id}\"")).expect(id);
        assert!(
            home[at..]
                .split("</svg>")
                .next()
                .unwrap()
                .contains("<polyline"),
            "{id}"
        );
    }
    drop(view);
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
}
