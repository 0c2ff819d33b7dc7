-- Retention: finished (done, cancelled) jobs older than the cutoff, in
-- bounded batches. Dead jobs are kept until an operator purges them.
-- $1 now, $2 age in ms, $3 limit.
WITH gone AS (
    DELETE FROM __SCHEMA__.errand_jobs
    WHERE id IN (
        SELECT id FROM __SCHEMA__.errand_jobs
        WHERE state IN ('done', 'cancelled')
          AND finished_at < coalesce($1::timestamptz, now()) - $2::bigint * interval '1 millisecond'
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    )
    RETURNING 1
)
SELECT count(*) FROM gone
