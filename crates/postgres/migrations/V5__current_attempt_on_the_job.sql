-- The current attempt lives on the job row.
--
-- Until V4 every claim inserted an open row into errand_attempts and every
-- settlement updated it: two more row writes per job, with their index
-- entries, on the hottest path. Now the job row holds its current attempt
-- (`attempt_started_at`; the attempt number, cycle and finish time are
-- already columns) and the history table receives an attempt only when it
-- is superseded — failed, snoozed, released, cancelled, or its lease
-- expired. A running job's attempt and a done job's succeeding one are read
-- from the job row (history.sql), so a job that succeeds on its first try
-- writes no history row at all.
ALTER TABLE __SCHEMA__.errand_jobs ADD COLUMN attempt_started_at timestamptz;

-- Running jobs: their open history row moves onto the job row.
UPDATE __SCHEMA__.errand_jobs j
SET attempt_started_at = coalesce(
        (SELECT max(a.started_at) FROM __SCHEMA__.errand_attempts a
         WHERE a.job_id = j.id AND a.finished_at IS NULL),
        j.updated_at)
WHERE j.state = 'running';

DELETE FROM __SCHEMA__.errand_attempts a
USING __SCHEMA__.errand_jobs j
WHERE a.job_id = j.id AND j.state = 'running' AND a.finished_at IS NULL;

-- A running job always knows when its attempt began.
ALTER TABLE __SCHEMA__.errand_jobs
    ADD CONSTRAINT errand_jobs_running_attempt_started
    CHECK (state <> 'running' OR attempt_started_at IS NOT NULL);

-- Nothing looks up open history rows any more.
DROP INDEX __SCHEMA__.errand_attempts_open;
