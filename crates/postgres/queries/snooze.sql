-- Fenced snooze or release: ready again, the attempt given back.
-- $1 now, $2 id, $3 token, $4 delay in ms, $5 history outcome.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
back AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'ready', attempts = j.attempts - 1,
        available_at = t.now + $4::bigint * interval '1 millisecond',
        lease_token = NULL, lease_until = NULL, updated_at = t.now
    FROM t
    WHERE j.id = $2 AND j.state = 'running' AND j.lease_token = $3 AND j.lease_until > t.now
    RETURNING j.*
),
closed AS (
    UPDATE __SCHEMA__.errand_attempts a SET finished_at = t.now, outcome = $5
    FROM back b, t WHERE a.job_id = b.id AND a.finished_at IS NULL
)
SELECT * FROM back
