-- A job's attempts, oldest first: the finished ones in the history table,
-- then the one the job row holds — running (open) or the one that
-- succeeded. (A row without a start time, such as one written directly
-- in SQL, shows only its history rows.)
SELECT cycle, attempt, started_at, finished_at, outcome, error, error_class
FROM (
    SELECT seq, cycle, attempt, started_at, finished_at, outcome, error, error_class
    FROM errand_attempts WHERE job_id = :id
    UNION ALL
    SELECT NULL, replays, attempts, attempt_started_at, finished_at,
           CASE state WHEN 'done' THEN 'succeeded' END, NULL, NULL
    FROM errand_jobs
    WHERE id = :id AND state IN ('running', 'done') AND attempt_started_at IS NOT NULL
)
ORDER BY seq IS NULL, seq
