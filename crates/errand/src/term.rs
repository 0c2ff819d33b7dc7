//! What the programs built on this library share about their terminal.

use std::io::IsTerminal;

/// Whether log lines written to stderr may carry ANSI colour codes: only
/// when stderr is a terminal and `NO_COLOR` is unset or empty
/// (<https://no-color.org>). A pipe, a file or a journal gets plain text.
/// Pass it to the log subscriber, as `errand`, `fieldnotes` and
/// `reservations` do: `tracing_subscriber::fmt().with_ansi(log_colours())`.
pub fn log_colours() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
