//! A read-only web view of a database: the LSM's shape (each table file a
//! box in its level, in key order, width by size, linking to a page per
//! file), the compaction statistics, plots over time (write amplification,
//! user and compaction write rates, table bytes, point reads and iterator
//! steps per second, flushes and compactions so far; sampled every second
//! while the view runs), and the same data as JSON. Pages refresh
//! themselves every few seconds.
//!
//! `strata --db PATH web` serves it over a read-only open; a program that
//! holds its database open serves it with [`serve`]. Bound to loopback
//! unless told otherwise.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use strata::env::{FileSystem, PosixFileSystem};
use strata::{BytewiseComparator, Comparator, LiveFile, DB};
use tiny_http::{Header, Response, Server};

/// Seconds between a page's refreshes.
const REFRESH_SECONDS: u32 = 5;
/// Width of the LSM drawing, in SVG units.
const WIDTH: f64 = 1000.0;
const ROW: f64 = 34.0;
/// Seconds of history kept for the plots.
const HISTORY: usize = 600;

/// The database's counters at one moment.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Seconds since the view started.
    at: f64,
    user_bytes: u64,
    /// Bytes flushes and compactions wrote.
    written_bytes: u64,
    table_bytes: u64,
    /// Keys looked up by get and MultiGet.
    point_reads: u64,
    /// Iterator positionings and steps.
    iterator_steps: u64,
    flushes: u64,
    compactions: u64,
}

/// Samples every second, oldest first.
type History = Arc<Mutex<VecDeque<Sample>>>;

fn property_u64(db: &DB, name: &str) -> u64 {
    db.property_value(name)
        .ok()
        .flatten()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn sample(db: &DB, start: Instant) -> Sample {
    Sample {
        at: start.elapsed().as_secs_f64(),
        user_bytes: property_u64(db, "strata.user-bytes-written"),
        written_bytes: (0..7)
            .map(|l| property_u64(db, &format!("strata.compaction.bytes-written-at-level{l}")))
            .sum(),
        table_bytes: property_u64(db, "rocksdb.total-sst-files-size"),
        point_reads: property_u64(db, "strata.num-point-reads"),
        iterator_steps: property_u64(db, "strata.num-iterator-steps"),
        flushes: property_u64(db, "strata.num-flushes"),
        compactions: property_u64(db, "strata.num-compactions"),
    }
}

/// A running web view; dropping it stops the server.
pub struct WebView {
    server: Arc<Server>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
    sampler: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for WebView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebView").field("addr", &self.addr).finish()
    }
}

impl WebView {
    /// The address it listens on (the port chosen when asked for 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for WebView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.server.unblock();
        for t in [self.thread.take(), self.sampler.take()]
            .into_iter()
            .flatten()
        {
            let _ = t.join();
        }
    }
}

/// Serves the view of `db` at `addr` (`127.0.0.1:0` picks a free port) on
/// a thread of its own, until the returned [`WebView`] is dropped.
pub fn serve(db: Arc<DB>, addr: &str) -> io::Result<WebView> {
    let server = Arc::new(Server::http(addr).map_err(io::Error::other)?);
    let local = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| io::Error::other("not an IP address"))?;
    let history: History = Arc::new(Mutex::new(VecDeque::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let sampler = {
        let (db, history, stop) = (db.clone(), history.clone(), stop.clone());
        std::thread::Builder::new()
            .name("strata-web-sampler".into())
            .spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    let s = sample(&db, start);
                    {
                        let mut h = history.lock().unwrap_or_else(|e| e.into_inner());
                        if h.len() == HISTORY {
                            h.pop_front();
                        }
                        h.push_back(s);
                    }
                    // Sleep a second in small steps, so a stop is quick.
                    for _ in 0..10 {
                        if stop.load(Ordering::Acquire) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            })?
    };
    let s = server.clone();
    let thread = std::thread::Builder::new()
        .name("strata-web".into())
        .spawn(move || run(&s, &db, &history))?;
    Ok(WebView {
        server,
        addr: local,
        thread: Some(thread),
        sampler: Some(sampler),
        stop,
    })
}

