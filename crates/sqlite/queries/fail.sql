-- Fenced failure: back to ready with a persisted due time while attempts
-- remain, a retry time is given and it falls within the elapsed-time
-- budget; otherwise dead.
UPDATE errand_jobs
SET state            = CASE WHEN :retry_at IS NULL OR attempts >= max_attempts
                              OR :retry_at > coalesce(give_up_at, :retry_at)
                            THEN 'dead' ELSE 'ready' END,
    available_at     = CASE WHEN :retry_at IS NULL OR attempts >= max_attempts
                              OR :retry_at > coalesce(give_up_at, :retry_at)
                            THEN available_at ELSE :retry_at END,
    finished_at      = CASE WHEN :retry_at IS NULL OR attempts >= max_attempts
                              OR :retry_at > coalesce(give_up_at, :retry_at)
                            THEN :now ELSE NULL END,
    lease_token      = NULL,
    lease_until      = NULL,
    last_error       = CASE WHEN :retry_at IS NOT NULL AND attempts < max_attempts
                              AND :retry_at > coalesce(give_up_at, :retry_at)
                            THEN :error || ' (gave up: the next retry would fall after the elapsed-time budget)'
                            ELSE :error END,
    last_error_class = :class,
    updated_at       = :now
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :lease_now
RETURNING *
