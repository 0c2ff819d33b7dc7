//! Job rows and their columns: reading a row of `errand_jobs` (or any
//! statement's columns) into Errand's types, and one job by id.

use errand_core::{
    DependencyFailure, Error, ErrorClass, Job, JobId, JobKey, JobState, Name, Payload, Result,
    Timestamp, TraceParent, WorkflowId,
};
use rusqlite::{Connection, OptionalExtension, Row, RowIndex, named_params};

use crate::conn::map_err;

const GET: &str = include_str!("../queries/get.sql");

fn conversion(col: usize, msg: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(
        col,
        rusqlite::types::Type::Text,
        Box::<dyn std::error::Error + Send + Sync>::from(msg),
    )
}

pub(crate) fn u32_col<I: RowIndex + Copy + std::fmt::Debug>(
    row: &Row<'_>,
    col: I,
) -> rusqlite::Result<u32> {
    let v: i64 = row.get(col)?;
    u32::try_from(v).map_err(|_| conversion(0, format!("column {col:?} out of range: {v}")))
}

pub(crate) fn ts_col<I: RowIndex>(row: &Row<'_>, col: I) -> rusqlite::Result<Timestamp> {
    row.get::<_, i64>(col).map(Timestamp::from_millis)
}

pub(crate) fn opt_ts_col<I: RowIndex>(
    row: &Row<'_>,
    col: I,
) -> rusqlite::Result<Option<Timestamp>> {
    Ok(row.get::<_, Option<i64>>(col)?.map(Timestamp::from_millis))
}

pub(crate) fn class_col<I: RowIndex>(
    row: &Row<'_>,
    col: I,
) -> rusqlite::Result<Option<ErrorClass>> {
    match row.get::<_, Option<String>>(col)? {
        None => Ok(None),
        Some(s) => s
            .parse()
            .map(Some)
            .map_err(|e: Error| conversion(0, e.to_string())),
    }
}

pub(crate) fn u64_col(row: &Row<'_>, col: usize) -> rusqlite::Result<u64> {
    let v: i64 = row.get(col)?;
    Ok(u64::try_from(v).unwrap_or(0))
}

