-- Operator replay: only dead or cancelled jobs; a fresh attempt budget.
UPDATE errand_jobs
SET state        = 'ready',
    attempts     = 0,
    lease_expiries = 0,
    replays      = replays + 1,
    available_at = :now,
    finished_at  = NULL,
    updated_at   = :now
WHERE id = :id AND state IN ('dead', 'cancelled')
RETURNING *
