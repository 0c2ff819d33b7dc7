//! The reservations database and its business operations, on either backend.
//!
//! Errand's tables and the application's share one database: on SQLite one
//! file (Errand's `errand_*` tables beside the application's), on
//! PostgreSQL one database (Errand's schema `errand`, the application's
//! schema `reservations`). Errand's schema comes from the library's
//! migrations; the application's from `migrations/sqlite` or
//! `migrations/postgres` in this package, applied by `refinery` and
//! recorded in `reservations_schema_history`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use errand::{DbTarget, Job, JobFilter, JobState, Name, Store, Timestamp};
use serde::Serialize;

use crate::error::{Error, Result};
pub use crate::model::*;
pub use crate::payment::*;
use crate::{pg, sqlite};

mod replay;
pub use replay::{Replay, ReplayReport, check_replay_flags};

// ---------------------------------------------------------------------------
// Opening and initialising

/// An open reservations database.
#[derive(Clone, Debug)]
pub struct App {
    backend: Backend,
}

#[derive(Clone, Debug)]
pub(crate) enum Backend {
    Sqlite(sqlite::Sqlite),
    Postgres(Box<pg::Pg>),
}

fn target(db: &str) -> Result<DbTarget> {
    DbTarget::parse(db).map_err(|e| match e {
        errand::Error::Invalid(m) => Error::Database(m),
        other => Error::from(other),
    })
}

impl App {
    /// Creates (SQLite) or prepares (PostgreSQL) the database: Errand's
    /// schema, the application's schema and the seed units. Safe to run
    /// again: it changes nothing that exists.
    pub async fn init(db: &str) -> Result<InitReport> {
        match target(db)? {
            DbTarget::Sqlite(path) => sqlite::init(&path),
            DbTarget::Postgres(url) => pg::init(&url).await,
        }
    }

    /// Opens an initialised database; refuses (naming `reservations init`)
    /// one that is missing or not initialised.
    pub async fn open(db: &str) -> Result<App> {
        let backend = match target(db)? {
            DbTarget::Sqlite(path) => Backend::Sqlite(sqlite::Sqlite::open(&path, None)?),
            DbTarget::Postgres(url) => Backend::Postgres(Box::new(pg::Pg::open(&url).await?)),
        };
        Ok(App { backend })
    }

    /// Opens a SQLite database with a test clock for every decision.
    pub fn open_sqlite_with_clock(
        path: &std::path::Path,
        clock: Arc<dyn errand::Clock>,
    ) -> Result<App> {
        Ok(App {
            backend: Backend::Sqlite(sqlite::Sqlite::open(path, Some(clock))?),
        })
    }

    /// The operator's actions on the store (replay, the dead-letter list).
    pub fn admin(&self) -> errand::Admin {
        errand::Admin::new(self.store())
    }

    /// The job store.
    pub fn store(&self) -> Arc<dyn Store> {
        match &self.backend {
            Backend::Sqlite(s) => Arc::new(s.store.clone()),
            Backend::Postgres(p) => Arc::new(p.store.clone()),
        }
    }

    /// `sqlite` or `postgres`.
    pub fn backend_name(&self) -> &'static str {
        match &self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Holds `unit` for `guest` for the nights of `stay` until now +
    /// `window`, and schedules the expiry job for that deadline in the same
    /// transaction. Refused (nothing written) when the stay shares a night
    /// with a held or paid reservation of the unit: checked in the
    /// transaction, and enforced by the schema (a trigger on SQLite, an
    /// exclusion constraint on PostgreSQL) whoever writes the row.
    pub async fn hold(
        &self,
        unit: &str,
        guest: &str,
        stay: StayRequest,
        window: Duration,
    ) -> Result<Reservation> {
        self.hold_with(unit, guest, stay, window, Expiry::AtDeadline)
            .await
    }

    /// Holds a unit like [`App::hold`], with its expiry job either due at
    /// the deadline or waiting for the payment until then
    /// ([`Expiry::AwaitingPayment`]).
    pub async fn hold_with(
        &self,
        unit: &str,
        guest: &str,
        stay: StayRequest,
        window: Duration,
        expiry: Expiry,
    ) -> Result<Reservation> {
        validate_id("a unit id", unit)?;
        validate_guest(guest)?;
        validate_window("the hold window", window)?;
        match &self.backend {
            Backend::Sqlite(s) => s.hold(unit, guest, stay, window, expiry).await,
            Backend::Postgres(p) => p.hold(unit, guest, stay, window, expiry).await,
        }
    }

