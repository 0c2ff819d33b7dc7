//! Progress on a terminal: a bar or a spinner on stderr while long work
//! runs (indicatif), cleared when it ends. Nothing is drawn when stderr is
//! not a terminal, when `TERM` is `dumb`, with `--json` (the callers pass
//! `quiet`), with `ERRAND_NO_PROGRESS` set, or with `ERRAND_LOG` set (log
//! lines would tear the bar): piped output stays exactly the command's
//! answer, and scripts see no control characters.

use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress display, or nothing.
#[derive(Debug)]
pub(crate) struct Progress(Option<ProgressBar>);

/// Whether progress is drawn, unless the caller asks for quiet (`--json`).
pub(crate) fn shown(quiet: bool) -> bool {
    !quiet
        && std::io::stderr().is_terminal()
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
        && std::env::var_os("ERRAND_NO_PROGRESS").is_none()
        && std::env::var_os("ERRAND_LOG").is_none()
}

/// Draws `bar` with `template` and `message`, ticking so a spinner turns
/// and the elapsed time counts while a call waits. (A new bar draws on
/// stderr; its target is never replaced, or the clearing at the end would
/// miss what the first target drew.)
fn styled(bar: ProgressBar, template: &str, message: String) -> Progress {
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.set_message(message);
    bar.enable_steady_tick(Duration::from_millis(120));
    Progress(Some(bar))
}

impl Progress {
    /// Nothing drawn.
    pub(crate) fn none() -> Progress {
        Progress(None)
    }

    /// A spinner saying `message` while one long call runs (its work is
    /// one statement: there is nothing to count).
    pub(crate) fn spinner(quiet: bool, message: impl Into<String>) -> Progress {
        if !shown(quiet) {
            return Progress::none();
        }
        styled(
            ProgressBar::new_spinner(),
            "{spinner} {msg} ({elapsed})",
            message.into(),
        )
    }

    /// A count with no known end: `message` and how many so far.
    pub(crate) fn counter(quiet: bool, message: impl Into<String>) -> Progress {
        if !shown(quiet) {
            return Progress::none();
        }
        styled(
            ProgressBar::new_spinner(),
            "{spinner} {msg}: {human_pos} ({elapsed})",
            message.into(),
        )
    }

    /// A bar towards `total`.
    pub(crate) fn bar(quiet: bool, total: u64, message: impl Into<String>) -> Progress {
        if !shown(quiet) {
            return Progress::none();
        }
        styled(
            ProgressBar::new(total),
            "{msg} [{bar:20}] {human_pos}/{human_len} {elapsed}",
            message.into(),
        )
    }

    /// Whether anything is drawn.
    pub(crate) fn is_shown(&self) -> bool {
        self.0.is_some()
    }

    /// Sets how far the work is.
    pub(crate) fn set(&self, position: u64) {
        if let Some(bar) = &self.0 {
            bar.set_position(position);
        }
    }

    /// Sets where the work ends.
    pub(crate) fn set_length(&self, total: u64) {
        if let Some(bar) = &self.0 {
            bar.set_length(total);
        }
    }

    /// Clears the display (also when dropped).
    pub(crate) fn finish(self) {}
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_answers_never_draw() {
        assert!(!shown(true));
        assert!(!Progress::bar(true, 10, "x").is_shown());
        assert!(!Progress::spinner(true, "x").is_shown());
        assert!(!Progress::counter(true, "x").is_shown());
    }
}
