//! Re-encryption (`errand keys rotate`): the stored payloads, outputs and
//! signal payloads read page by page in job id order, and replaced only
//! where they still hold what was read.

use errand_core::encryption::{Field, Rewrite, StoredValue, ValuePage};
use errand_core::{Error, JobId, Payload, Result};
use rusqlite::{Connection, params};

use crate::conn::map_err;

/// The values of at most `limit` jobs after `after` (one read).
pub(crate) fn page(conn: &Connection, after: Option<&JobId>, limit: u32) -> Result<ValuePage> {
    let mut page = ValuePage::default();
    let mut jobs = conn
        .prepare_cached(
            "SELECT id, payload, output FROM errand_jobs \
             WHERE ?1 IS NULL OR id > ?1 ORDER BY id LIMIT ?2",
        )
        .map_err(map_err)?;
    let rows = jobs
        .query_map(params![after.map(JobId::as_str), limit], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<String>>(2)?,
            ))
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    let mut signals = conn
        .prepare_cached(
            "SELECT seq, payload FROM errand_signals \
             WHERE job_id = ?1 AND payload IS NOT NULL ORDER BY seq",
        )
        .map_err(map_err)?;
    for (id, payload, output) in rows {
        let job = JobId::new(id)?;
        page.values.push(value(&job, Field::Payload, None, payload));
        if let Some(output) = output {
            page.values.push(value(&job, Field::Output, None, output));
        }
        let sent = signals
            .query_map(params![job.as_str()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(map_err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(map_err)?;
        for (seq, text) in sent {
            page.values
                .push(value(&job, Field::Signal, Some(seq), text));
        }
        page.jobs += 1;
        page.last = Some(job);
    }
    Ok(page)
}

fn value(job: &JobId, field: Field, signal_seq: Option<i64>, text: String) -> StoredValue {
    StoredValue {
        job: job.clone(),
        field,
        signal_seq,
        value: Payload::from_stored(text),
    }
}

/// Replaces each value where it still holds what was read (in the
/// writer's transaction: all or none).
pub(crate) fn rewrite(conn: &Connection, rewrites: &[Rewrite]) -> Result<u64> {
    let mut replaced = 0u64;
    for r in rewrites {
        let (id, new, old) = (r.was.job.as_str(), r.value.as_str(), r.was.value.as_str());
        let changed = match (r.was.field, r.was.signal_seq) {
            (Field::Payload, _) => conn.execute(
                "UPDATE errand_jobs SET payload = ?2 WHERE id = ?1 AND payload = ?3",
                params![id, new, old],
            ),
            (Field::Output, _) => conn.execute(
                "UPDATE errand_jobs SET output = ?2 WHERE id = ?1 AND output = ?3",
                params![id, new, old],
            ),
            (Field::Signal, Some(seq)) => conn.execute(
                "UPDATE errand_signals SET payload = ?2 \
                 WHERE job_id = ?1 AND seq = ?4 AND payload = ?3",
                params![id, new, old, seq],
            ),
            (Field::Signal, None) => {
                return Err(Error::invalid(
                    "a signal's value to rewrite names no signal",
                ));
            }
        }
        .map_err(map_err)?;
        replaced += changed as u64;
    }
    Ok(replaced)
}
