-- Fenced cancel by the handler. $1 now, $2 id, $3 token, $4 reason, $5
-- whether the caller releases dependents (false: a job with dependents is
-- left for a transaction that does).
-- "Running" is implied by the token, not named: only a running job has one
-- (the table's CHECK). Named, it let the planner read the partial lease
-- index, whose entries of settled jobs are dead until vacuum, instead of
-- the primary key (`a_settlement_finds_its_job_by_primary_key` in src/schema_tests.rs).
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
gone AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = $4, last_error_class = 'cancelled', finished_at = t.now, updated_at = t.now
    FROM t
    WHERE j.id = $2::text AND j.lease_token = $3 AND j.lease_until > t.now
      AND (NOT j.has_dependents OR $5::boolean)
    RETURNING j.*
),
closed AS (
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
    SELECT g.id, g.replays, g.attempts, g.attempt_started_at, t.now, 'cancelled', $4, 'cancelled'
    FROM gone g, t
)
SELECT * FROM gone
