-- Fenced snooze (or release with :available_at = now): ready again,
-- the attempt given back.
UPDATE errand_jobs
SET state        = 'ready',
    attempts     = attempts - 1,
    available_at = :available_at,
    lease_token  = NULL,
    lease_until  = NULL,
    updated_at   = :now
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :lease_now
RETURNING *
