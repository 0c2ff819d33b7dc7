-- Fenced snooze or release: ready again, the attempt given back.
-- $1 now, $2 id, $3 token, $4 delay in ms, $5 history outcome.
-- "Running" is implied by the token, not named: only a running job has one
-- (the table's CHECK). Named, it let the planner read the partial lease
-- index, whose entries of settled jobs are dead until vacuum, instead of
-- the primary key (`a_settlement_finds_its_job_by_primary_key` in src/schema_tests.rs).
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
back AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'ready', attempts = j.attempts - 1,
        available_at = t.now + $4::bigint * interval '1 millisecond',
        lease_token = NULL, lease_until = NULL, updated_at = t.now
    FROM t
    WHERE j.id = $2::text AND j.lease_token = $3 AND j.lease_until > t.now
    RETURNING j.*
),
closed AS (
    -- The attempt was given back: the row's count is one lower than the
    -- attempt that ran.
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome)
    SELECT b.id, b.replays, b.attempts + 1, b.attempt_started_at, t.now, $5::text
    FROM back b, t
)
SELECT * FROM back
