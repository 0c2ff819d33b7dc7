-- Operator replay of one job: dead or cancelled only. $1 now, $2 id,
-- $3 operator, $4 reason.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
back AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'ready', attempts = 0, lease_expiries = 0, replays = j.replays + 1,
        available_at = t.now, finished_at = NULL, updated_at = t.now
    FROM t
    WHERE j.id = $2::text AND j.state IN ('dead', 'cancelled')
    RETURNING j.*
),
audited AS (
    INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at)
    SELECT b.id, b.queue, 'replay', $3, $4, t.now FROM back b, t
)
SELECT * FROM back
