//! The reservations domain: statuses, stays, the expiry job, refusals and
//! the rows both backends read and write. `app.rs` holds the operations
//! (`App`) on top of the two backends; the backends (`pg.rs`, `sqlite.rs`)
//! and the errors take their types from here, so no file imports from the
//! one that imports it.

use std::fmt;
use std::time::Duration;

use errand::{JobId, NewJob, Payload, Schedule, Timestamp};
use serde::{Deserialize, Serialize, Serializer};
use time::Date;

pub use crate::error::OVERLAP;
use crate::error::{Error, Result};

/// The kind of the expiry job.
pub const EXPIRY_KIND: &str = "expire-hold";
/// The queue expiry jobs go to.
pub const EXPIRY_QUEUE: &str = "reservations";
/// The attempt budget of an expiry job (per replay cycle).
pub const MAX_ATTEMPTS: u32 = 7;
/// How long a hold lasts when `--window` is not given.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(15 * 60);
/// The longest hold window and the longest single extension.
pub const MAX_WINDOW: Duration = Duration::from_secs(30 * 86_400);
/// Where `refinery` records the application's migrations.
pub const APP_HISTORY_TABLE: &str = "reservations_schema_history";
/// The version of the application schema this build knows.
pub const APP_SCHEMA_VERSION: i64 = 2;
/// The longest stay one reservation may hold, in nights.
pub const MAX_NIGHTS: i64 = 365;
/// The units `init` creates: id and name.
pub const SEED_UNITS: [(&str, &str); 4] = [
    ("unit-101", "Harbour studio"),
    ("unit-102", "Harbour one-bedroom"),
    ("unit-201", "Garden suite"),
    ("unit-301", "Roof apartment"),
];

// ---------------------------------------------------------------------------
// The model

/// Where a reservation is in its life. `held` is the only status that
/// changes; the other three are final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Holding the unit until its deadline.
    Held,
    /// Paid before the deadline.
    Paid,
    /// Expired by its expiry job after the deadline.
    Expired,
    /// Cancelled by the guest before the deadline.
    Cancelled,
}

impl Status {
    /// Every status, in display order.
    pub const ALL: [Status; 4] = [
        Status::Held,
        Status::Paid,
        Status::Expired,
        Status::Cancelled,
    ];

    /// The stored and printed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Held => "held",
            Status::Paid => "paid",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Result<Self> {
        Status::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                Error::Database(format!("unknown reservation status {s:?} in the database"))
            })
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reservation as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reservation {
    /// Its id (a UUIDv7).
    pub id: String,
    /// The unit it holds.
    pub unit: String,
    /// The guest.
    pub guest: String,
    /// The first night of the stay (`YYYY-MM-DD`, UTC).
    #[serde(serialize_with = "serialize_date")]
    pub stay_from: Date,
    /// The day the stay ends: its last night is the one before
    /// (`YYYY-MM-DD`, UTC).
    #[serde(serialize_with = "serialize_date")]
    pub stay_to: Date,
    /// `held`, `paid`, `expired` or `cancelled`.
    pub status: Status,
    /// The business deadline (RFC 3339).
    pub hold_until: Timestamp,
    /// How many deadlines it has had (1 + extensions).
    pub generation: u32,
    /// The expiry job of the current deadline.
    pub job_id: String,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it was paid.
    pub paid_at: Option<Timestamp>,
    /// When it was cancelled.
    pub cancelled_at: Option<Timestamp>,
    /// When it expired.
    pub expired_at: Option<Timestamp>,
    /// `expired_at - hold_until` in milliseconds, for an expired hold.
    pub lateness_ms: Option<i64>,
}

impl fmt::Display for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} unit={} guest={:?} from={} to={} status={} hold_until={}",
            self.id,
            self.unit,
            self.guest,
            iso_date(self.stay_from),
            iso_date(self.stay_to),
            self.status,
            self.hold_until
        )?;
        let ends = [
            ("paid_at", self.paid_at),
            ("cancelled_at", self.cancelled_at),
            ("expired_at", self.expired_at),
        ];
        for (name, at) in ends {
            if let Some(t) = at {
                write!(f, " {name}={t}")?;
            }
        }
        if let Some(ms) = self.lateness_ms {
            write!(f, " lateness_ms={ms}")?;
        }
        Ok(())
    }
}

