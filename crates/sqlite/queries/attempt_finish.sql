-- Closes the job's open attempt row (there is at most one).
UPDATE errand_attempts
SET finished_at = :now, outcome = :outcome, error = :error, error_class = :class
WHERE job_id = :id AND finished_at IS NULL
