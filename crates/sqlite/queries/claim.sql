-- Claims one job if it is (still) due: one conditional statement. A
-- reclaimed expired lease counts against the lost-lease budget.
UPDATE errand_jobs
SET state          = 'running',
    attempts       = attempts + 1,
    lease_expiries = lease_expiries + (state = 'running'),
    lease_token    = :token,
    lease_until    = :lease_until,
    updated_at     = :now
WHERE id = :id
  AND attempts < max_attempts
  AND ((state = 'ready' AND available_at <= :now)
       OR (state = 'running' AND lease_until <= :now
           AND lease_expiries + 1 < max_lease_expiries))
RETURNING *
