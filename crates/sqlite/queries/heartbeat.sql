-- Fenced lease extension.
UPDATE errand_jobs
SET lease_until = :lease_until,
    updated_at  = :now
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :lease_now
RETURNING lease_until
