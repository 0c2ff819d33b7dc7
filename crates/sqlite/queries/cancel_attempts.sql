-- Ends, in the history, the attempt of every running job in :ids that an
-- operator is cancelling (run before cancel.sql changes their state).
INSERT INTO errand_attempts
    (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
SELECT id, replays, attempts, coalesce(attempt_started_at, :now), :now, 'cancelled',
       'cancelled by an operator', 'cancelled'
FROM errand_jobs
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running'
