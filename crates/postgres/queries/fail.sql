-- Fenced failure. $1 now, $2 id, $3 token, $4 error, $5 class,
-- $6 retry at (absolute) or NULL, $7 retry delay in ms or NULL, $8 whether
-- the caller releases dependents (false: a job with dependents is left for
-- a transaction that does).
-- No retry time, no attempt left, or a retry past the elapsed-time budget: dead.
-- "Running" is implied by the token, not named: only a running job has one
-- (the table's CHECK). Named, it let the planner read the partial lease
-- index, whose entries of settled jobs are dead until vacuum, instead of
-- the primary key (`a_settlement_finds_its_job_by_primary_key` in src/schema_tests.rs).
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
r AS (SELECT coalesce($6::timestamptz, t.now + $7::bigint * interval '1 millisecond') AS retry_at FROM t),
cur AS (
    SELECT j.id, (r.retry_at IS NULL OR j.attempts >= j.max_attempts
                  OR r.retry_at > coalesce(j.give_up_at, r.retry_at)) AS dies,
           (r.retry_at IS NOT NULL AND j.attempts < j.max_attempts
                  AND r.retry_at > coalesce(j.give_up_at, r.retry_at)) AS gave_up
    FROM __SCHEMA__.errand_jobs j, r WHERE j.id = $2::text
),
failed AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state        = CASE WHEN c.dies THEN 'dead' ELSE 'ready' END,
        available_at = CASE WHEN c.dies THEN j.available_at ELSE r.retry_at END,
        finished_at  = CASE WHEN c.dies THEN t.now ELSE NULL END,
        lease_token = NULL, lease_until = NULL,
        last_error = CASE WHEN c.gave_up
            THEN $4 || ' (gave up: the next retry would fall after the elapsed-time budget)'
            ELSE $4 END,
        last_error_class = $5::text, updated_at = t.now
    FROM t, r, cur c
    WHERE c.id = j.id AND j.id = $2::text AND j.lease_token = $3 AND j.lease_until > t.now
      AND (NOT j.has_dependents OR $8::boolean)
    RETURNING j.*
),
closed AS (
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
    SELECT f.id, f.replays, f.attempts, f.attempt_started_at, t.now,
           CASE WHEN f.state = 'dead' THEN 'dead' ELSE 'retry' END, $4, $5
    FROM failed f, t
)
SELECT * FROM failed
