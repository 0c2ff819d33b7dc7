-- Running jobs whose lease expired with no budget left die visibly: on
-- their final attempt (class lease_expired), or when this expiry spends the
-- lost-lease budget (class lost_lease: the job keeps killing its worker).
UPDATE errand_jobs INDEXED BY errand_jobs_leases
SET state            = 'dead',
    lease_token      = NULL,
    lease_until      = NULL,
    lease_expiries   = lease_expiries + 1,
    last_error       = CASE WHEN attempts >= max_attempts
        THEN 'lease expired on the final attempt (' || attempts || ' of ' || max_attempts
             || '): the worker crashed, stalled or lost its connection'
        ELSE 'the lease expired ' || (lease_expiries + 1) || ' times without the attempt being settled: '
             || 'the job keeps killing or stalling its worker, so it is quarantined'
        END,
    last_error_class = CASE WHEN attempts >= max_attempts THEN 'lease_expired' ELSE 'lost_lease' END,
    finished_at      = :now,
    updated_at       = :now
WHERE state = 'running'
  AND lease_until <= :lease_now
  AND (attempts >= max_attempts OR lease_expiries + 1 >= max_lease_expiries)
RETURNING id, replays, attempts, attempt_started_at, has_dependents
