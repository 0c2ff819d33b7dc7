-- Claims one job if it is (still) due: one conditional statement. A
-- reclaimed expired lease counts against the lost-lease budget. A ready
-- keyed job starts only while its key's running jobs are under the key's
-- limit and, for an ordered key, no earlier job of the key is still ready.
UPDATE errand_jobs
SET state          = 'running',
    attempts       = attempts + 1,
    lease_expiries = lease_expiries + (state = 'running'),
    lease_token    = :token,
    lease_until    = :lease_until,
    attempt_started_at = :now,
    updated_at     = :now
WHERE id = :id
  AND attempts < max_attempts
  AND ((state = 'ready' AND available_at <= :now)
       OR (state = 'running' AND lease_until <= :lease_now
           AND lease_expiries + 1 < max_lease_expiries))
  AND (key_name IS NULL OR state = 'running'
       OR ((SELECT count(*) FROM errand_jobs o INDEXED BY errand_jobs_keys
            WHERE o.queue = errand_jobs.queue AND o.key_name = errand_jobs.key_name
              AND o.state = 'running') < key_limit
           AND NOT (key_ordered AND EXISTS (
               SELECT 1 FROM errand_jobs o INDEXED BY errand_jobs_keys
               WHERE o.queue = errand_jobs.queue AND o.key_name = errand_jobs.key_name
                 AND o.state = 'ready' AND o.rowid < errand_jobs.rowid))))
RETURNING *
