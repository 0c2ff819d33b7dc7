INSERT INTO errand_attempts (job_id, cycle, attempt, started_at)
VALUES (:id, :cycle, :attempt, :now)