    /// Deletes a reservation and its recorded expiry, whatever its status
    /// (test data, an erasure request). Its expiry jobs stay as they are: one
    /// still pending finds no reservation and goes dead at once, a permanent
    /// failure that no retry can fix.
    pub async fn purge_reservation(&self, id: &str) -> Result<Reservation> {
        validate_id("a reservation id", id)?;
        match &self.backend {
            Backend::Sqlite(s) => s.purge(id).await,
            Backend::Postgres(p) => p.purge(id).await,
        }
    }

    /// The lateness of the recent past: the holds expired in the last
    /// `window` (and the latest of them), and the holds still held past
    /// their deadline now (and how far past the oldest is).
    pub async fn recent_lateness(&self, window: Duration) -> Result<RecentLateness> {
        match &self.backend {
            Backend::Sqlite(s) => s.recent_lateness(window).await,
            Backend::Postgres(p) => p.recent_lateness(window).await,
        }
    }

    /// Pays a hold whose deadline has not passed. When its expiry job
    /// waits for the payment, the payment's transaction signals it (`paid`),
    /// so it ends at once instead of at the deadline.
    pub async fn pay(&self, id: &str) -> Result<Reservation> {
        validate_id("a reservation id", id)?;
        match &self.backend {
            Backend::Sqlite(s) => s.transition(Action::Pay, id, None).await,
            Backend::Postgres(p) => p.transition(Action::Pay, id, None).await,
        }
    }

    /// Moves the deadline of a hold whose deadline has not passed `by`
    /// later, and schedules the new deadline's expiry job in the same
    /// transaction. The old job will find the deadline changed.
    pub async fn extend(&self, id: &str, by: Duration) -> Result<Reservation> {
        validate_id("a reservation id", id)?;
        validate_window("an extension", by)?;
        match &self.backend {
            Backend::Sqlite(s) => s.transition(Action::Extend, id, Some(by)).await,
            Backend::Postgres(p) => p.transition(Action::Extend, id, Some(by)).await,
        }
    }

    /// Cancels a hold whose deadline has not passed.
    pub async fn cancel(&self, id: &str) -> Result<Reservation> {
        validate_id("a reservation id", id)?;
        match &self.backend {
            Backend::Sqlite(s) => s.transition(Action::Cancel, id, None).await,
            Backend::Postgres(p) => p.transition(Action::Cancel, id, None).await,
        }
    }

    /// The expiry transition: one transaction that records the outcome and,
    /// when the hold is still held with the job's deadline and that
    /// deadline has passed, expires it and records the idempotency key and
    /// the lateness.
    pub async fn expire(&self, run: ExpiryRun) -> Result<Decision> {
        run.payload.validate()?;
        match &self.backend {
            Backend::Sqlite(s) => s.expire(run).await,
            Backend::Postgres(p) => p.expire(run).await,
        }
    }

    /// One reservation.
    pub async fn get(&self, id: &str) -> Result<Reservation> {
        validate_id("a reservation id", id)?;
        let found = match &self.backend {
            Backend::Sqlite(s) => s.get(id).await?,
            Backend::Postgres(p) => p.get(id).await?,
        };
        found.ok_or_else(|| unknown_reservation(id))
    }

    /// Every reservation, oldest first (up to 100,000).
    pub async fn list(&self) -> Result<Vec<Reservation>> {
        match &self.backend {
            Backend::Sqlite(s) => s.list().await,
            Backend::Postgres(p) => p.list().await,
        }
    }

    /// The raw figures behind `stats`.
    pub async fn figures(&self) -> Result<Figures> {
        let mut f = match &self.backend {
            Backend::Sqlite(s) => s.figures().await?,
            Backend::Postgres(p) => p.figures().await?,
        };
        let admin = self.admin();
        let filter = JobFilter {
            state: Some(JobState::Dead),
            kind: Some(Name::parse("kind", EXPIRY_KIND)?),
            limit: Some(10_000),
            ..JobFilter::default()
        };
        f.dead_jobs = u64::try_from(admin.list(&filter).await?.len()).unwrap_or(u64::MAX);
        Ok(f)
    }

    /// The expiry jobs, oldest first (up to 10,000), each with the
    /// idempotency key its next delivery uses.
    pub async fn jobs(&self) -> Result<Vec<JobView>> {
        let filter = JobFilter {
            kind: Some(Name::parse("kind", EXPIRY_KIND)?),
            limit: Some(10_000),
            ..JobFilter::default()
        };
        let audit = self.replay_audit().await?;
        Ok(self
            .store()
            .list(&filter)
            .await?
            .iter()
            .map(|job| {
                let mut view = JobView::from(job);
                let minted = audit
                    .iter()
                    .filter(|a| a.job_id == view.id && a.replay_no <= job.replays)
                    .filter_map(|a| a.new_key.as_ref().map(|k| (a.replay_no, k)))
                    .max_by_key(|(n, _)| *n);
                if let Some((_, key)) = minted {
                    view.idempotency_key = Some(key.clone());
                }
                view
            })
            .collect())
    }

