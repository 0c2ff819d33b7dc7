-- Retention: finished (done, cancelled) jobs older than the cutoff, in
-- bounded batches. Dead jobs are kept until an operator purges them.
-- (`state <> 'running'` is the listing index's condition, written out so
-- that SQLite may use the partial index.) Returns the jobs deleted, their
-- state and whether any job depends on them.
DELETE FROM errand_jobs
WHERE id IN (
    SELECT id FROM errand_jobs INDEXED BY errand_jobs_state
    WHERE state IN ('done', 'cancelled') AND state <> 'running' AND finished_at < :before
    LIMIT :limit
)
RETURNING id, state, has_dependents
