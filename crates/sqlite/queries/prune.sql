-- Retention: finished (done, cancelled) jobs older than the cutoff, in
-- bounded batches. Dead jobs are kept until an operator purges them.
-- (`state <> 'running'` is the listing index's condition, written out so
-- that SQLite may use the partial index.) A cancelled job that a blocked
-- job still waits for (an unmet edge) stays: the rules leave none such (a
-- cancellation cancels its waiting dependents, an enqueue or a replay
-- under a cancelled dependency is judged at once or refused), and a job
-- that waits for a job that is gone would wait for good. Returns the jobs
-- deleted, their state and whether any job depends on them.
DELETE FROM errand_jobs
WHERE id IN (
    SELECT j.id FROM errand_jobs j INDEXED BY errand_jobs_state
    WHERE j.state IN ('done', 'cancelled') AND j.state <> 'running' AND j.finished_at < :before
      AND NOT (j.state = 'cancelled' AND j.has_dependents AND EXISTS (
          SELECT 1 FROM errand_dependencies e
          JOIN errand_jobs d ON d.id = e.job_id
          WHERE e.depends_on = j.id AND e.met = 0 AND d.state = 'blocked'))
    LIMIT :limit
)
RETURNING id, state, has_dependents