    async fn minted_key(&self, job_id: &str, replays: u32) -> Result<Option<String>> {
        match &self.backend {
            Backend::Sqlite(s) => s.minted_key(job_id, replays).await,
            Backend::Postgres(p) => p.minted_key(job_id, replays).await,
        }
    }

    /// The application's replay audit, oldest first.
    pub async fn replay_audit(&self) -> Result<Vec<AuditRow>> {
        match &self.backend {
            Backend::Sqlite(s) => s.replay_audit().await,
            Backend::Postgres(p) => p.replay_audit().await,
        }
    }

    /// The idempotency key a delivery of `job_id` in replay cycle `replays`
    /// uses: the newest key an operator minted up to that cycle, else the
    /// payload's.
    pub async fn effective_key(
        &self,
        job_id: &str,
        replays: u32,
        payload_key: &str,
    ) -> Result<String> {
        Ok(self
            .minted_key(job_id, replays)
            .await?
            .unwrap_or_else(|| payload_key.to_owned()))
    }
}

// ---------------------------------------------------------------------------
// The operator's view of the expiry jobs

/// An expiry job as the operator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobView {
    /// The stable id.
    pub id: String,
    /// The reservation it expires (from the payload).
    pub reservation_id: Option<String>,
    /// The deadline it enforces (from the payload).
    pub hold_until: Option<Timestamp>,
    /// The idempotency key in force: the newest one an operator minted by
    /// a replay, else the payload's.
    pub idempotency_key: Option<String>,
    /// `ready`, `running`, `done`, `dead` or `cancelled`.
    pub state: String,
    /// Attempts in the current replay cycle.
    pub attempts: u32,
    /// The attempt budget.
    pub max_attempts: u32,
    /// Operator replays.
    pub replays: u32,
    /// When it is (or was) due.
    pub available_at: Timestamp,
    /// End of the current lease, while running.
    pub lease_until: Option<Timestamp>,
    /// The last recorded error.
    pub last_error: Option<String>,
    /// Its class.
    pub last_error_class: Option<String>,
}

impl From<&Job> for JobView {
    fn from(j: &Job) -> Self {
        let payload: Option<ExpiryPayload> = j.payload.decode().ok();
        JobView {
            id: j.id.to_string(),
            reservation_id: payload.as_ref().map(|p| p.reservation_id.clone()),
            hold_until: payload.as_ref().map(|p| p.hold_until),
            idempotency_key: payload.map(|p| p.idempotency_key),
            state: j.state.as_str().to_owned(),
            attempts: j.attempts,
            max_attempts: j.max_attempts,
            replays: j.replays,
            available_at: j.available_at,
            lease_until: j.lease_until,
            last_error: j.last_error.clone(),
            last_error_class: j.last_error_class.map(|c| c.as_str().to_owned()),
        }
    }
}

impl fmt::Display for JobView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} state={} attempts={}/{} replays={} available_at={}",
            self.id, self.state, self.attempts, self.max_attempts, self.replays, self.available_at
        )?;
        if let Some(h) = self.hold_until {
            write!(f, " hold_until={h}")?;
        }
        if let Some(k) = &self.idempotency_key {
            write!(f, " key={k}")?;
        }
        if let Some(l) = self.lease_until {
            write!(f, " lease_until={l}")?;
        }
        if let Some(c) = &self.last_error_class {
            write!(f, " error_class={c}")?;
        }
        if let Some(e) = &self.last_error {
            write!(f, " last_error={e:?}")?;
        }
        Ok(())
    }
}

