-- Ends up to $2 waits whose timeout has passed by $1 (NULL: the server's
-- clock), each by its policy: `run` makes the job ready (due now, no
-- signal), `fail` moves it to dead (class signal_timeout), `cancel` to
-- cancelled. The jobs are taken with SKIP LOCKED: a signal or an operator
-- holding one decides it first, and the state is tested again on the
-- locked row. The caller releases the dependents of those that ended, in
-- the same transaction. Reads errand_jobs_await_timeouts.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
-- (The bound is written out rather than read from `t`: as a join with
-- `t` it was no index condition, and each look read every waiting job's
-- entry.)
due AS (
    SELECT j.id FROM __SCHEMA__.errand_jobs j
    WHERE j.state = 'waiting' AND j.await_until IS NOT NULL
      AND j.await_until <= coalesce($1::timestamptz, now())
    ORDER BY j.await_until
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
ended AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state            = CASE j.on_await_timeout WHEN 'run' THEN 'ready'
                                WHEN 'fail' THEN 'dead' ELSE 'cancelled' END,
        available_at     = CASE WHEN j.on_await_timeout = 'run'
                                THEN greatest(j.available_at, t.now) ELSE j.available_at END,
        last_error       = CASE WHEN j.on_await_timeout = 'run' THEN j.last_error
                                WHEN j.on_await_timeout = 'cancel'
                                THEN 'cancelled: no signal ' || j.await_signal || ' arrived before the wait timed out'
                                ELSE 'no signal ' || j.await_signal || ' arrived before the wait timed out' END,
        last_error_class = CASE j.on_await_timeout WHEN 'run' THEN j.last_error_class
                                WHEN 'fail' THEN 'signal_timeout' ELSE 'cancelled' END,
        finished_at      = CASE WHEN j.on_await_timeout = 'run' THEN NULL ELSE t.now END,
        await_signal = NULL, await_until = NULL, on_await_timeout = NULL, signal_seq = NULL,
        updated_at = t.now
    FROM t, due
    WHERE j.id = due.id AND j.state = 'waiting'
    RETURNING j.*
),
woken AS (
    SELECT pg_notify(n.nspname || '.errand_jobs', r.queue)
    FROM (SELECT DISTINCT queue FROM ended WHERE state = 'ready') r,
         pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = '__SCHEMA__.errand_jobs'::regclass
)
SELECT *, (SELECT count(*) FROM woken) AS notified FROM ended
