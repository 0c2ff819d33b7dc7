-- Running jobs whose lease expired on their final attempt die visibly;
-- their open attempt rows are closed as lease_expired.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
expired AS (
    SELECT j.id FROM __SCHEMA__.errand_jobs j, t
    WHERE j.state = 'running' AND j.lease_until <= t.now AND j.attempts >= j.max_attempts
    FOR UPDATE OF j SKIP LOCKED
),
dead AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state            = 'dead',
        lease_token      = NULL,
        lease_until      = NULL,
        last_error       = 'lease expired on the final attempt (' || j.attempts || ' of '
                           || j.max_attempts || '): the worker crashed, stalled or lost its connection',
        last_error_class = 'lease_expired',
        finished_at      = t.now,
        updated_at       = t.now
    FROM expired e, t
    WHERE j.id = e.id AND j.state = 'running' AND j.lease_until <= t.now
      AND j.attempts >= j.max_attempts
    RETURNING j.id
),
closed AS (
    UPDATE __SCHEMA__.errand_attempts a
    SET finished_at = t.now, outcome = 'lease_expired',
        error = 'lease expired before the attempt was settled', error_class = 'lease_expired'
    FROM dead d, t
    WHERE a.job_id = d.id AND a.finished_at IS NULL
)
SELECT id FROM dead ORDER BY id
