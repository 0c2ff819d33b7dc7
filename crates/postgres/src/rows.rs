//! Row decoding: jobs and single columns as the statements return them,
//! and the conversions between Errand's times and durations and
//! PostgreSQL's.

use std::error::Error as StdError;
use std::time::Duration;

use errand_core::{
    DependencyFailure, Error, ErrorClass, JOB_COLUMNS, Job, JobId, JobKey, JobState, Name, Payload,
    Result, Timestamp, TraceParent, WorkflowId,
};
use time::OffsetDateTime;
use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, Type};

use crate::error::map_err;

pub(crate) fn to_odt(t: Timestamp) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.as_millis()) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

pub(crate) fn from_odt(t: OffsetDateTime) -> Timestamp {
    let ms = t.unix_timestamp_nanos().div_euclid(1_000_000);
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A `json` or `jsonb` column read as its JSON text.
pub(crate) struct JsonText(pub(crate) String);

impl<'a> FromSql<'a> for JsonText {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn StdError + Sync + Send>> {
        let body = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, rest)) => rest,
                _ => return Err("unsupported jsonb format version".into()),
            }
        } else {
            raw
        };
        Ok(JsonText(std::str::from_utf8(body)?.to_owned()))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON || *ty == Type::JSONB
    }
}

pub(crate) fn bad_row(e: impl std::fmt::Display) -> Error {
    Error::storage(format!("unexpected row in errand_jobs: {e}"))
}

/// Column `i` of a row one of these statements returned: an error, not a
/// panic, if it is not the type the statement gives it (a schema changed
/// under the code).
pub(crate) fn col<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T> {
    row.try_get(i).map_err(|e| {
        Error::storage_caused_by(
            format!(
                "PostgreSQL returned an unexpected column {i}: {e} (is the schema the one this \
                 build expects? `errand migrate` upgrades it)"
            ),
            e,
        )
    })
}

/// The ids (column 0) of the rows whose boolean column `flag` is true.
pub(crate) fn ids_where(rows: &[Row], flag: usize) -> Result<Vec<&str>> {
    let mut ids = Vec::new();
    for r in rows {
        if col::<bool>(r, flag)? {
            ids.push(col::<&str>(r, 0)?);
        }
    }
    Ok(ids)
}

pub(crate) fn u32_of(v: i32) -> Result<u32> {
    u32::try_from(v).map_err(bad_row)
}

/// The position of `lease_token` in [`JOB_COLUMNS`].
pub(crate) const LEASE_TOKEN: usize = 15;

/// Where each column of a job sits in a result's rows: looked up once per
/// result rather than by name for every field of every row (a tenth of the
/// client's time reading back a bulk insert).
pub(crate) struct JobCols(pub(crate) [usize; JOB_COLUMNS.len()]);

impl JobCols {
    pub(crate) fn of(row: &Row) -> Result<Self> {
        let columns = row.columns();
        let mut at = [0; JOB_COLUMNS.len()];
        for (slot, name) in at.iter_mut().zip(JOB_COLUMNS) {
            *slot = columns
                .iter()
                .position(|c| c.name() == name)
                .ok_or_else(|| bad_row(format!("no column {name}")))?;
        }
        Ok(JobCols(at))
    }
}

/// Reads the jobs of a result (`RETURNING *` or `SELECT *` of
/// errand_jobs, possibly with more columns).
pub(crate) fn jobs_from_rows(rows: &[Row]) -> Result<Vec<Job>> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let cols = JobCols::of(first)?;
    rows.iter().map(|r| job_at(r, &cols)).collect()
}

pub(crate) fn job_from_row(row: &Row) -> Result<Job> {
    job_at(row, &JobCols::of(row)?)
}