/// Answers requests until the server is unblocked.
fn run(server: &Server, db: &DB, history: &History) {
    for request in server.incoming_requests() {
        let url = request.url().to_string();
        let samples: Vec<Sample> = history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .collect();
        let (status, content_type, body) = page(db, &url, &samples);
        let header = Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
            .expect("a valid header");
        let response = Response::from_string(body)
            .with_status_code(status)
            .with_header(header);
        let _ = request.respond(response);
    }
}

/// The status, content type and body for `url`.
fn page(db: &DB, url: &str, samples: &[Sample]) -> (u16, &'static str, String) {
    let html = "text/html; charset=utf-8";
    let result = match url {
        "/" => dashboard(db, samples).map(|b| (html, b)),
        "/api/state.json" => state_json(db, samples).map(|b| ("application/json", b)),
        u if u.starts_with("/table/") => table_page(db, &u["/table/".len()..]).map(|b| (html, b)),
        _ => return (404, html, "<h1>Not found</h1>".into()),
    };
    match result {
        Ok((t, b)) => (200, t, b),
        Err(e) => (
            500,
            html,
            format!("<h1>Error</h1><pre>{}</pre>", escape(&e)),
        ),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A key for display: text when printable, else hex.
fn shown_key(k: &[u8]) -> String {
    if !k.is_empty() && k.iter().all(|b| b.is_ascii_graphic()) {
        String::from_utf8_lossy(k).into_owned()
    } else {
        format!("0x{}", crate::codec::hex_encode(k))
    }
}

fn head(title: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title>\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:2px 6px;text-align:left}}\
         pre{{background:#f6f6f6;padding:8px;overflow-x:auto}}</style></head><body>",
        escape(title)
    )
}

fn dashboard(db: &DB, samples: &[Sample]) -> Result<String, String> {
    let files = db.live_files().map_err(|e| e.to_string())?;
    let stats = db
        .property_value("rocksdb.stats")
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let mut h = head(&format!("Strata: {}", db.path().display()));
    let total: usize = files.iter().map(|f| f.size).sum();
    let entries: u64 = files.iter().map(|f| f.num_entries).sum();
    let _ = write!(
        h,
        "<h1>Strata database <code>{}</code></h1><p id=\"summary\">{} table files, {} bytes, {} entries in tables</p>",
        escape(&db.path().display().to_string()),
        files.len(),
        total,
        entries
    );
    h.push_str("<h2>Levels</h2>");
    h.push_str(&lsm_svg(&files));
    h.push_str("<h2>Table files</h2><table id=\"files\"><tr><th>level</th><th>file</th><th>bytes</th><th>entries</th><th>smallest key</th><th>largest key</th><th>sequence numbers</th></tr>");
    for f in &files {
        let name = f.name.trim_start_matches('/');
        let _ = write!(
            h,
            "<tr><td>L{}</td><td><a href=\"/table/{name}\">{name}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}..{}</td></tr>",
            f.level,
            f.size,
            f.num_entries,
            escape(&shown_key(f.start_key.as_deref().unwrap_or_default())),
            escape(&shown_key(f.end_key.as_deref().unwrap_or_default())),
            f.smallest_seqno,
            f.largest_seqno
        );
    }
    h.push_str("</table><h2>Over time</h2>");
    h.push_str(&plots(samples));
    h.push_str("<h2>Compaction statistics</h2><pre id=\"stats\">");
    h.push_str(&escape(&stats));
    h.push_str("</pre><p><a href=\"/api/state.json\">JSON</a></p></body></html>");
    Ok(h)
}

/// One row per level; each file a box in key order, its width its share
/// of the level's bytes.
fn lsm_svg(files: &[LiveFile]) -> String {
    let max_level = files.iter().map(|f| f.level).max().unwrap_or(0);
    let height = ROW * f64::from(max_level + 1) + 10.0;
    let mut s = format!(
        "<svg id=\"lsm\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\">",
        WIDTH + 60.0
    );
    for level in 0..=max_level {
        let y = 5.0 + ROW * f64::from(level);
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\" font-size=\"14\">L{level}</text>",
            y + ROW / 2.0 + 4.0
        );
        let mut in_level: Vec<&LiveFile> = files.iter().filter(|f| f.level == level).collect();
        in_level.sort_by(|a, b| a.start_key.cmp(&b.start_key));
        let bytes: usize = in_level.iter().map(|f| f.size).sum::<usize>().max(1);
        let mut x = 40.0;
        for f in in_level {
            let w = WIDTH * f.size as f64 / bytes as f64;
            let name = f.name.trim_start_matches('/');
            let _ = write!(
                s,
                "<a href=\"/table/{name}\"><rect class=\"file\" data-level=\"{level}\" data-file=\"{name}\" \
                 x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#7aa6d6\" stroke=\"#234\">\
                 <title>{name}: {} bytes, {} .. {}</title></rect></a>",
                w.max(0.5),
                ROW - 8.0,
                f.size,
                escape(&shown_key(f.start_key.as_deref().unwrap_or_default())),
                escape(&shown_key(f.end_key.as_deref().unwrap_or_default()))
            );
            x += w;
        }
    }
    s.push_str("</svg>");
    s
}

