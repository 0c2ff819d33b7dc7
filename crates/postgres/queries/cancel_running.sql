-- Fenced cancel by the handler. $1 now, $2 id, $3 token, $4 reason.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
gone AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        last_error = $4, last_error_class = 'cancelled', finished_at = t.now, updated_at = t.now
    FROM t
    WHERE j.id = $2 AND j.state = 'running' AND j.lease_token = $3 AND j.lease_until > t.now
    RETURNING j.*
),
closed AS (
    UPDATE __SCHEMA__.errand_attempts a
    SET finished_at = t.now, outcome = 'cancelled', error = $4, error_class = 'cancelled'
    FROM gone g, t WHERE a.job_id = g.id AND a.finished_at IS NULL
)
SELECT * FROM gone
