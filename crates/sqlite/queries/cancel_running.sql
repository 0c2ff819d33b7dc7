-- Fenced cancel by the handler itself.
UPDATE errand_jobs
SET state            = 'cancelled',
    lease_token      = NULL,
    lease_until      = NULL,
    last_error       = :reason,
    last_error_class = 'cancelled',
    finished_at      = :now,
    updated_at       = :now
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :lease_now
RETURNING *
