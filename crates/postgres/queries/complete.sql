-- Fenced acknowledgment. $1 now, $2 id, $3 token. The succeeding attempt
-- stays on the job row (history.sql reads it).
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
done AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'done', lease_token = NULL, lease_until = NULL,
        last_error = NULL, last_error_class = NULL, finished_at = t.now, updated_at = t.now
    FROM t
    WHERE j.id = $2::text AND j.state = 'running' AND j.lease_token = $3 AND j.lease_until > t.now
    RETURNING j.*
)
SELECT * FROM done