pub(crate) fn name_col(row: &Row<'_>, col: usize) -> rusqlite::Result<Name> {
    let s: String = row.get(col)?;
    Name::parse("queue", s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(col, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// `errand_jobs`'s columns are [`JOB_COLUMNS`], in that order: the order of
/// `SELECT *` and `RETURNING *`, which [`job_from_row`] reads by position
/// (a lookup by name scans the column names, a tenth of a claim's time).
/// The schema check at open verifies the table has exactly these.
pub(crate) use errand_core::JOB_COLUMNS;

/// Positions in [`JOB_COLUMNS`].
pub(crate) mod col {
    pub const ID: usize = 0;
    pub const QUEUE: usize = 1;
    pub const KIND: usize = 2;
    pub const STATE: usize = 3;
    pub const PAYLOAD: usize = 4;
    pub const PRIORITY: usize = 5;
    pub const ATTEMPTS: usize = 6;
    pub const MAX_ATTEMPTS: usize = 7;
    pub const REPLAYS: usize = 8;
    pub const LEASE_EXPIRIES: usize = 9;
    pub const MAX_LEASE_EXPIRIES: usize = 10;
    pub const GIVE_UP_AT: usize = 11;
    pub const AVAILABLE_AT: usize = 12;
    pub const CREATED_AT: usize = 13;
    pub const UPDATED_AT: usize = 14;
    pub const LEASE_TOKEN: usize = 15;
    pub const LEASE_UNTIL: usize = 16;
    pub const LAST_ERROR: usize = 17;
    pub const LAST_ERROR_CLASS: usize = 18;
    pub const FINISHED_AT: usize = 19;
    pub const KEY_NAME: usize = 20;
    pub const KEY_LIMIT: usize = 21;
    pub const KEY_ORDERED: usize = 22;
    pub const ATTEMPT_STARTED_AT: usize = 23;
    pub const DEADLINE: usize = 24;
    pub const TRACEPARENT: usize = 25;
    pub const WAITING_ON: usize = 26;
    pub const ON_DEPENDENCY_FAILURE: usize = 27;
    pub const HAS_DEPENDENTS: usize = 28;
    pub const OUTPUT: usize = 29;
    pub const PROGRESS: usize = 30;
    pub const WORKFLOW: usize = 31;
    pub const TAGS: usize = 32;
    pub const META: usize = 33;
    pub const UNIQUE_KEY: usize = 34;
    pub const BATCH: usize = 35;
    pub const AWAIT_SIGNAL: usize = 36;
    pub const AWAIT_UNTIL: usize = 37;
    pub const ON_AWAIT_TIMEOUT: usize = 38;
    pub const SIGNAL_SEQ: usize = 39;
    pub const ADDED_BY: usize = 40;
}

/// Maps a row of `errand_jobs` (`SELECT *` or `RETURNING *`) to a [`Job`].
pub(crate) fn job_from_row(row: &Row<'_>) -> rusqlite::Result<Job> {
    let count = row.as_ref().column_count();
    if count != JOB_COLUMNS.len() {
        return Err(conversion(
            0,
            format!(
                "a job row has {count} columns, expected the {} of errand_jobs",
                JOB_COLUMNS.len()
            ),
        ));
    }
    let text = |i: usize| row.get::<_, String>(i);
    let id = JobId::new(text(col::ID)?).map_err(|e| conversion(col::ID, e.to_string()))?;
    let queue = Name::parse("queue", text(col::QUEUE)?)
        .map_err(|e| conversion(col::QUEUE, e.to_string()))?;
    let kind =
        Name::parse("kind", text(col::KIND)?).map_err(|e| conversion(col::KIND, e.to_string()))?;
    let state: JobState = text(col::STATE)?
        .parse()
        .map_err(|e: Error| conversion(col::STATE, e.to_string()))?;
    let priority: i64 = row.get(col::PRIORITY)?;
    Ok(Job {
        id,
        queue,
        kind,
        state,
        payload: Payload::from_stored(text(col::PAYLOAD)?),
        priority: i16::try_from(priority)
            .map_err(|_| conversion(col::PRIORITY, "priority out of range".into()))?,
        attempts: u32_col(row, col::ATTEMPTS)?,
        max_attempts: u32_col(row, col::MAX_ATTEMPTS)?,
        replays: u32_col(row, col::REPLAYS)?,
        lease_expiries: u32_col(row, col::LEASE_EXPIRIES)?,
        max_lease_expiries: u32_col(row, col::MAX_LEASE_EXPIRIES)?,
        give_up_at: opt_ts_col(row, col::GIVE_UP_AT)?,
        available_at: ts_col(row, col::AVAILABLE_AT)?,
        created_at: ts_col(row, col::CREATED_AT)?,
        updated_at: ts_col(row, col::UPDATED_AT)?,
        lease_until: opt_ts_col(row, col::LEASE_UNTIL)?,
        attempt_started_at: opt_ts_col(row, col::ATTEMPT_STARTED_AT)?,
        last_error: row.get(col::LAST_ERROR)?,
        last_error_class: class_col(row, col::LAST_ERROR_CLASS)?,
        finished_at: opt_ts_col(row, col::FINISHED_AT)?,
        key: match row.get::<_, Option<String>>(col::KEY_NAME)? {
            Some(name) => Some(JobKey::from_stored(
                name,
                u32_col(row, col::KEY_LIMIT)?,
                row.get(col::KEY_ORDERED)?,
            )),
            None => None,
        },
        deadline: opt_ts_col(row, col::DEADLINE)?,
        traceparent: row
            .get::<_, Option<String>>(col::TRACEPARENT)?
            .map(TraceParent::parse)
            .transpose()
            .map_err(|e| conversion(col::TRACEPARENT, e.to_string()))?,
        waiting_on: u32_col(row, col::WAITING_ON)?,
        on_dependency_failure: row
            .get::<_, Option<String>>(col::ON_DEPENDENCY_FAILURE)?
            .map(|p| p.parse::<DependencyFailure>())
            .transpose()
            .map_err(|e| conversion(col::ON_DEPENDENCY_FAILURE, e.to_string()))?,
        has_dependents: row.get(col::HAS_DEPENDENTS)?,
        output: row
            .get::<_, Option<String>>(col::OUTPUT)?
            .map(Payload::from_stored),
        // Advisory: a report that does not parse is left out rather than
        // making the job unreadable.
        progress: row
            .get::<_, Option<String>>(col::PROGRESS)?
            .and_then(|p| errand_core::Progress::from_json(&p).ok()),
        workflow: row
            .get::<_, Option<String>>(col::WORKFLOW)?
            .map(WorkflowId::new)
            .transpose()
            .map_err(|e| conversion(col::WORKFLOW, e.to_string()))?,
        tags: errand_core::tags_from_stored(row.get::<_, Option<String>>(col::TAGS)?.as_deref()),
        meta: errand_core::meta_from_stored(row.get::<_, Option<String>>(col::META)?.as_deref()),
        unique_key: row.get(col::UNIQUE_KEY)?,
        batch: row
            .get::<_, Option<String>>(col::BATCH)?
            .map(WorkflowId::new)
            .transpose()
            .map_err(|e| conversion(col::BATCH, e.to_string()))?,
        awaiting: errand_core::Awaiting::from_stored(
            row.get(col::AWAIT_SIGNAL)?,
            opt_ts_col(row, col::AWAIT_UNTIL)?,
            row.get(col::ON_AWAIT_TIMEOUT)?,
        )
        .map_err(|e| conversion(col::AWAIT_SIGNAL, e.to_string()))?,
        resumed_by: row.get(col::SIGNAL_SEQ)?,
        added_by: row
            .get::<_, Option<String>>(col::ADDED_BY)?
            .map(JobId::new)
            .transpose()
            .map_err(|e| conversion(col::ADDED_BY, e.to_string()))?,
    })
}

/// One job by id, read on `conn` — inside whatever transaction the caller
/// has open (exported as `job_in`, beside `enqueue_in` and `signal_in`);
/// [`Error::NotFound`] when none has that id.
pub fn get(conn: &Connection, id: &JobId) -> Result<Job> {
    conn.prepare_cached(GET)
        .map_err(map_err)?
        .query_row(named_params! {":id": id.as_str()}, job_from_row)
        .optional()
        .map_err(map_err)?
        .ok_or_else(|| Error::NotFound(id.to_string()))
}
