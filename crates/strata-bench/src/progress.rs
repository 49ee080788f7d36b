//! A progress bar on stderr (indicatif), shown only when stderr is a
//! terminal and the benchmark has run for a while; otherwise silent, so that
//! logs hold only result lines. Threads add finished operations in chunks
//! (see `Stats`), so the bar costs nothing per operation.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a benchmark runs before its bar appears.
const SHOW_AFTER: Duration = Duration::from_secs(2);

/// Progress of one benchmark, shared by its threads.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
    shown: AtomicBool,
}

impl Progress {
    /// A bar for benchmark `name` expecting `total_ops` operations (`None`
    /// when a duration bounds the run). `None` when progress is off or
    /// stderr is not a terminal.
    pub fn start(name: &str, total_ops: Option<u64>, enabled: bool) -> Option<Progress> {
        if !enabled || !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::with_draw_target(total_ops, ProgressDrawTarget::hidden());
        let template = if total_ops.is_some() {
            "{prefix:>12} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ops (eta {eta})"
        } else {
            "{prefix:>12} [{elapsed_precise}] {human_pos} ops"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_prefix(name.to_string());
        Some(Progress {
            bar,
            started: Instant::now(),
            shown: AtomicBool::new(false),
        })
    }

    /// Adds `ops` finished operations.
    pub fn add(&self, ops: u64) {
        self.bar.inc(ops);
        if !self.shown.load(Ordering::Relaxed) && self.started.elapsed() >= SHOW_AFTER {
            self.shown.store(true, Ordering::Relaxed);
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
