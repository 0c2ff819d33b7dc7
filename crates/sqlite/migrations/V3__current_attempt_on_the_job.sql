-- The current attempt lives on the job row.
--
-- Until V2 every claim inserted an open row into errand_attempts and every
-- settlement updated it: two more row writes per job, with their index
-- entries, on the hottest path. Now the job row holds its current attempt
-- (`attempt_started_at`; the attempt number, cycle and finish time are
-- already columns) and the history table receives an attempt only when it
-- is superseded — failed, snoozed, released, cancelled, or its lease
-- expired. A running job's attempt and a done job's succeeding one are read
-- from the job row (history.sql), so a job that succeeds on its first try
-- writes no history row at all.
--
-- (PostgreSQL also checks in the schema that a running job has a start
-- time. SQLite can add that check to a column only if every existing row
-- already passes it, which a running job cannot before this migration
-- fills it in; the claim statement, the only way into `running`, sets it.)
ALTER TABLE errand_jobs ADD COLUMN attempt_started_at INTEGER;

-- Running jobs: their open history row moves onto the job row.
UPDATE errand_jobs
SET attempt_started_at = coalesce(
        (SELECT max(a.started_at) FROM errand_attempts a
         WHERE a.job_id = errand_jobs.id AND a.finished_at IS NULL),
        updated_at)
WHERE state = 'running';

DELETE FROM errand_attempts
WHERE finished_at IS NULL
  AND job_id IN (SELECT id FROM errand_jobs WHERE state = 'running');
