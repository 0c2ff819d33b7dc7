//! Re-encryption (`errand keys rotate`): the stored payloads, outputs and
//! signal payloads read page by page in job id order, and replaced only
//! where they still hold what was read.

use errand_core::encryption::{Field, Rewrite, StoredValue, ValuePage};
use errand_core::{Error, JobId, Payload, Result};

use crate::conn::{query, read_committed};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::{JsonText, col};

/// The values of at most `limit` jobs after `after`.
pub(crate) async fn page(
    client: &deadpool_postgres::Client,
    q: &Queries,
    after: Option<&JobId>,
    limit: u32,
) -> Result<ValuePage> {
    let jobs = query(
        client,
        &format!(
            "SELECT id, payload, output FROM {}.errand_jobs \
             WHERE $1::text IS NULL OR id > $1::text ORDER BY id LIMIT $2",
            q.schema
        ),
        &[&after.map(JobId::as_str), &i64::from(limit)],
    )
    .await?;
    let mut page = ValuePage::default();
    let mut ids = Vec::with_capacity(jobs.len());
    for row in &jobs {
        let job = JobId::new(col::<String>(row, 0)?)?;
        page.values
            .push(value(&job, Field::Payload, None, col(row, 1)?));
        if let Some(output) = col::<Option<JsonText>>(row, 2)? {
            page.values.push(value(&job, Field::Output, None, output));
        }
        ids.push(job.as_str().to_owned());
        page.jobs += 1;
        page.last = Some(job);
    }
    let signals = query(
        client,
        &format!(
            "SELECT job_id, seq, payload FROM {}.errand_signals \
             WHERE job_id = ANY ($1::text[]) AND payload IS NOT NULL ORDER BY job_id, seq",
            q.schema
        ),
        &[&ids],
    )
    .await?;
    for row in &signals {
        let job = JobId::new(col::<String>(row, 0)?)?;
        let seq: i64 = col(row, 1)?;
        page.values
            .push(value(&job, Field::Signal, Some(seq), col(row, 2)?));
    }
    Ok(page)
}

fn value(job: &JobId, field: Field, signal_seq: Option<i64>, text: JsonText) -> StoredValue {
    StoredValue {
        job: job.clone(),
        field,
        signal_seq,
        value: Payload::from_stored(text.0),
    }
}

/// Replaces each value where it still holds what was read, in one
/// transaction.
pub(crate) async fn rewrite(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    rewrites: &[Rewrite],
) -> Result<u64> {
    let tx = read_committed(client).await?;
    let s = &q.schema;
    let jobs_sql = |column: &str| {
        format!(
            "UPDATE {s}.errand_jobs SET {column} = $2::text::json \
             WHERE id = $1::text AND {column}::text = $3::text"
        )
    };
    let (payload_sql, output_sql) = (jobs_sql("payload"), jobs_sql("output"));
    let signal_sql = format!(
        "UPDATE {s}.errand_signals SET payload = $2::text::json \
         WHERE job_id = $1::text AND seq = $4 AND payload::text = $3::text"
    );
    let mut replaced = 0;
    for r in rewrites {
        let (id, new, old) = (r.was.job.as_str(), r.value.as_str(), r.was.value.as_str());
        replaced += match (r.was.field, r.was.signal_seq) {
            (Field::Payload, _) => tx.execute(&payload_sql, &[&id, &new, &old]).await,
            (Field::Output, _) => tx.execute(&output_sql, &[&id, &new, &old]).await,
            (Field::Signal, Some(seq)) => tx.execute(&signal_sql, &[&id, &new, &old, &seq]).await,
            (Field::Signal, None) => {
                return Err(Error::invalid(
                    "a signal's value to rewrite names no signal",
                ));
            }
        }
        .map_err(map_err)?;
    }
    tx.commit().await.map_err(map_err)?;
    Ok(replaced)
}
