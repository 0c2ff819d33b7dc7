-- Operator cancel: only jobs that are not finished.
UPDATE errand_jobs
SET state            = 'cancelled',
    lease_token      = NULL,
    lease_until      = NULL,
    last_error_class = 'cancelled',
    last_error       = 'cancelled by ' || :operator,
    finished_at      = :now,
    updated_at       = :now
WHERE id = :id AND state IN ('ready', 'running')
RETURNING *
