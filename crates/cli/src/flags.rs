//! Flags and value parsers that several commands share.

use std::time::Duration;

use clap::Args;

use errand::Error;

/// Who acts and why, for the audit log.
#[derive(Args, Debug)]
pub(crate) struct OperatorArgs {
    /// Who is acting (recorded in the audit log); default: the OS user.
    #[arg(long)]
    pub(crate) by: Option<String>,
    /// Why (recorded in the audit log).
    #[arg(long)]
    pub(crate) reason: Option<String>,
}

/// Reads a duration flag (`30s`, `5m`, `1h`), saying what was wrong.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    errand::parse_duration(s).map_err(|e| match e {
        Error::Invalid(m) => m,
        other => other.to_string(),
    })
}

/// `--meta KEY=VALUE` flags as a map; a key given twice is refused.
pub(crate) fn meta_pairs(pairs: &[String]) -> Result<errand::core::Meta, Error> {
    errand::core::meta_from_pairs(pairs.iter().map(String::as_str))
}
