//! Exit codes: a stable interface for scripts (see `docs/cli.md`). An
//! Errand error's code is `Error::exit_code`, the map the reference
//! applications share; the constants name the codes the command also
//! ends with on failures of its own.

use std::process::ExitCode;

use errand::Error;

use crate::output::errln;

/// A storage or runtime failure.
pub const RUNTIME: u8 = 1;
/// Bad input (clap uses 2 for bad flags too).
pub const INVALID: u8 = 2;
/// No job with that id.
pub const NOT_FOUND: u8 = 3;
/// The schema is missing, outdated, newer than this program, or a
/// development build's from before release 0.1.
pub const SCHEMA: u8 = 5;
/// `errand stats --check`: at least one threshold is crossed.
pub const THRESHOLD: u8 = 6;
/// `errand wait`: a job ended dead.
pub const WAITED_DEAD: u8 = 7;
/// `errand wait`: a job ended cancelled (and none dead).
pub const WAITED_CANCELLED: u8 = 8;
/// `errand wait`: the timeout passed before every job ended.
pub const WAIT_TIMED_OUT: u8 = 9;

/// A failed command: an Errand error or anything else.
#[derive(Debug)]
pub enum Failure {
    /// An error from the library, with its own exit code.
    Errand(Error),
    /// Bad input that is not the library's (exit code 2).
    Usage(String),
    /// A message with its own exit code (one of the constants above).
    Coded(u8, String),
    /// Anything else.
    Other(anyhow::Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Errand(e)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Other(e)
    }
}

impl Failure {
    /// Prints the error to stderr and returns its exit code.
    pub fn report(self) -> ExitCode {
        match self {
            Failure::Errand(e) => {
                errln!("errand: {e}");
                ExitCode::from(e.exit_code())
            }
            Failure::Usage(message) => {
                errln!("errand: {message}");
                ExitCode::from(INVALID)
            }
            Failure::Coded(code, message) => {
                errln!("errand: {message}");
                ExitCode::from(code)
            }
            Failure::Other(e) => {
                errln!("errand: {e:#}");
                ExitCode::from(RUNTIME)
            }
        }
    }
}
