-- Fenced acknowledgment of many jobs in one statement: each row still
-- requires running, its own token and an unexpired lease.
-- $1 now, $2 ids, $3 tokens (same order). Returns the acknowledged (id, token) pairs.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
input AS (SELECT * FROM unnest($2::text[], $3::text[]) AS u (id, token)),
done AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'done', lease_token = NULL, lease_until = NULL,
        last_error = NULL, last_error_class = NULL, finished_at = t.now, updated_at = t.now
    FROM input i, t
    WHERE j.id = i.id AND j.state = 'running' AND j.lease_token = i.token AND j.lease_until > t.now
    RETURNING j.id, i.token
),
closed AS (
    UPDATE __SCHEMA__.errand_attempts a SET finished_at = t.now, outcome = 'succeeded'
    FROM done d, t WHERE a.job_id = d.id AND a.finished_at IS NULL
)
SELECT id, token FROM done
