-- Fenced acknowledgment. $1 now, $2 id, $3 token.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
done AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'done', lease_token = NULL, lease_until = NULL,
        last_error = NULL, last_error_class = NULL, finished_at = t.now, updated_at = t.now
    FROM t
    WHERE j.id = $2 AND j.state = 'running' AND j.lease_token = $3 AND j.lease_until > t.now
    RETURNING j.*
),
closed AS (
    UPDATE __SCHEMA__.errand_attempts a SET finished_at = t.now, outcome = 'succeeded'
    FROM done d, t WHERE a.job_id = d.id AND a.finished_at IS NULL
)
SELECT * FROM done
