SELECT cycle, attempt, started_at, finished_at, outcome, error, error_class
FROM __SCHEMA__.errand_attempts WHERE job_id = $1 ORDER BY seq
