-- Retention: finished (done, cancelled) jobs older than the cutoff, in
-- bounded batches. Dead jobs are kept until an operator purges them.
DELETE FROM errand_jobs
WHERE id IN (
    SELECT id FROM errand_jobs INDEXED BY errand_jobs_state
    WHERE state IN ('done', 'cancelled') AND finished_at < :before
    LIMIT :limit
)