impl Reservation {
    /// The nights it occupies (while `held` or `paid`).
    pub fn stay(&self) -> Stay {
        Stay {
            from: self.stay_from,
            to: self.stay_to,
        }
    }
}

// ---------------------------------------------------------------------------
// Stays

/// The nights a reservation occupies its unit: from `from` up to, not
/// including, `to` (dates in UTC). Two stays overlap when they share a
/// night; one ending on the day the other starts does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Stay {
    /// The first night.
    pub from: Date,
    /// The day it ends (the morning after the last night).
    pub to: Date,
}

impl Stay {
    /// How many nights.
    pub fn nights(&self) -> i64 {
        (self.to - self.from).whole_days()
    }

    /// Whether the two share a night.
    pub fn overlaps(&self, other: &Stay) -> bool {
        self.from < other.to && other.from < self.to
    }
}

impl fmt::Display for Stay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.nights();
        write!(
            f,
            "{} to {} ({n} night{})",
            iso_date(self.from),
            iso_date(self.to),
            if n == 1 { "" } else { "s" }
        )
    }
}

/// The stay a hold asks for: `--from` and `--to`, each optional. With
/// neither it is tonight: today's date to tomorrow's, in UTC, on the
/// database's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StayRequest {
    /// The first night (default: today, UTC).
    pub from: Option<Date>,
    /// The day it ends (default: the day after `from`).
    pub to: Option<Date>,
}

impl StayRequest {
    /// Tonight.
    pub fn tonight() -> Self {
        StayRequest::default()
    }

    /// The nights from `from` up to, not including, `to`.
    pub fn dates(from: Date, to: Date) -> Self {
        StayRequest {
            from: Some(from),
            to: Some(to),
        }
    }

    /// The stay on the day `now` falls on (UTC): defaults filled in, and
    /// refused when it starts before today, ends on or before its first
    /// night, or lasts more than [`MAX_NIGHTS`].
    pub fn resolve(&self, now: Timestamp) -> Result<Stay> {
        let today = utc_date(now)?;
        let from = self.from.unwrap_or(today);
        let to = match self.to {
            Some(to) => to,
            None => from.next_day().ok_or_else(|| {
                Error::Invalid(format!(
                    "the stay cannot start on {} (no later date can end it); nothing was written",
                    iso_date(from)
                ))
            })?,
        };
        if from < today {
            return Err(Error::Invalid(format!(
                "the stay starts on {}, before today ({} in UTC); a hold is for tonight or a later night; nothing was written",
                iso_date(from),
                iso_date(today)
            )));
        }
        if to <= from {
            return Err(Error::Invalid(format!(
                "--to ({}) must be after --from ({}): a stay is the nights from --from up to, not including, --to; nothing was written",
                iso_date(to),
                iso_date(from)
            )));
        }
        let stay = Stay { from, to };
        if stay.nights() > MAX_NIGHTS {
            return Err(Error::Invalid(format!(
                "a stay may last at most {MAX_NIGHTS} nights (got {stay}); nothing was written"
            )));
        }
        Ok(stay)
    }
}

/// The UTC date `t` falls on.
pub fn utc_date(t: Timestamp) -> Result<Date> {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.as_millis()) * 1_000_000)
        .map(|d| d.date())
        .map_err(|e| Error::Invalid(format!("the time {t} has no date: {e}")))
}

/// Parses a `YYYY-MM-DD` date.
pub fn parse_date(s: &str) -> std::result::Result<Date, String> {
    let format = time::format_description::parse_borrowed::<2>("[year]-[month]-[day]")
        .map_err(|e| format!("the date format is broken: {e}"))?;
    Date::parse(s.trim(), &format).map_err(|e| {
        format!("`{s}` is not a date ({e}); write dates like 2026-03-01 (YYYY-MM-DD, UTC)")
    })
}

/// `YYYY-MM-DD`.
pub fn iso_date(d: Date) -> String {
    format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
}

fn serialize_date<S: Serializer>(d: &Date, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&iso_date(*d))
}

