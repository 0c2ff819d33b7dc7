-- Fenced acknowledgment: running, same token, lease still valid. :output
-- is the handler's output (JSON text, checked), or NULL.
UPDATE errand_jobs
SET state            = 'done',
    lease_token      = NULL,
    lease_until      = NULL,
    last_error       = NULL,
    last_error_class = NULL,
    finished_at      = :now,
    updated_at       = :now,
    output           = :output
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :lease_now
RETURNING *
