-- Operator cancel of one job: ready or running only. $1 now, $2 id,
-- $3 operator, $4 reason.
-- A running job's attempt ends here, in the history: `prior` locks the row
-- and reads its state before the update changes it.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
prior AS (
    SELECT j.id, j.state FROM __SCHEMA__.errand_jobs j WHERE j.id = $2::text FOR UPDATE
),
gone AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = 'cancelled by ' || $3, last_error_class = 'cancelled',
        finished_at = t.now, updated_at = t.now
    FROM t, prior p
    WHERE j.id = $2::text AND p.id = j.id AND j.state IN ('ready', 'running')
    RETURNING j.*, p.state AS prior_state
),
closed AS (
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
    SELECT g.id, g.replays, g.attempts, g.attempt_started_at, t.now, 'cancelled',
           'cancelled by an operator', 'cancelled'
    FROM gone g, t WHERE g.prior_state = 'running'
),
audited AS (
    INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at)
    SELECT g.id, g.queue, 'cancel', $3, $4, t.now FROM gone g, t
)
SELECT * FROM gone
