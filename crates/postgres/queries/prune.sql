-- Retention: finished (done, cancelled) jobs older than the cutoff, in
-- bounded batches. Dead jobs are kept until an operator purges them.
-- $1 now, $2 age in ms, $3 limit. The edges out of a done job stay with
-- its dependents, met by the job's state alone (release.sql): they are
-- marked met as the job goes, so they still read as met. A cancelled job
-- that a blocked job still waits for (an unmet edge) stays: the rules
-- leave none such (a cancellation cancels its waiting dependents, an
-- enqueue or a replay under a cancelled dependency is judged at once or
-- refused), and a job that waits for a job that is gone would wait for
-- good.
WITH gone AS (
    DELETE FROM __SCHEMA__.errand_jobs
    WHERE id IN (
        SELECT j.id FROM __SCHEMA__.errand_jobs j
        WHERE j.state IN ('done', 'cancelled')
          AND j.finished_at < coalesce($1::timestamptz, now()) - $2::bigint * interval '1 millisecond'
          AND NOT (j.state = 'cancelled' AND j.has_dependents AND EXISTS (
              SELECT 1 FROM __SCHEMA__.errand_dependencies e
              JOIN __SCHEMA__.errand_jobs d ON d.id = e.job_id
              WHERE e.depends_on = j.id AND NOT e.met AND d.state = 'blocked'))
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