/// (seconds, value) pairs of one plot.
type Points = Vec<(f64, f64)>;

/// Small line plots of the sampled history: write amplification (bytes
/// flushed and compacted over user bytes), user and compaction write
/// rates, table bytes, read rates (point reads, iterator steps), and the
/// flushes and compactions done so far.
fn plots(samples: &[Sample]) -> String {
    // Change per second of a counter, divided by `unit`.
    let rate = |f: fn(&Sample) -> u64, unit: f64| -> Points {
        samples
            .windows(2)
            .map(|w| {
                let dt = (w[1].at - w[0].at).max(1e-3);
                (
                    w[1].at,
                    f(&w[1]).saturating_sub(f(&w[0])) as f64 / dt / unit,
                )
            })
            .collect()
    };
    let total =
        |f: fn(&Sample) -> u64| -> Points { samples.iter().map(|s| (s.at, f(s) as f64)).collect() };
    let series: [(&str, &str, Points); 8] = [
        (
            "write-amp",
            "write amplification",
            samples
                .iter()
                .map(|s| (s.at, s.written_bytes as f64 / s.user_bytes.max(1) as f64))
                .collect(),
        ),
        (
            "user-rate",
            "user writes, MB/s",
            rate(|s| s.user_bytes, 1e6),
        ),
        (
            "compaction-rate",
            "flush + compaction writes, MB/s",
            rate(|s| s.written_bytes, 1e6),
        ),
        (
            "table-bytes",
            "table bytes, MB",
            samples
                .iter()
                .map(|s| (s.at, s.table_bytes as f64 / 1e6))
                .collect(),
        ),
        (
            "read-rate",
            "point reads, thousands/s",
            rate(|s| s.point_reads, 1e3),
        ),
        (
            "scan-rate",
            "iterator steps, thousands/s",
            rate(|s| s.iterator_steps, 1e3),
        ),
        ("flushes", "flushes so far", total(|s| s.flushes)),
        (
            "compactions",
            "compactions so far",
            total(|s| s.compactions),
        ),
    ];
    let mut h = String::from("<div id=\"plots\">");
    for (id, title, points) in series {
        h.push_str(&plot(id, title, &points));
    }
    h.push_str("</div>");
    h
}

