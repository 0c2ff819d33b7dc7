-- Operator cancel of one job: ready or running only. $1 now, $2 id,
-- $3 operator, $4 reason.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
gone AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = 'cancelled by ' || $3, last_error_class = 'cancelled',
        finished_at = t.now, updated_at = t.now
    FROM t
    WHERE j.id = $2 AND j.state IN ('ready', 'running')
    RETURNING j.*
),
closed AS (
    UPDATE __SCHEMA__.errand_attempts a
    SET finished_at = t.now, outcome = 'cancelled', error = 'cancelled by an operator',
        error_class = 'cancelled'
    FROM gone g, t WHERE a.job_id = g.id AND a.finished_at IS NULL
),
audited AS (
    INSERT INTO __SCHEMA__.errand_audit (job_id, action, operator, reason, at)
    SELECT g.id, 'cancel', $3, $4, t.now FROM gone g, t
)
SELECT * FROM gone
