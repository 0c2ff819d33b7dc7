//! Crash points for the fault harness, built into `errand-crashable`.
//!
//! `errand-crashable` is the `errand` command with a [`Probe`] installed
//! that can make the process SIGKILL itself at the moments the delivery
//! contract is about, and with a clock a test can step. The `errand`
//! command itself carries neither: a release build holds no crash point.
//!
//! | point | where |
//! |---|---|
//! | `claim-committed` | a claim has committed; no handler has started |
//! | `heartbeat` | a lease renewal is due and about to be written |
//! | `before-settle` | the handler has finished (its effect is done); the settlement is not yet written |
//! | `settle-committed` | an acknowledgment has committed; nothing is reported yet |
//! | `batch-ack-committed` | a batched acknowledgment (one `complete_many` transaction of the runtime's completion batcher) has committed at least one job; no waiter has been told |
//! | `batch-ack-partial` | the same, while a job claimed in the same claim as one it acknowledged is not acknowledged yet: the claimed batch is part done, part still leased |
//!
//! They are configured by `ERRAND_FAILPOINTS`, `;`-separated `point=actions`
//! in the syntax of the [`fail`](https://docs.rs/fail) crate, where the
//! action `return` means "SIGKILL this process": for example
//! `claim-committed=7*off->return` dies at the eighth claim. The plain
//! `errand` command refuses a set `ERRAND_FAILPOINTS`, so a harness cannot
//! believe it injected crashes it did not.
//!
//! The two batch points write what the batch acknowledged after the usual
//! line, on the same line: `acknowledged=ID,…` and, for
//! `batch-ack-partial`, `unacknowledged=ID,…` (the claim's other jobs). To
//! know which jobs were claimed together, the probe keeps the claims in
//! memory while `batch-ack-partial` is armed (never otherwise); a job of a
//! claim settled some other way (a failure, a snooze, a release) stays
//! counted as unacknowledged, and one whose acknowledgment is being written
//! (by the batcher, or by a claimer with its claim) no longer counts: the
//! other writer may commit it while this one crashes.
//!
//! `ERRAND_CLOCK_OFFSET_FILE=PATH` gives a SQLite store the host's clock
//! plus an offset in milliseconds read from PATH: [`test_clock_from_env`].

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use errand::probe::{Point, Probe};
use errand::{ClaimedJob, Clock, JobId, Lease};

/// The names of the crash points.
pub const FAILPOINTS: [&str; 6] = [
    "claim-committed",
    "heartbeat",
    "before-settle",
    "settle-committed",
    "batch-ack-committed",
    "batch-ack-partial",
];

/// The name of a worker's point.
fn name_of(point: Point) -> Option<&'static str> {
    match point {
        Point::ClaimCommitted => Some("claim-committed"),
        Point::Heartbeat => Some("heartbeat"),
        Point::BeforeSettle => Some("before-settle"),
        Point::SettleCommitted => Some("settle-committed"),
        _ => None,
    }
}