/// The held or paid reservation a stay ran into.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Occupant {
    pub(crate) id: String,
    pub(crate) status: Status,
    pub(crate) stay: Stay,
    pub(crate) hold_until: Timestamp,
}

/// The refusal of `stay` on `unit` because it overlaps `occupant` (unknown
/// when the database refused the row and the occupant was gone by the time
/// it was looked up).
pub(crate) fn overlap_refusal(
    unit: &str,
    stay: &Stay,
    occupant: Option<&Occupant>,
    now: Timestamp,
) -> Error {
    let who = match occupant {
        None => String::new(),
        Some(o) if o.status == Status::Held && o.hold_until <= now => format!(
            " (reservation `{}`, held for {}: its hold ran out at {} but no expiry worker has expired it yet; it frees the unit once `reservations work` expires it)",
            o.id, o.stay, o.hold_until
        ),
        Some(o) if o.status == Status::Held => format!(
            " (reservation `{}`, held for {} until {})",
            o.id, o.stay, o.hold_until
        ),
        Some(o) => format!(" (reservation `{}`, {} for {})", o.id, o.status, o.stay),
    };
    Error::Refused(format!(
        "unit `{unit}` is not free for {stay}: {OVERLAP}{who}; choose other dates or another unit; nothing was written"
    ))
}

/// Reservations made before stays existed that would share a night once
/// each gets the night of the day it was made: two held or paid ones of one
/// unit made on the same day.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LegacyOverlap {
    pub(crate) unit: String,
    pub(crate) night: String,
    pub(crate) ids: Vec<String>,
}

