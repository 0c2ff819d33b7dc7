-- Operator replay of every job in :ids (a JSON array of distinct ids):
-- a fresh attempt budget, due now. The caller has checked, in the same
-- transaction, that every one is dead or cancelled.
UPDATE errand_jobs
SET state          = 'ready',
    attempts       = 0,
    lease_expiries = 0,
    replays        = replays + 1,
    available_at   = :now,
    finished_at    = NULL,
    updated_at     = :now
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN ('dead', 'cancelled')
RETURNING *