fn job_at(row: &Row, cols: &JobCols) -> Result<Job> {
    let [
        id,
        queue,
        kind,
        state,
        payload,
        priority,
        attempts,
        max_attempts,
        replays,
        lease_expiries,
        max_lease_expiries,
        give_up_at,
        available_at,
        created_at,
        updated_at,
        _lease_token,
        lease_until,
        last_error,
        last_error_class,
        finished_at,
        key_name,
        key_limit,
        key_ordered,
        attempt_started_at,
        deadline,
        traceparent,
        waiting_on,
        on_dependency_failure,
        has_dependents,
        output,
        progress,
        workflow,
        tags,
        meta,
        unique_key,
        batch,
        await_signal,
        await_until,
        on_await_timeout,
        signal_seq,
        added_by,
    ] = cols.0;
    let cell = Cells(row);
    let class: Option<String> = cell.get(last_error_class)?;
    Ok(Job {
        id: JobId::new(cell.text(id)?).map_err(bad_row)?,
        queue: Name::parse("queue", cell.text(queue)?).map_err(bad_row)?,
        kind: Name::parse("kind", cell.text(kind)?).map_err(bad_row)?,
        state: cell.text(state)?.parse::<JobState>().map_err(bad_row)?,
        payload: Payload::from_stored(cell.get::<JsonText>(payload)?.0),
        priority: cell.get(priority)?,
        attempts: cell.int(attempts)?,
        max_attempts: cell.int(max_attempts)?,
        replays: cell.int(replays)?,
        lease_expiries: cell.int(lease_expiries)?,
        max_lease_expiries: cell.int(max_lease_expiries)?,
        give_up_at: cell.opt_ts(give_up_at)?,
        available_at: cell.ts(available_at)?,
        created_at: cell.ts(created_at)?,
        updated_at: cell.ts(updated_at)?,
        lease_until: cell.opt_ts(lease_until)?,
        attempt_started_at: cell.opt_ts(attempt_started_at)?,
        last_error: cell.get(last_error)?,
        last_error_class: class
            .map(|c| c.parse::<ErrorClass>())
            .transpose()
            .map_err(bad_row)?,
        finished_at: cell.opt_ts(finished_at)?,
        key: cell.key(key_name, key_limit, key_ordered)?,
        deadline: cell.opt_ts(deadline)?,
        traceparent: cell.parsed(traceparent, TraceParent::parse)?,
        waiting_on: cell.int(waiting_on)?,
        on_dependency_failure: cell
            .parsed(on_dependency_failure, |p| p.parse::<DependencyFailure>())?,
        has_dependents: cell.get(has_dependents)?,
        output: cell.json(output)?.map(Payload::from_stored),
        // Advisory: a report that does not parse is left out rather than
        // making the job unreadable.
        progress: cell
            .get::<Option<String>>(progress)?
            .and_then(|p| errand_core::Progress::from_json(&p).ok()),
        workflow: cell.parsed(workflow, WorkflowId::new)?,
        tags: errand_core::tags_from_stored(cell.json(tags)?.as_deref()),
        meta: errand_core::meta_from_stored(cell.json(meta)?.as_deref()),
        unique_key: cell.get(unique_key)?,
        batch: cell.parsed(batch, WorkflowId::new)?,
        awaiting: errand_core::Awaiting::from_stored(
            cell.get(await_signal)?,
            cell.opt_ts(await_until)?,
            cell.get(on_await_timeout)?,
        )?,
        resumed_by: cell.get(signal_seq)?,
        added_by: cell.parsed(added_by, JobId::new)?,
    })
}

/// The cells of one row of `errand_jobs`, each read as the type a job's
/// field needs; a cell of another type is an error ([`map_err`]), a value
/// that does not parse a bad row ([`bad_row`]).
struct Cells<'r>(&'r Row);

impl<'r> Cells<'r> {
    fn get<T: FromSql<'r>>(&self, i: usize) -> Result<T> {
        self.0.try_get(i).map_err(map_err)
    }

    fn text(&self, i: usize) -> Result<String> {
        self.get(i)
    }

    /// A count stored as `integer`.
    fn int(&self, i: usize) -> Result<u32> {
        u32_of(self.get(i)?)
    }

    fn ts(&self, i: usize) -> Result<Timestamp> {
        self.get::<OffsetDateTime>(i).map(from_odt)
    }

    fn opt_ts(&self, i: usize) -> Result<Option<Timestamp>> {
        Ok(self.get::<Option<OffsetDateTime>>(i)?.map(from_odt))
    }

    /// A nullable `json` or `jsonb` cell as its JSON text.
    fn json(&self, i: usize) -> Result<Option<String>> {
        Ok(self.get::<Option<JsonText>>(i)?.map(|t| t.0))
    }

    /// A nullable text cell read through `parse`.
    fn parsed<T, E: std::fmt::Display>(
        &self,
        i: usize,
        parse: impl FnOnce(String) -> std::result::Result<T, E>,
    ) -> Result<Option<T>> {
        self.get::<Option<String>>(i)?
            .map(parse)
            .transpose()
            .map_err(bad_row)
    }

    /// The job's concurrency key (name, limit, ordered), if it has one.
    fn key(&self, name: usize, limit: usize, ordered: usize) -> Result<Option<JobKey>> {
        match self.get::<Option<String>>(name)? {
            Some(name) => Ok(Some(JobKey::from_stored(
                name,
                self.int(limit)?,
                self.get(ordered)?,
            ))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod col_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A column of another type than the code expects, or NULL where it
    /// expects a value, is an error the caller returns, never a panic.
    #[tokio::test]
    async fn a_column_of_the_wrong_type_is_an_error() {
        let Some(url) = errand_testsupport::postgres_url("a_column_of_the_wrong_type_is_an_error")
        else {
            return;
        };
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let rows = client
            .query("SELECT 'j1'::text, NULL::boolean, true", &[])
            .await
            .unwrap();
        let row = &rows[0];
        let err = col::<i64>(row, 0).expect_err("text read as a number");
        assert!(err.to_string().contains("column 0"), "{err}");
        assert!(col::<bool>(row, 1).is_err());
        assert!(col::<&str>(row, 9).is_err());
        assert_eq!(col::<Option<bool>>(row, 1).unwrap(), None);
        assert_eq!(col::<&str>(row, 0).unwrap(), "j1");
        // The release's input: ids whose flag is true; a NULL flag refuses.
        assert_eq!(ids_where(&rows, 2).unwrap(), vec!["j1"]);
        assert!(ids_where(&rows, 1).is_err());
    }
}
