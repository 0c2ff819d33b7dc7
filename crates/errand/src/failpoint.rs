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
//! | `batch-ack-committed` | a batched acknowledgment (one [`Store::complete_many`](errand_core::Store::complete_many) transaction of the runtime's completion batcher) has committed at least one job; no waiter has been told |
//! | `batch-ack-partial` | the same, while a job claimed in the same claim as one it acknowledged is not acknowledged yet: the claimed batch is part done, part still leased |
//!
//! They are configured by `ERRAND_FAILPOINTS`, `;`-separated `point=actions`
//! in the syntax of the [`fail`](https://docs.rs/fail) crate, where the
//! action `return` means "SIGKILL this process": for example
//! `claim-committed=7*off->return` dies at the eighth claim. Without the
//! feature the points compile to nothing, and a set `ERRAND_FAILPOINTS` is
//! refused by [`configure_failpoints`] so a harness cannot believe it
//! injected crashes it did not.
//!
//! The two batch points write what the batch acknowledged after the usual
//! line, on the same line: `acknowledged=ID,…` and, for
//! `batch-ack-partial`, `unacknowledged=ID,…` (the claim's other jobs). To
//! know which jobs were claimed together, a worker keeps its claims in
//! memory while `batch-ack-partial` is armed (never otherwise); a job of a
//! claim settled some other way (a failure, a snooze, a release) stays
//! counted as unacknowledged, and one whose acknowledgment is being written
//! (by the batcher, or by a claimer with its claim) no longer counts: the
//! other writer may commit it while this one crashes.
//!
//! The same feature gives processes a steppable clock for the harness's
//! clock plan: [`test_clock_from_env`].

use std::sync::Arc;

use errand_core::{ClaimedJob, Clock, Lease};

/// The names of the crash points.
pub const FAILPOINTS: [&str; 6] = [
    "claim-committed",
    "heartbeat",
    "before-settle",
    "settle-committed",
    "batch-ack-committed",
    "batch-ack-partial",
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
    fail::cfg(name, actions).map_err(|e| format!("ERRAND_FAILPOINTS: `{name}={actions}`: {e}"))?;
    if name == "batch-ack-partial" {
        lock(&CLAIMS).get_or_insert_with(ClaimBatches::default);
    }
    Ok(())
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
        die(name, "");
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}

