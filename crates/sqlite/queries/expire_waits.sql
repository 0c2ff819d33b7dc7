-- Ends up to :limit waits whose timeout passed by :now, each by its
-- policy: `run` makes the job ready (due now, no signal), `fail` moves it
-- to dead (class signal_timeout), `cancel` to cancelled. Reads
-- errand_jobs_await_timeouts. The caller releases the dependents of the
-- jobs that ended.
UPDATE errand_jobs
SET state            = CASE on_await_timeout WHEN 'run' THEN 'ready'
                            WHEN 'fail' THEN 'dead' ELSE 'cancelled' END,
    available_at     = CASE WHEN on_await_timeout = 'run'
                            THEN max(available_at, :now) ELSE available_at END,
    last_error       = CASE WHEN on_await_timeout = 'run' THEN last_error
                            WHEN on_await_timeout = 'cancel'
                            THEN 'cancelled: no signal ' || await_signal || ' arrived before the wait timed out'
                            ELSE 'no signal ' || await_signal || ' arrived before the wait timed out' END,
    last_error_class = CASE on_await_timeout WHEN 'run' THEN last_error_class
                            WHEN 'fail' THEN 'signal_timeout' ELSE 'cancelled' END,
    finished_at      = CASE WHEN on_await_timeout = 'run' THEN NULL ELSE :now END,
    await_signal     = NULL,
    await_until      = NULL,
    on_await_timeout = NULL,
    signal_seq       = NULL,
    updated_at       = :now
WHERE id IN (
    SELECT id FROM errand_jobs
    WHERE state = 'waiting' AND await_until IS NOT NULL AND await_until <= :now
    ORDER BY await_until
    LIMIT :limit
)
RETURNING *
