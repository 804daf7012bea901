//! One progress line per phase, on stderr, so stdout stays the report (or the JSON).

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

static QUIET: AtomicBool = AtomicBool::new(false);

/// Suppresses progress lines (for `--json` piped into a tool, and for tests).
pub fn set_quiet(quiet: bool) {
    // Relaxed: set once at start-up, before any phase; a flag that orders no other data.
    QUIET.store(quiet, Ordering::Relaxed);
}

/// A running phase; its line turns into "done" when finished.
pub struct Phase {
    bar: Option<ProgressBar>,
}

impl Phase {
    pub fn start(name: &str) -> Self {
        // Relaxed: see `set_quiet`.
        if QUIET.load(Ordering::Relaxed) {
            return Self { bar: None };
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(name.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        Self { bar: Some(bar) }
    }

    pub fn finish(self) {
        if let Some(bar) = self.bar {
            let msg = bar.message();
            bar.finish_with_message(format!("{msg}: done"));
        }
    }
}