/// Notes a claim's jobs (kept only while `batch-ack-partial` is armed).
#[inline]
pub(crate) fn claimed_batch(claimed: &[ClaimedJob]) {
    #[cfg(feature = "failpoints")]
    if let Some(claims) = lock(&CLAIMS).as_mut() {
        claims.claimed(claimed.iter().map(|c| &c.lease));
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = claimed;
}

/// Notes acknowledgments about to be written: from now on they do not
/// count as unacknowledged.
#[inline]
pub(crate) fn acks_sending(leases: &[Lease]) {
    #[cfg(feature = "failpoints")]
    if let Some(claims) = lock(&CLAIMS).as_mut() {
        claims.sending(leases);
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = leases;
}

/// The crash points of a batched acknowledgment that has committed, before
/// any waiter is told: `acked[i]` says whether `leases[i]` was acknowledged.
#[inline]
pub(crate) fn batch_ack_committed(leases: &[Lease], acked: &[bool]) {
    #[cfg(feature = "failpoints")]
    {
        let partial = lock(&CLAIMS)
            .as_mut()
            .and_then(|claims| claims.settled(leases, acked));
        if !acked.contains(&true) {
            return;
        }
        let acknowledged = || {
            let ids: Vec<&str> = leases
                .iter()
                .zip(acked)
                .filter(|(_, ok)| **ok)
                .map(|(l, _)| l.id.as_str())
                .collect();
            format!("acknowledged={}", ids.join(","))
        };
        if let Some(rest) = partial
            && fail::eval("batch-ack-partial", |_| ()).is_some()
        {
            let rest: Vec<&str> = rest.iter().map(errand_core::JobId::as_str).collect();
            die(
                "batch-ack-partial",
                &format!("{} unacknowledged={}", acknowledged(), rest.join(",")),
            );
        }
        if fail::eval("batch-ack-committed", |_| ()).is_some() {
            die("batch-ack-committed", &acknowledged());
        }
    }
    #[cfg(not(feature = "failpoints"))]
    let _ = (leases, acked);
}

/// The claims of this process not wholly acknowledged, while
/// `batch-ack-partial` is armed.
#[cfg(feature = "failpoints")]
static CLAIMS: std::sync::Mutex<Option<ClaimBatches>> = std::sync::Mutex::new(None);

#[cfg(feature = "failpoints")]
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One attempt of a job: its id and attempt number.
#[cfg(any(feature = "failpoints", test))]
type Attempt = (errand_core::JobId, u32);

/// Which claim each unacknowledged attempt came from.
#[cfg(any(feature = "failpoints", test))]
#[derive(Debug, Default)]
struct ClaimBatches {
    next: u64,
    claim_of: std::collections::HashMap<Attempt, u64>,
    open: std::collections::HashMap<u64, std::collections::BTreeSet<Attempt>>,
}

#[cfg(any(feature = "failpoints", test))]
impl ClaimBatches {
    /// Notes the attempts one claim started (a claim of one job is never
    /// part-acknowledged, so it is not kept).
    fn claimed<'a>(&mut self, leases: impl Iterator<Item = &'a Lease>) {
        let members: std::collections::BTreeSet<Attempt> =
            leases.map(|l| (l.id.clone(), l.attempt)).collect();
        if members.len() < 2 {
            return;
        }
        let claim = self.next;
        self.next += 1;
        for m in &members {
            self.claim_of.insert(m.clone(), claim);
        }
        self.open.insert(claim, members);
    }

    /// Stops counting attempts whose acknowledgment is being written as
    /// unacknowledged (their claim is still found when they settle).
    fn sending(&mut self, leases: &[Lease]) {
        for lease in leases {
            let key = (lease.id.clone(), lease.attempt);
            if let Some(members) = self
                .claim_of
                .get(&key)
                .and_then(|claim| self.open.get_mut(claim))
            {
                members.remove(&key);
            }
        }
    }

    /// Forgets the attempts a batch settled (acknowledged or refused) and
    /// returns the jobs still unacknowledged in the claims of those it
    /// acknowledged, if any: the claims it left part-acknowledged.
    fn settled(&mut self, leases: &[Lease], acked: &[bool]) -> Option<Vec<errand_core::JobId>> {
        let mut touched = std::collections::BTreeSet::new();
        for (lease, ok) in leases.iter().zip(acked) {
            let key = (lease.id.clone(), lease.attempt);
            let Some(claim) = self.claim_of.remove(&key) else {
                continue;
            };
            if let Some(members) = self.open.get_mut(&claim) {
                members.remove(&key);
            }
            if *ok {
                touched.insert(claim);
            }
        }
        let rest: Vec<errand_core::JobId> = touched
            .iter()
            .filter_map(|claim| self.open.get(claim))
            .flat_map(|members| members.iter().map(|(id, _)| id.clone()))
            .collect();
        self.open.retain(|_, members| !members.is_empty());
        (!rest.is_empty()).then_some(rest)
    }
}

#[cfg(feature = "failpoints")]
fn die(name: &str, detail: &str) -> ! {
    use std::io::Write;
    let ms = errand_core::Timestamp::now().as_millis();
    let sep = if detail.is_empty() { "" } else { " " };
    // One write, so the line is whole in the worker's stderr file.
    let _ = std::io::stderr().write_all(
        format!(
            "errand failpoint {name}: SIGKILL pid {} at {ms}{sep}{detail}\n",
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

    fn lease(id: &str, attempt: u32) -> Lease {
        Lease {
            id: errand_core::JobId::new(id).unwrap_or_else(|e| panic!("{e}")),
            token: errand_core::LeaseToken::generate(),
            attempt,
        }
    }

    fn ids(v: Option<Vec<errand_core::JobId>>) -> Option<Vec<String>> {
        v.map(|v| v.iter().map(|i| i.as_str().to_owned()).collect())
    }

    #[test]
    fn a_claim_is_part_acknowledged_until_its_last_job_is_settled() {
        let mut claims = ClaimBatches::default();
        let (a, b, c) = (lease("a", 1), lease("b", 1), lease("c", 1));
        claims.claimed([&a, &b, &c].into_iter());
        claims.claimed([&lease("solo", 1)].into_iter());
        // `a` acknowledged, `b` and `c` still leased.
        let part = claims.settled(std::slice::from_ref(&a), &[true]);
        assert_eq!(ids(part), Some(vec!["b".into(), "c".into()]));
        // `b` refused (its lease was lost): no acknowledgment, nothing to say.
        assert_eq!(claims.settled(std::slice::from_ref(&b), &[false]), None);
        // The last one: the claim is whole, and forgotten.
        assert_eq!(claims.settled(std::slice::from_ref(&c), &[true]), None);
        assert!(claims.open.is_empty() && claims.claim_of.is_empty());
        // A claim of one job, or a job reclaimed as a later attempt, is
        // never part of a kept claim.
        let (x, y) = (lease("x", 1), lease("y", 1));
        claims.claimed([&x, &y].into_iter());
        assert_eq!(
            claims.settled(&[lease("solo", 1), lease("x", 2)], &[true, true]),
            None
        );
        assert_eq!(
            ids(claims.settled(std::slice::from_ref(&x), &[true])),
            Some(vec!["y".into()])
        );
    }

    /// A job whose acknowledgment another writer is sending (a claimer
    /// with its claim, while the batcher commits its own batch) is not
    /// reported as unacknowledged: that writer may commit it first.
    #[test]
    fn an_acknowledgment_being_sent_elsewhere_is_not_unacknowledged() {
        let mut claims = ClaimBatches::default();
        let (a, b, c) = (lease("a", 1), lease("b", 1), lease("c", 1));
        claims.claimed([&a, &b, &c].into_iter());
        claims.sending(std::slice::from_ref(&b));
        claims.sending(std::slice::from_ref(&a));
        assert_eq!(
            ids(claims.settled(std::slice::from_ref(&a), &[true])),
            Some(vec!["c".into()])
        );
        assert_eq!(
            ids(claims.settled(std::slice::from_ref(&b), &[true])),
            Some(vec!["c".into()])
        );
        assert_eq!(claims.settled(std::slice::from_ref(&c), &[true]), None);
        assert!(claims.open.is_empty() && claims.claim_of.is_empty());
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
        assert!(arm_all("batch-ack-committed=off;batch-ack-partial=off").is_ok());
        let (a, b) = (lease("p", 1), lease("q", 1));
        claimed_batch(&[]);
        batch_ack_committed(&[a, b], &[true, false]); // still alive
    }
}
