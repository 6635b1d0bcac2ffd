//! [`Progress`]: the live progress bar of one benchmark (operations done of the expected total,
//! operations per second, ETA), drawn on stderr.
//!
//! The bar exists only when stderr is a terminal. Redirected stderr gets no progress output at all,
//! so logs and scripts see the same lines db_bench users expect and stdout is never touched.
//! Benchmarks whose operation count is unknown in advance (`compact`, `gc`) get a spinner instead.
//!
//! Thread-safety: a `Progress` is a cheap clone of one shared, internally synchronised bar; every
//! benchmark thread holds a clone. Threads add their operations in batches (see
//! [`Progress::REPORT_EVERY`]) rather than per operation, so the bar costs the timed loop nothing
//! but a clock comparison it already makes.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// Width of the benchmark-name column, as in the result lines.
const NAME_WIDTH: usize = 12;

/// A benchmark's progress bar, or nothing when stderr is not a terminal.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// How long a thread may keep finished operations to itself before adding them to the bar:
    /// short enough for a smooth rate, long enough that threads rarely touch shared state.
    pub const REPORT_EVERY: Duration = Duration::from_millis(50);

    /// A bar for benchmark `name` expecting `expected_ops` operations over all threads (a spinner
    /// when unknown); hidden unless stderr is a terminal.
    pub fn start(name: &str, expected_ops: Option<u64>) -> Self {
        if !std::io::stderr().is_terminal() {
            return Progress::hidden();
        }
        let (bar, template) = match expected_ops {
            Some(total) => (
                ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()),
                "{prefix} [{bar:30}] {human_pos}/{human_len} ops {rate} ETA {eta} {msg}",
            ),
            None => (
                ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
                "{prefix} {spinner} {elapsed} {msg}",
            ),
        };
        // The templates are constants; falling back to the plain style only guards a typo.
        let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
        // indicatif's own `per_sec` prints four decimals; whole operations per second read better.
        let rate = |state: &ProgressState, out: &mut dyn std::fmt::Write| {
            let _ = write!(out, "{:>10.0} ops/s", state.per_sec());
        };
        bar.set_style(style.progress_chars("=> ").with_key("rate", rate));
        bar.set_prefix(format!("{name:<NAME_WIDTH$}"));
        if expected_ops.is_none() {
            // A spinner over one long call (compact) would otherwise never move.
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        Progress { bar: Some(bar) }
    }

    /// No bar: for redirected stderr and for tests.
    pub fn hidden() -> Self {
        Progress { bar: None }
    }

    /// Whether anything is drawn; threads skip their batching when not.
    pub fn is_visible(&self) -> bool {
        self.bar.is_some()
    }

    /// Adds `ops` finished operations.
    pub fn add(&self, ops: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(ops);
        }
    }

    /// Shows `note` at the end of the bar line (the latest slow operation, for instance); a note
    /// rather than a printed line so that stalls full of slow operations cannot flood the terminal.
    pub fn note(&self, note: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(note);
        }
    }

    /// Removes the bar so the result lines that follow start on a clean terminal.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_progress_accepts_updates_and_draws_nothing() {
        let progress = Progress::hidden();
        assert!(!progress.is_visible());
        progress.add(10);
        progress.note("long op".to_owned());
        progress.finish();
    }

    #[test]
    fn bar_is_shown_only_on_a_terminal() {
        // Test runners capture stderr, but a developer may run them on a terminal: either way the
        // bar follows what stderr is.
        let progress = Progress::start("fillseq", Some(100));
        assert_eq!(progress.is_visible(), std::io::stderr().is_terminal());
        progress.add(100);
        progress.finish();
    }
}
