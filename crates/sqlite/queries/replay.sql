-- Operator replay of every job in :ids (a JSON array of distinct ids):
-- a fresh attempt budget, due now (blocked again if it still waits for a
-- dependency). The caller has checked, in the same
-- transaction, that every one is in one of :states (a JSON array of the
-- states ReplayRequest::ACCEPTS names).
UPDATE errand_jobs
SET state          = CASE WHEN waiting_on > 0 THEN 'blocked' ELSE 'ready' END,
    attempts       = 0,
    lease_expiries = 0,
    replays        = replays + 1,
    available_at   = :now,
    finished_at    = NULL,
    updated_at     = :now,
    -- The attempts start again from 1: an old cycle's report would pass
    -- for the new one's.
    progress       = NULL
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN (SELECT value FROM json_each(:states))
RETURNING *
