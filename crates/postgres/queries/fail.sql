-- Fenced failure. $1 now, $2 id, $3 token, $4 error, $5 class,
-- $6 retry at (absolute) or NULL, $7 retry delay in ms or NULL.
-- No retry time, or no attempt left: dead.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
r AS (SELECT coalesce($6::timestamptz, t.now + $7::bigint * interval '1 millisecond') AS retry_at FROM t),
failed AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state        = CASE WHEN r.retry_at IS NULL OR j.attempts >= j.max_attempts
                            THEN 'dead' ELSE 'ready' END,
        available_at = CASE WHEN r.retry_at IS NULL OR j.attempts >= j.max_attempts
                            THEN j.available_at ELSE r.retry_at END,
        finished_at  = CASE WHEN r.retry_at IS NULL OR j.attempts >= j.max_attempts
                            THEN t.now ELSE NULL END,
        lease_token = NULL, lease_until = NULL,
        last_error = $4, last_error_class = $5, updated_at = t.now
    FROM t, r
    WHERE j.id = $2 AND j.state = 'running' AND j.lease_token = $3 AND j.lease_until > t.now
    RETURNING j.*
),
closed AS (
    UPDATE __SCHEMA__.errand_attempts a
    SET finished_at = t.now,
        outcome = CASE WHEN f.state = 'dead' THEN 'dead' ELSE 'retry' END,
        error = $4, error_class = $5
    FROM failed f, t WHERE a.job_id = f.id AND a.finished_at IS NULL
)
SELECT * FROM failed
