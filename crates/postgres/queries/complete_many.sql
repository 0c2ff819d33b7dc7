-- Fenced acknowledgment of many jobs in one statement: each row still
-- requires running, its own token and an unexpired lease.
-- $1 now, $2 ids, $3 tokens (same order), $4 whether the caller releases
-- dependents (false: a job with dependents is left for a transaction that
-- does). Returns the acknowledged (id, token) pairs and whether each has
-- dependents.
--
-- "Running" is implied, not named: only a running job has a token (the
-- table's CHECK). Named, it let the planner answer this join from the
-- partial lease index (`WHERE state = 'running'`), whose entries for every
-- job that ran since the last vacuum are dead and which a bitmap scan never
-- prunes: a 100,000-job burn-down slowed to 100 ms a batch. Unnamed, the
-- jobs are found by primary key.
-- The time is written out, not joined from a one-row `t`: every relation
-- joined to an UPDATE is copied whole into every row for its recheck.
UPDATE __SCHEMA__.errand_jobs j
SET state = 'done', lease_token = NULL, lease_until = NULL,
    last_error = NULL, last_error_class = NULL,
    finished_at = coalesce($1::timestamptz, now()), updated_at = coalesce($1::timestamptz, now())
FROM unnest($2::text[], $3::text[]) AS i (id, token)
WHERE j.id = i.id AND j.lease_token = i.token AND j.lease_until > coalesce($1::timestamptz, now())
  AND (NOT j.has_dependents OR $4::boolean)
RETURNING j.id, i.token, j.has_dependents
