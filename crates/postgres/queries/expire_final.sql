-- Running jobs whose lease expired with no budget left die visibly: on
-- their final attempt (class lease_expired), or when this expiry spends the
-- lost-lease budget (class lost_lease: the job keeps killing its worker).
-- The attempt each held goes to the history as lease_expired.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
expired AS (
    SELECT j.id FROM __SCHEMA__.errand_jobs j, t
    WHERE j.state = 'running' AND j.lease_until <= t.now
      AND (j.attempts >= j.max_attempts OR j.lease_expiries + 1 >= j.max_lease_expiries)
    FOR UPDATE OF j SKIP LOCKED
),
dead AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state            = 'dead',
        lease_token      = NULL,
        lease_until      = NULL,
        lease_expiries   = j.lease_expiries + 1,
        last_error       = CASE WHEN j.attempts >= j.max_attempts
            THEN 'lease expired on the final attempt (' || j.attempts || ' of ' || j.max_attempts
                 || '): the worker crashed, stalled or lost its connection'
            ELSE 'the lease expired ' || (j.lease_expiries + 1) || ' times without the attempt being settled: '
                 || 'the job keeps killing or stalling its worker, so it is quarantined'
            END,
        last_error_class = CASE WHEN j.attempts >= j.max_attempts THEN 'lease_expired' ELSE 'lost_lease' END,
        finished_at      = t.now,
        updated_at       = t.now
    FROM expired e, t
    WHERE j.id = e.id AND j.state = 'running' AND j.lease_until <= t.now
      AND (j.attempts >= j.max_attempts OR j.lease_expiries + 1 >= j.max_lease_expiries)
    RETURNING j.id, j.replays, j.attempts, j.attempt_started_at, j.has_dependents
),
closed AS (
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
    SELECT d.id, d.replays, d.attempts, d.attempt_started_at, t.now, 'lease_expired',
           'lease expired before the attempt was settled', 'lease_expired'
    FROM dead d, t
)
SELECT id, has_dependents FROM dead ORDER BY id