/// The operator name used when `--by` is not given: `$USER`, then
/// `$LOGNAME`, else `unknown`.
pub fn default_operator() -> String {
    ["USER", "LOGNAME"]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok())
        .map(|s| s.trim().to_owned())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use errand::{JobId, Payload, Schedule};
    use time::Date;

    #[test]
    fn the_expiry_job_carries_the_deadline_and_is_due_at_it() {
        let deadline = Timestamp::from_millis(1_767_225_600_123);
        let job = expiry_job("r1", 2, deadline).unwrap();
        assert_eq!(job.id.as_ref().map(JobId::as_str), Some("expire:r1:2"));
        assert_eq!(job.schedule, Schedule::At(deadline));
        assert_eq!(job.max_attempts, MAX_ATTEMPTS);
        let p: ExpiryPayload = job.payload.decode().unwrap();
        assert_eq!(p.hold_until, deadline);
        assert_eq!(p.idempotency_key, "expire:r1:1767225600123");
    }

    #[test]
    fn windows_and_guests_are_validated() {
        assert!(validate_window("w", Duration::ZERO).is_err());
        assert!(validate_window("w", Duration::from_millis(1)).is_ok());
        assert!(validate_window("w", MAX_WINDOW + Duration::from_secs(1)).is_err());
        assert!(validate_guest("Ada Lovelace").is_ok());
        assert!(validate_guest(" ").is_err());
        assert!(validate_guest("a\nb").is_err());
        assert!(validate_guest(&"g".repeat(201)).is_err());
    }

    fn date(s: &str) -> Date {
        parse_date(s).unwrap()
    }

    #[test]
    fn a_stay_defaults_to_tonight_in_utc_and_is_checked() {
        // 2026-01-01T23:59:59.999Z, then a millisecond later.
        let late = Timestamp::from_millis(1_767_311_999_999);
        let tonight = StayRequest::tonight().resolve(late).unwrap();
        assert_eq!(
            (tonight.from, tonight.to),
            (date("2026-01-01"), date("2026-01-02"))
        );
        assert_eq!(tonight.nights(), 1);
        let next = StayRequest::tonight()
            .resolve(Timestamp::from_millis(1_767_312_000_000))
            .unwrap();
        assert_eq!(next.from, date("2026-01-02"));
        let from_only = StayRequest {
            from: Some(date("2026-02-27")),
            to: None,
        };
        assert_eq!(from_only.resolve(late).unwrap().to, date("2026-02-28"));
        let refused = |r: StayRequest| r.resolve(late).unwrap_err().to_string();
        assert!(
            refused(StayRequest::dates(date("2025-12-31"), date("2026-01-02")))
                .contains("before today (2026-01-01 in UTC)")
        );
        assert!(
            refused(StayRequest::dates(date("2026-01-03"), date("2026-01-03")))
                .contains("must be after --from")
        );
        assert!(
            refused(StayRequest::dates(date("2026-01-01"), date("2027-01-02")))
                .contains("at most 365 nights")
        );
        assert!(
            StayRequest::dates(date("2026-01-01"), date("2027-01-01"))
                .resolve(late)
                .is_ok()
        );
    }

    #[test]
    fn stays_overlap_when_they_share_a_night() {
        let s = |a: &str, b: &str| Stay {
            from: date(a),
            to: date(b),
        };
        let base = s("2026-03-01", "2026-03-04");
        assert!(base.overlaps(&s("2026-03-03", "2026-03-05")));
        assert!(base.overlaps(&s("2026-02-01", "2026-03-02")));
        assert!(base.overlaps(&s("2026-03-02", "2026-03-03")));
        assert!(!base.overlaps(&s("2026-03-04", "2026-03-05")));
        assert!(!base.overlaps(&s("2026-02-27", "2026-03-01")));
        assert_eq!(base.to_string(), "2026-03-01 to 2026-03-04 (3 nights)");
    }

    #[test]
    fn dates_are_yyyy_mm_dd() {
        assert_eq!(iso_date(date("2099-01-09")), "2099-01-09");
        for bad in [
            "2026-02-30",
            "2026-13-01",
            "26-01-01",
            "2026-1-1",
            "tomorrow",
            "",
        ] {
            let e = parse_date(bad).unwrap_err();
            assert!(e.contains("YYYY-MM-DD"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_sqlite_trigger_raises_the_overlap_refusal_text() {
        let migration = include_str!("../migrations/sqlite/V2__stays.sql");
        assert_eq!(
            migration
                .matches(&format!("RAISE(ABORT, '{OVERLAP}')"))
                .count(),
            2,
            "both triggers raise the text the application maps to a refusal"
        );
        let pg = include_str!("../migrations/postgres/V2__stays.sql");
        assert!(pg.contains(&format!(
            "ADD CONSTRAINT {}",
            crate::error::OVERLAP_CONSTRAINT
        )));
    }

    #[test]
    fn a_payload_with_unknown_fields_is_invalid() {
        let p = Payload::from_json_text(
            r#"{"reservation_id":"r","hold_until":0,"idempotency_key":"k","x":1}"#,
        )
        .unwrap();
        assert!(p.decode::<ExpiryPayload>().is_err());
    }
}
