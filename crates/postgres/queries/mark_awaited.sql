-- Marks a job as waited for, so that the update that ends it notifies
-- '<schema>.errand_finished' (the trigger errand_jobs_notify_finished).
-- The waiter's store listens on that channel before this runs; an end
-- that committed earlier is seen by the waiter's next read of the job.
-- $1 the job's id. Changes nothing when it is already marked.
UPDATE __SCHEMA__.errand_jobs SET awaited = true WHERE id = $1 AND NOT awaited
