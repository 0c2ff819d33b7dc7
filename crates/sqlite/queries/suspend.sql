-- Fenced suspend: the attempt is given back (as a snooze gives it back)
-- and the job waits for the signal :name until :until (NULL: no timeout;
-- :policy then) — or, when a signal of that name was kept for it (:kept,
-- its seq), is ready at once, due now, resumed by it.
UPDATE errand_jobs
SET state            = CASE WHEN :kept IS NULL THEN 'waiting' ELSE 'ready' END,
    attempts         = attempts - 1,
    available_at     = CASE WHEN :kept IS NULL THEN available_at ELSE :now END,
    await_signal     = CASE WHEN :kept IS NULL THEN :name END,
    await_until      = CASE WHEN :kept IS NULL THEN :until END,
    on_await_timeout = CASE WHEN :kept IS NULL THEN :policy END,
    signal_seq       = :kept,
    lease_token      = NULL,
    lease_until      = NULL,
    updated_at       = :now
WHERE id = :id AND state = 'running' AND lease_token = :token AND lease_until > :lease_now
RETURNING *
