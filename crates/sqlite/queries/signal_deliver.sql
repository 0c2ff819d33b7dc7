-- Delivers the signal :seq named :name to job :id if it waits for that
-- name: ready, due now (or at its own due time, if later), its wait
-- cleared, resumed by the signal.
UPDATE errand_jobs
SET state            = 'ready',
    available_at     = max(available_at, :now),
    await_signal     = NULL,
    await_until      = NULL,
    on_await_timeout = NULL,
    signal_seq       = :seq,
    updated_at       = :now
WHERE id = :id AND state = 'waiting' AND await_signal = :name
RETURNING *