/// Reads `ERRAND_FAILPOINTS` and arms the points it names, installing the
/// probe that fires them. Returns what was armed (empty, and nothing
/// installed, when the variable is unset or empty).
///
/// # Errors
/// A text describing what is wrong: an unknown point, or an action the
/// `fail` crate cannot parse.
pub fn configure_failpoints() -> Result<Vec<String>, String> {
    let spec = std::env::var("ERRAND_FAILPOINTS").unwrap_or_default();
    let armed = arm_all(&spec)?;
    if !armed.is_empty() {
        errand::probe::install(Box::new(CrashProbe))
            .map_err(|_| "a probe is already installed in this process".to_owned())?;
    }
    Ok(armed)
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

fn arm(name: &str, actions: &str) -> Result<(), String> {
    fail::cfg(name, actions).map_err(|e| format!("ERRAND_FAILPOINTS: `{name}={actions}`: {e}"))?;
    if name == "batch-ack-partial" {
        lock(&CLAIMS).get_or_insert_with(ClaimBatches::default);
    }
    Ok(())
}

/// `ERRAND_CLOCK_OFFSET_FILE=PATH` gives a SQLite store the host's clock
/// plus an offset in milliseconds read from PATH (re-read at most every
/// 20 ms; a missing or unreadable file is an offset of 0), so a harness
/// can step the clock of running workers. `None` when the variable is
/// unset or empty.
pub fn test_clock_from_env() -> Option<Arc<dyn Clock>> {
    match std::env::var("ERRAND_CLOCK_OFFSET_FILE") {
        Ok(path) if !path.is_empty() => Some(Arc::new(OffsetFileClock {
            path: path.into(),
            cache: Mutex::new(None),
        })),
        _ => None,
    }
}

/// The host's clock plus an offset a file holds.
#[derive(Debug)]
struct OffsetFileClock {
    path: std::path::PathBuf,
    cache: Mutex<Option<(std::time::Instant, i64)>>,
}

impl Clock for OffsetFileClock {
    fn now(&self) -> errand::Timestamp {
        let mut cache = lock(&self.cache);
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
        errand::Timestamp::from_millis(errand::Timestamp::now().as_millis().saturating_add(offset))
    }
}

/// Fires the armed points.
#[derive(Debug)]
struct CrashProbe;

impl Probe for CrashProbe {
    fn at(&self, point: Point) {
        if let Some(name) = name_of(point) {
            crash_point(name);
        }
    }

    fn claimed(&self, jobs: &[ClaimedJob]) {
        if let Some(claims) = lock(&CLAIMS).as_mut() {
            claims.claimed(jobs.iter().map(|c| &c.lease));
        }
    }

    fn acks_sending(&self, leases: &[Lease]) {
        if let Some(claims) = lock(&CLAIMS).as_mut() {
            claims.sending(leases);
        }
    }

    fn acks_committed(&self, leases: &[Lease], acked: &[bool]) {
        batch_ack_committed(leases, acked);
    }
}

/// SIGKILLs this process when the point is armed and fires.
fn crash_point(name: &'static str) {
    if fail::eval(name, |_| ()).is_some() {
        die(name, "");
    }
}

/// The crash points of a batched acknowledgment that has committed, before
/// any waiter is told: `acked[i]` says whether `leases[i]` was acknowledged.
fn batch_ack_committed(leases: &[Lease], acked: &[bool]) {
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
        let rest: Vec<&str> = rest.iter().map(JobId::as_str).collect();
        die(
            "batch-ack-partial",
            &format!("{} unacknowledged={}", acknowledged(), rest.join(",")),
        );
    }
    if fail::eval("batch-ack-committed", |_| ()).is_some() {
        die("batch-ack-committed", &acknowledged());
    }
}

/// The claims of this process not wholly acknowledged, while
/// `batch-ack-partial` is armed.
static CLAIMS: Mutex<Option<ClaimBatches>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One attempt of a job: its id and attempt number.
type Attempt = (errand::JobId, u32);

/// Which claim each unacknowledged attempt came from.
#[derive(Debug, Default)]
struct ClaimBatches {
    next: u64,
    claim_of: std::collections::HashMap<Attempt, u64>,
    open: std::collections::HashMap<u64, std::collections::BTreeSet<Attempt>>,
}

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
    fn settled(&mut self, leases: &[Lease], acked: &[bool]) -> Option<Vec<errand::JobId>> {
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
        let rest: Vec<errand::JobId> = touched
            .iter()
            .filter_map(|claim| self.open.get(claim))
            .flat_map(|members| members.iter().map(|(id, _)| id.clone()))
            .collect();
        self.open.retain(|_, members| !members.is_empty());
        (!rest.is_empty()).then_some(rest)
    }
}

fn die(name: &str, detail: &str) -> ! {
    use std::io::Write;
    let ms = errand::Timestamp::now().as_millis();
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
    fn each_worker_point_has_its_own_name() {
        let points = [
            Point::ClaimCommitted,
            Point::Heartbeat,
            Point::BeforeSettle,
            Point::SettleCommitted,
        ];
        let mut names: Vec<&str> = points.iter().filter_map(|p| name_of(*p)).collect();
        assert_eq!(names.len(), points.len());
        assert!(names.iter().all(|n| FAILPOINTS.contains(n)), "{names:?}");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), points.len());
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
            id: errand::JobId::new(id).unwrap_or_else(|e| panic!("{e}")),
            token: errand::core::LeaseToken::generate(),
            attempt,
        }
    }

    fn ids(v: Option<Vec<errand::JobId>>) -> Option<Vec<String>> {
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

    #[test]
    fn a_bad_action_is_refused_and_off_arms_nothing_that_fires() {
        let e = arm_all("heartbeat=sometimes").err().unwrap_or_default();
        assert!(e.contains("heartbeat=sometimes"), "{e}");
        assert!(arm_all("settle-committed=off").is_ok());
        crash_point("settle-committed"); // still alive: `off` never fires
        assert!(arm_all("batch-ack-committed=off;batch-ack-partial=off").is_ok());
        let (a, b) = (lease("p", 1), lease("q", 1));
        CrashProbe.claimed(&[]);
        batch_ack_committed(&[a, b], &[true, false]); // still alive
    }
}
