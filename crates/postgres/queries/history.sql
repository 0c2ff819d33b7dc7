-- A job's attempts, oldest first: the finished ones in the history table,
-- then the one the job row holds — running (open) or the one that
-- succeeded. (A row without a start time, such as one written directly
-- in SQL, shows only its history rows.) $1 id.
SELECT cycle, attempt, started_at, finished_at, outcome, error, error_class
FROM (
    SELECT seq, cycle, attempt, started_at, finished_at, outcome, error, error_class
    FROM __SCHEMA__.errand_attempts WHERE job_id = $1::text
    UNION ALL
    SELECT NULL, replays, attempts, attempt_started_at, finished_at,
           CASE state WHEN 'done' THEN 'succeeded' END, NULL, NULL
    FROM __SCHEMA__.errand_jobs
    WHERE id = $1::text AND state IN ('running', 'done') AND attempt_started_at IS NOT NULL
) h
ORDER BY seq IS NULL, seq
