-- Fenced acknowledgment of many jobs in one statement: each row still
-- requires running, its own token and an unexpired lease.
-- $1 now, $2 ids, $3 tokens (same order). Returns the acknowledged (id, token) pairs.
--
-- "Running" is implied, not named: only a running job has a token (the
-- table's CHECK). Named, it let the planner answer this join from the
-- partial lease index (`WHERE state = 'running'`), whose entries for every
-- job that ran since the last vacuum are dead and which a bitmap scan never
-- prunes: a 100,000-job burn-down slowed to 100 ms a batch. Unnamed, the
-- jobs are found by primary key.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
input AS (SELECT * FROM unnest($2::text[], $3::text[]) AS u (id, token)),
done AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'done', lease_token = NULL, lease_until = NULL,
        last_error = NULL, last_error_class = NULL, finished_at = t.now, updated_at = t.now
    FROM input i, t
    WHERE j.id = i.id AND j.lease_token = i.token AND j.lease_until > t.now
    RETURNING j.id, i.token
)
SELECT id, token FROM done
