-- Fenced acknowledgment. $1 now, $2 id, $3 token, $4 the handler's output
-- (JSON text, checked) or NULL, $5 whether the caller
-- releases dependents: true, its transaction releases the job's
-- dependents after this statement; false, a job with dependents is left
-- for such a transaction, so an autocommitted settlement never strands
-- one. The succeeding attempt stays on the job row (history.sql reads it).
-- "Running" is implied by the token, not named: only a running job has one
-- (the table's CHECK). Named, it let the planner read the partial lease
-- index, whose entries of settled jobs are dead until vacuum, instead of
-- the primary key (`a_settlement_finds_its_job_by_primary_key` in src/schema_tests.rs).
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
done AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'done', lease_token = NULL, lease_until = NULL,
        last_error = NULL, last_error_class = NULL, finished_at = t.now, updated_at = t.now,
        output = $4::text::json
    FROM t
    WHERE j.id = $2::text AND j.lease_token = $3 AND j.lease_until > t.now
      AND (NOT j.has_dependents OR $5::boolean)
    RETURNING j.*
)
SELECT * FROM done
