-- Fenced lease extension; :progress (JSON text, or NULL to keep the last
-- report) is the handler's latest progress, stored with the attempt it
-- belongs to (the job's, whatever the caller said).
UPDATE errand_jobs
SET lease_until = :lease_until,
    updated_at  = :now,
    progress    = coalesce(json_set(:progress, '$.attempt', attempts), progress)
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :lease_now
RETURNING lease_until
