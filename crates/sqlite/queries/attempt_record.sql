-- Writes a finished attempt to the history: the one the job row held until
-- it failed, was given back, cancelled or found with its lease expired.
INSERT INTO errand_attempts
    (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
VALUES (:id, :cycle, :attempt, :started_at, :now, :outcome, :error, :class)
