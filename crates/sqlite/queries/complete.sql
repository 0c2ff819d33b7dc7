-- Fenced acknowledgment: running, same token, lease still valid.
UPDATE errand_jobs
SET state            = 'done',
    lease_token      = NULL,
    lease_until      = NULL,
    last_error       = NULL,
    last_error_class = NULL,
    finished_at      = :now,
    updated_at       = :now
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :lease_now
RETURNING *