/// The refusal to migrate a database holding double bookings.
pub(crate) fn legacy_overlap_refusal(found: &[LegacyOverlap]) -> Error {
    let list: Vec<String> = found
        .iter()
        .map(|o| {
            format!(
                "unit `{}` on the night of {}: {}",
                o.unit,
                o.night,
                o.ids
                    .iter()
                    .map(|id| format!("`{id}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    Error::Refused(format!(
        "this database holds double bookings made before stays were enforced: each reservation made so far gets the night of the day it was made (UTC), and then {}; decide which guest keeps each night, end the others in SQL (set status to 'cancelled' and cancelled_at to the current time), then run `reservations init` again; nothing was changed",
        list.join("; ")
    ))
}

/// The payload of an expiry job: the business data of one deadline. The
/// delivery time is the job's own `available_at` and never appears here.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpiryPayload {
    /// The reservation to expire.
    pub reservation_id: String,
    /// The deadline this job enforces; the expiry happens only if the
    /// reservation still has exactly this deadline.
    pub hold_until: Timestamp,
    /// Recorded with the transition; a redelivery finds it and does nothing.
    pub idempotency_key: String,
}

impl ExpiryPayload {
    /// Checks the fields a decoded payload must have.
    pub fn validate(&self) -> Result<()> {
        if self.reservation_id.is_empty() || self.reservation_id.len() > 100 {
            return Err(Error::Invalid(
                "the payload's reservation_id must be 1 to 100 bytes".into(),
            ));
        }
        if self.idempotency_key.is_empty() || self.idempotency_key.len() > 200 {
            return Err(Error::Invalid(
                "the payload's idempotency_key must be 1 to 200 bytes".into(),
            ));
        }
        Ok(())
    }
}

/// The expiry job id of a reservation's `generation`-th deadline.
pub fn expiry_job_id(reservation_id: &str, generation: u32) -> String {
    format!("expire:{reservation_id}:{generation}")
}

/// The idempotency key of expiring `reservation_id` at `hold_until`.
pub fn idempotency_key(reservation_id: &str, hold_until: Timestamp) -> String {
    format!("expire:{reservation_id}:{}", hold_until.as_millis())
}

/// The expiry job of a deadline: due at the deadline, 7 attempts, with the
/// deadline as the job's business deadline too (so Errand measures its
/// lateness: `errand show`, the workers' lateness histogram, `errand stats
/// --check --max-lateness`).
pub fn expiry_job(reservation_id: &str, generation: u32, hold_until: Timestamp) -> Result<NewJob> {
    let payload = ExpiryPayload {
        reservation_id: reservation_id.to_owned(),
        hold_until,
        idempotency_key: idempotency_key(reservation_id, hold_until),
    };
    Ok(NewJob::new(EXPIRY_KIND, Payload::from_value(&payload)?)?
        .on_queue(EXPIRY_QUEUE)?
        .with_id(JobId::new(expiry_job_id(reservation_id, generation))?)
        .with_max_attempts(MAX_ATTEMPTS)?
        .scheduled(Schedule::At(hold_until))
        .with_deadline(hold_until))
}

/// One run of the expiry handler.
#[derive(Clone, Debug)]
pub struct ExpiryRun {
    /// The job.
    pub job_id: String,
    /// Its attempt number.
    pub attempt: u32,
    /// How many times it was replayed (selects a minted key, if any).
    pub replays: u32,
    /// Its payload.
    pub payload: ExpiryPayload,
    /// Make the transaction fail with a real database timeout first.
    pub simulate_timeout: bool,
}

/// What the expiry transition decided. Every variant but `NotYetDue` is
/// recorded in `expiry_outcomes` in the transaction that decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The hold was still held with this deadline, and the deadline had
    /// passed: it is expired now.
    Expired {
        /// When it expired (the database clock).
        expired_at: Timestamp,
        /// `expired_at - hold_until`.
        lateness_ms: i64,
    },
    /// This job's idempotency key is already recorded: an earlier delivery
    /// expired the hold. Nothing changed.
    AlreadyDone {
        /// When that earlier delivery expired it.
        expired_at: Timestamp,
    },
    /// The reservation was paid, cancelled or extended meanwhile (or
    /// expired under another key): acknowledged without expiring.
    Changed {
        /// Its status now.
        status: Status,
        /// Its deadline now.
        hold_until: Timestamp,
    },
    /// The deadline has not passed on the database clock (an early
    /// delivery); nothing was written.
    NotYetDue {
        /// The deadline.
        hold_until: Timestamp,
        /// The database clock.
        now: Timestamp,
    },
}

impl Decision {
    /// The reported name: `expired`, `already-done`, `changed`, `not-yet-due`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Decision::Expired { .. } => "expired",
            Decision::AlreadyDone { .. } => "already-done",
            Decision::Changed { .. } => "changed",
            Decision::NotYetDue { .. } => "not-yet-due",
        }
    }

    /// A short explanation.
    pub fn detail(&self) -> String {
        match self {
            Decision::Expired {
                expired_at,
                lateness_ms,
            } => format!("expired at {expired_at}, {lateness_ms} ms after its deadline"),
            Decision::AlreadyDone { expired_at } => {
                format!("an earlier delivery expired it at {expired_at}; nothing changed")
            }
            Decision::Changed { status, hold_until } => match status {
                Status::Held => format!("extended: it is held until {hold_until} now"),
                other => format!("it is {other} now; not expired"),
            },
            Decision::NotYetDue { hold_until, now } => {
                format!("its deadline {hold_until} is still ahead (now {now})")
            }
        }
    }
}

/// The text describing a `changed` decision, as stored.
pub(crate) fn changed_detail(status: Status, hold_until: Timestamp) -> String {
    Decision::Changed { status, hold_until }.detail()
}

/// A user transition, for refusal messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    Pay,
    Extend,
    Cancel,
}

impl Action {
    fn verb(self) -> &'static str {
        match self {
            Action::Pay => "paid",
            Action::Extend => "extended",
            Action::Cancel => "cancelled",
        }
    }
}

