-- Running jobs whose lease expired on their final attempt die visibly.
UPDATE errand_jobs INDEXED BY errand_jobs_leases
SET state            = 'dead',
    lease_token      = NULL,
    lease_until      = NULL,
    last_error       = 'lease expired on the final attempt (' || attempts || ' of ' || max_attempts
                       || '): the worker crashed, stalled or lost its connection',
    last_error_class = 'lease_expired',
    finished_at      = :now,
    updated_at       = :now
WHERE state = 'running'
  AND lease_until <= :now
  AND attempts >= max_attempts
RETURNING id
