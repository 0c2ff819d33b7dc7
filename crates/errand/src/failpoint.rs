//! Crash points for the fault harness.
//!
//! With the `failpoints` feature, the worker has named points where a test
//! can make the process SIGKILL itself, so the harness can crash a worker at
//! exactly the moments the contract is about:
//!
//! | point | where |
//! |---|---|
//! | `claim-committed` | a claim has committed; no handler has started |
//! | `heartbeat` | a lease renewal is due and about to be written |
//! | `before-settle` | the handler has finished (its effect is done); the settlement is not yet written |
//! | `settle-committed` | an acknowledgment has committed; nothing is reported yet |
//!
//! They are configured by `ERRAND_FAILPOINTS`, `;`-separated `point=actions`
//! in the syntax of the [`fail`](https://docs.rs/fail) crate, where the
//! action `return` means "SIGKILL this process": for example
//! `claim-committed=7*off->return` dies at the eighth claim. Without the
//! feature the points compile to nothing, and a set `ERRAND_FAILPOINTS` is
//! refused by [`configure_failpoints`] so a harness cannot believe it
//! injected crashes it did not.
//!
//! The same feature gives processes a steppable clock for the harness's
//! clock plan: [`test_clock_from_env`].

use std::sync::Arc;

use errand_core::Clock;

/// The names of the crash points.
pub const FAILPOINTS: [&str; 4] = [
    "claim-committed",
    "heartbeat",
    "before-settle",
    "settle-committed",
];

/// Reads `ERRAND_FAILPOINTS` and arms the points it names. Returns what
/// was armed (empty when the variable is unset).
///
/// # Errors
/// A text describing what is wrong: an unknown point, an action the `fail`
/// crate cannot parse, or — without the `failpoints` feature — any setting
/// at all.
pub fn configure_failpoints() -> Result<Vec<String>, String> {
    match std::env::var("ERRAND_FAILPOINTS") {
        Ok(spec) => arm_all(&spec),
        Err(_) => Ok(Vec::new()),
    }
}

fn arm_all(spec: &str) -> Result<Vec<String>, String> {
    let mut armed = Vec::new();
    for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((name, actions)) = item.split_once('=') else {
            return Err(format!(
                "ERRAND_FAILPOINTS entry `{item}` is not `point=actions`"
            ));
        };
        let name = name.trim();
        if !FAILPOINTS.contains(&name) {
            return Err(format!(
                "ERRAND_FAILPOINTS names `{name}`, which is not a crash point; the points are {}",
                FAILPOINTS.join(", ")
            ));
        }
        arm(name, actions.trim())?;
        armed.push(format!("{name}={}", actions.trim()));
    }
    Ok(armed)
}

#[cfg(feature = "failpoints")]
fn arm(name: &str, actions: &str) -> Result<(), String> {
    fail::cfg(name, actions).map_err(|e| format!("ERRAND_FAILPOINTS: `{name}={actions}`: {e}"))
}

#[cfg(not(feature = "failpoints"))]
fn arm(_name: &str, _actions: &str) -> Result<(), String> {
    Err(
        "ERRAND_FAILPOINTS is set, but this errand was built without crash points; \
         build it with `--features errand/failpoints` (errand-harness does)"
            .to_owned(),
    )
}

/// With the `failpoints` feature, `ERRAND_CLOCK_OFFSET_FILE=PATH` gives a
/// SQLite store the host's clock plus an offset in milliseconds read from
/// PATH (re-read at most every 20 ms; a missing or unreadable file is an
/// offset of 0), so a harness can step the clock of running workers.
/// Returns `None` when the variable is unset or empty.
///
/// # Errors
/// Without the feature, a set variable is refused (as for crash points).
pub fn test_clock_from_env() -> Result<Option<Arc<dyn Clock>>, String> {
    let path = match std::env::var("ERRAND_CLOCK_OFFSET_FILE") {
        Ok(p) if !p.is_empty() => p,
        _ => return Ok(None),
    };
    offset_clock(path)
}

#[cfg(feature = "failpoints")]
fn offset_clock(path: String) -> Result<Option<Arc<dyn Clock>>, String> {
    Ok(Some(Arc::new(OffsetFileClock {
        path: path.into(),
        cache: std::sync::Mutex::new(None),
    })))
}

#[cfg(not(feature = "failpoints"))]
fn offset_clock(_path: String) -> Result<Option<Arc<dyn Clock>>, String> {
    Err(
        "ERRAND_CLOCK_OFFSET_FILE is set, but this errand was built without test hooks; \
         build it with `--features errand/failpoints` (errand-harness does)"
            .to_owned(),
    )
}

/// The host's clock plus an offset a file holds.
#[cfg(feature = "failpoints")]
#[derive(Debug)]
struct OffsetFileClock {
    path: std::path::PathBuf,
    cache: std::sync::Mutex<Option<(std::time::Instant, i64)>>,
}

#[cfg(feature = "failpoints")]
impl Clock for OffsetFileClock {
    fn now(&self) -> errand_core::Timestamp {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let fresh = cache.filter(|(at, _)| at.elapsed() < std::time::Duration::from_millis(20));
        let offset = match fresh {
            Some((_, offset)) => offset,
            None => {
                let offset = std::fs::read_to_string(&self.path)
                    .ok()
                    .and_then(|t| t.trim().parse::<i64>().ok())
                    .unwrap_or(0);
                *cache = Some((std::time::Instant::now(), offset));
                offset
            }
        };
        errand_core::Timestamp::from_millis(
            errand_core::Timestamp::now()
                .as_millis()
                .saturating_add(offset),
        )
    }
}

/// A crash point: SIGKILLs this process when the point is armed and fires.
#[inline]
pub(crate) fn crash_point(name: &'static str) {
    #[cfg(feature = "failpoints")]
    if fail::eval(name, |_| ()).is_some() {
        die(name);
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

#[cfg(feature = "failpoints")]
fn die(name: &str) -> ! {
    use std::io::Write;
    let ms = errand_core::Timestamp::now().as_millis();
    // One write, so the line is whole in the worker's stderr file.
    let _ = std::io::stderr().write_all(
        format!(
            "errand failpoint {name}: SIGKILL pid {} at {ms}\n",
            std::process::id()
        )
        .as_bytes(),
    );
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_points_are_named_once() {
        let mut names = FAILPOINTS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FAILPOINTS.len());
    }

    #[test]
    fn an_unknown_point_or_a_malformed_entry_is_refused() {
        let e = arm_all("claim-comitted=return").err().unwrap_or_default();
        assert!(e.contains("not a crash point"), "{e}");
        let e = arm_all("heartbeat").err().unwrap_or_default();
        assert!(e.contains("not `point=actions`"), "{e}");
        assert_eq!(arm_all(" ; ").ok(), Some(Vec::new()));
    }

    #[cfg(not(feature = "failpoints"))]
    #[test]
    fn without_the_feature_any_setting_is_refused() {
        let e = arm_all("heartbeat=return").err().unwrap_or_default();
        assert!(e.contains("built without crash points"), "{e}");
    }

    #[cfg(feature = "failpoints")]
    #[test]
    fn a_bad_action_is_refused_and_off_arms_nothing_that_fires() {
        let e = arm_all("heartbeat=sometimes").err().unwrap_or_default();
        assert!(e.contains("heartbeat=sometimes"), "{e}");
        assert!(arm_all("settle-committed=off").is_ok());
        crash_point("settle-committed"); // still alive: `off` never fires
    }
}