/// Why a conditional transition changed no row, read off the row as it is.
pub(crate) fn refusal(action: Action, r: &Reservation, now: Timestamp) -> Error {
    let (id, verb) = (&r.id, action.verb());
    let at = |t: Option<Timestamp>| t.map_or_else(|| "?".to_owned(), |t| t.to_string());
    match r.status {
        Status::Paid => Error::Refused(format!(
            "reservation `{id}` is already paid (at {}); it cannot be {verb}",
            at(r.paid_at)
        )),
        Status::Expired => Error::Refused(format!(
            "reservation `{id}` expired at {} (its hold ran until {}); it cannot be {verb}",
            at(r.expired_at),
            r.hold_until
        )),
        Status::Cancelled => Error::Refused(format!(
            "reservation `{id}` was cancelled at {}; it cannot be {verb}",
            at(r.cancelled_at)
        )),
        Status::Held if r.hold_until <= now => Error::Refused(format!(
            "the hold on reservation `{id}` ran out at {}; it is waiting for its expiry and cannot be {verb}",
            r.hold_until
        )),
        Status::Held => Error::Refused(format!(
            "reservation `{id}` changed while it was being {verb}; nothing was written, try again"
        )),
    }
}

pub(crate) fn unknown_reservation(id: &str) -> Error {
    Error::NotFound(format!(
        "no reservation `{id}` (list them with `reservations list DB`); nothing was written"
    ))
}

pub(crate) fn unknown_unit(unit: &str, units: &[String]) -> Error {
    Error::NotFound(format!(
        "no unit `{unit}`; the units are {}; nothing was written",
        units.join(", ")
    ))
}

/// Checks a guest name: 1 to 200 characters, no control characters.
pub fn validate_guest(guest: &str) -> Result<()> {
    let n = guest.chars().count();
    if guest.trim().is_empty() || n > 200 {
        return Err(Error::Invalid(format!(
            "a guest name must be 1 to 200 characters (got {n})"
        )));
    }
    if guest.chars().any(char::is_control) {
        return Err(Error::Invalid(
            "a guest name may not contain control characters".into(),
        ));
    }
    Ok(())
}

/// Checks a hold window or an extension.
pub fn validate_window(what: &str, d: Duration) -> Result<()> {
    if d < Duration::from_millis(1) || d > MAX_WINDOW {
        return Err(Error::Invalid(format!(
            "{what} must be between 1ms and {} (got {})",
            humantime::format_duration(MAX_WINDOW),
            humantime::format_duration(d)
        )));
    }
    Ok(())
}

pub(crate) fn validate_id(what: &str, id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 100 || id.chars().any(char::is_control) {
        return Err(Error::Invalid(format!(
            "{what} must be 1 to 100 printable characters"
        )));
    }
    Ok(())
}

/// What `init` found and left.
#[derive(Clone, Debug, Serialize)]
pub struct InitReport {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Units this run created (empty when they were already there).
    pub created_units: Vec<String>,
    /// Every unit.
    pub units: Vec<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct AuditEntry {
    pub(crate) job_id: String,
    pub(crate) replay_no: u32,
    pub(crate) operator: String,
    pub(crate) reason: Option<String>,
    pub(crate) old_key: String,
    pub(crate) new_key: Option<String>,
}

/// A row of the application's replay audit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditRow {
    /// The job.
    pub job_id: String,
    /// The job's `replays` after this replay.
    pub replay_no: u32,
    /// Who replayed it.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
    /// The key in force before.
    pub old_key: String,
    /// The minted key, if any.
    pub new_key: Option<String>,
    /// When.
    pub created_at: Timestamp,
}

/// The lateness of the recent past, as `stats --check` reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecentLateness {
    /// When it was read (the database clock).
    pub at: Timestamp,
    /// How far back expiries count.
    #[serde(serialize_with = "serialize_secs", rename = "window_secs")]
    pub window: Duration,
    /// Holds expired in the window.
    pub expired: u64,
    /// The largest lateness among them, in milliseconds.
    pub max_expired_ms: Option<i64>,
    /// Holds still held past their deadline now (no worker has expired
    /// them yet).
    pub overdue: u64,
    /// How far past its deadline the oldest of them is, in milliseconds.
    pub max_overdue_ms: Option<i64>,
}

fn serialize_secs<S: Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}

/// The raw figures behind `stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Figures {
    /// The lateness of every expiry, in milliseconds, ascending.
    pub lateness_ms: Vec<i64>,
    /// Handler outcomes: `expired`, `already-done`, `changed`.
    pub outcomes: Vec<(String, u64)>,
    /// Reservations by status.
    pub statuses: Vec<(Status, u64)>,
    /// Expiry jobs in `dead`.
    pub dead_jobs: u64,
}
