SELECT cycle, attempt, started_at, finished_at, outcome, error, error_class
FROM errand_attempts WHERE job_id = :id ORDER BY seq
