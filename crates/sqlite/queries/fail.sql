-- Fenced failure: back to ready with a persisted due time while attempts
-- remain and a retry time is given; otherwise dead.
UPDATE errand_jobs
SET state            = CASE WHEN :retry_at IS NULL OR attempts >= max_attempts
                            THEN 'dead' ELSE 'ready' END,
    available_at     = CASE WHEN :retry_at IS NULL OR attempts >= max_attempts
                            THEN available_at ELSE :retry_at END,
    finished_at      = CASE WHEN :retry_at IS NULL OR attempts >= max_attempts
                            THEN :now ELSE NULL END,
    lease_token      = NULL,
    lease_until      = NULL,
    last_error       = :error,
    last_error_class = :class,
    updated_at       = :now
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :now
RETURNING *
