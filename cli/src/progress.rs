//! A progress bar on stderr for commands that loop in batches: counts and rate, drawn only once
//! the loop has run for a second, and never with `--json` or when stderr is not a terminal (so
//! scripts and logs see only the report).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar over a known total.
const BAR: &str = "{bar:30} {pos}/{len} {msg}, {elapsed}";

/// A count without a total.
const SPINNER: &str = "{spinner} {pos} {msg}, {elapsed}";

/// How long a loop runs before its bar is drawn.
const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A bar over `total` items when it is known, else a spinner with the count.
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
    what: String,
    drawable: bool,
    shown: bool,
}

impl Progress {
    /// A hidden bar that [`Progress::set`] draws after [`SHOW_AFTER`] when `wanted` (not
    /// `--json`) and stderr is a terminal. `what` follows the count, e.g. `"re-driven"`.
    pub fn new(wanted: bool, total: Option<u64>, what: &str) -> Self {
        let template = match total {
            Some(_) => BAR,
            None => SPINNER,
        };
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style);
        }
        bar.set_message(what.to_owned());
        Self {
            bar,
            started: Instant::now(),
            what: what.to_owned(),
            drawable: wanted && std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// Sets the number of items the bar runs to (a spinner becomes a bar).
    pub fn set_total(&mut self, total: u64) {
        if self.bar.length() != Some(total) {
            self.bar.set_length(total);
            if let Ok(style) = ProgressStyle::with_template(BAR) {
                self.bar.set_style(style);
            }
        }
    }

    /// Moves the bar to `position` (items done so far).
    pub fn set(&mut self, position: u64) {
        if let Some(total) = self.bar.length() {
            if position > total {
                self.bar.set_length(position);
            }
        }
        self.bar.set_position(position);
        let secs = self.started.elapsed().as_secs_f64();
        if secs > 0.0 {
            self.bar
                .set_message(format!("{} ({:.0}/s)", self.what, position as f64 / secs));
        }
        if self.drawable && !self.shown && self.started.elapsed() >= SHOW_AFTER {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.enable_steady_tick(Duration::from_millis(200));
            self.shown = true;
        }
    }

    /// Removes the bar (the report follows on stdout).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