/// One line plot, 240 x 120, with its title and last value.
fn plot(id: &str, title: &str, points: &[(f64, f64)]) -> String {
    let (w, ht) = (240.0, 120.0);
    let last = points.last().map_or(0.0, |p| p.1);
    let mut s = format!(
        "<svg class=\"plot\" id=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" \
         style=\"margin-right:12px\"><text x=\"0\" y=\"12\" font-size=\"12\">{} (now {last:.2})</text>\
         <rect x=\"0\" y=\"18\" width=\"{w}\" height=\"{ht}\" fill=\"none\" stroke=\"#ccc\"/>",
        ht + 20.0,
        escape(title)
    );
    if points.len() >= 2 {
        let (x0, x1) = (points[0].0, points[points.len() - 1].0);
        let ymax = points.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9);
        let coords: Vec<String> = points
            .iter()
            .map(|&(x, y)| {
                let px = (x - x0) / (x1 - x0).max(1e-9) * w;
                let py = 18.0 + ht - y / ymax * (ht - 4.0);
                format!("{px:.1},{py:.1}")
            })
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"#2a6\" stroke-width=\"1.5\" points=\"{}\"/>",
            coords.join(" ")
        );
    }
    s.push_str("</svg>");
    s
}

fn table_page(db: &DB, name: &str) -> Result<String, String> {
    let valid = name.len() > 4
        && name.ends_with(".sst")
        && name[..name.len() - 4].bytes().all(|b| b.is_ascii_digit());
    if !valid {
        return Err(format!("{name:?} is not a table file name"));
    }
    let path = db.path().join(name);
    let layout = describe(&path).map_err(|e| e.to_string())?;
    let mut h = head(&format!("Strata table {name}"));
    let _ = write!(
        h,
        "<p><a href=\"/\">back</a></p><h1>Table <code>{name}</code></h1><p id=\"format\">{} table, {} parts</p>\
         <table id=\"parts\"><tr><th>kind</th><th>offset</th><th>bytes</th><th>compression</th><th>checksum</th><th>hash index</th></tr>",
        layout.format,
        layout.parts.len()
    );
    for p in &layout.parts {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.kind),
            p.offset,
            p.size,
            escape(&p.compression),
            if p.checksum_ok { "ok" } else { "BAD" },
            match p.hash_index {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            }
        );
    }
    let _ = write!(
        h,
        "</table><h2>Properties</h2><pre id=\"properties\">{}</pre></body></html>",
        escape(&format!("{:#?}", layout.properties))
    );
    Ok(h)
}

fn describe(path: &Path) -> strata::Result<strata::sst::TableLayout> {
    let file = PosixFileSystem::new().open_random_access(path)?;
    let cmp: Arc<dyn Comparator> = Arc::new(BytewiseComparator);
    strata::sst::describe_table(file, &path.display().to_string(), cmp)
}

fn state_json(db: &DB, samples: &[Sample]) -> Result<String, String> {
    let files = db.live_files().map_err(|e| e.to_string())?;
    let stats = db
        .property_value("rocksdb.stats")
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let hex = |k: &Option<Vec<u8>>| crate::codec::hex_encode(k.as_deref().unwrap_or_default());
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|f| {
            serde_json::json!({
                "level": f.level,
                "name": f.name,
                "size": f.size,
                "entries": f.num_entries,
                "deletions": f.num_deletions,
                "smallest_key_hex": hex(&f.start_key),
                "largest_key_hex": hex(&f.end_key),
                "smallest_seqno": f.smallest_seqno,
                "largest_seqno": f.largest_seqno,
            })
        })
        .collect();
    let history: Vec<serde_json::Value> = samples
        .iter()
        .map(|s| {
            serde_json::json!({
                "seconds": s.at,
                "user_bytes": s.user_bytes,
                "written_bytes": s.written_bytes,
                "table_bytes": s.table_bytes,
                "point_reads": s.point_reads,
                "iterator_steps": s.iterator_steps,
                "flushes": s.flushes,
                "compactions": s.compactions,
            })
        })
        .collect();
    Ok(serde_json::json!({
        "path": db.path().display().to_string(),
        "files": files,
        "stats": stats,
        "history": history,
    })
    .to_string())
}
