-- Retention: finished (done, cancelled) jobs older than the cutoff, in
-- bounded batches. Dead jobs are kept until an operator purges them.
-- $1 now, $2 age in ms, $3 limit. The edges out of a done job stay with
-- its dependents, met by the job's state alone (release.sql): they are
-- marked met as the job goes, so they still read as met.
WITH gone AS (
    DELETE FROM __SCHEMA__.errand_jobs
    WHERE id IN (
        SELECT id FROM __SCHEMA__.errand_jobs
        WHERE state IN ('done', 'cancelled')
          AND finished_at < coalesce($1::timestamptz, now()) - $2::bigint * interval '1 millisecond'
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id, state, has_dependents
),
marked AS (
    UPDATE __SCHEMA__.errand_dependencies e
    SET met = true
    WHERE e.depends_on = ANY (ARRAY(
            SELECT id FROM gone WHERE state = 'done' AND has_dependents))
      AND NOT e.met
)
SELECT count(*) FROM gone
