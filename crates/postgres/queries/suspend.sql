-- Fenced suspend: the handler ends its attempt to wait for the signal $4
-- (timing out $5 ms from now, NULL: never; $6 the policy then). The
-- transaction has locked the job's row (the statement before this one), so
-- a signal sent meanwhile is either committed and seen here, or waits and
-- then finds the job waiting. The oldest signal of that name kept for the
-- job (`kept`) is delivered at once instead: the job is ready, due now,
-- resumed by it. Either way the attempt is given back, as a snooze gives
-- it back, and recorded in the history as `awaiting`. $1 now, $2 id,
-- $3 token. ("Running" is implied by the token: see snooze.sql.)
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
kept AS (
    SELECT min(s.seq) AS seq FROM __SCHEMA__.errand_signals s
    WHERE s.job_id = $2::text AND s.name = $4::text AND s.delivered_at IS NULL
),
back AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state            = CASE WHEN k.seq IS NULL THEN 'waiting' ELSE 'ready' END,
        attempts         = j.attempts - 1,
        available_at     = CASE WHEN k.seq IS NULL THEN j.available_at ELSE t.now END,
        await_signal     = CASE WHEN k.seq IS NULL THEN $4::text END,
        await_until      = CASE WHEN k.seq IS NULL
                                THEN t.now + $5::bigint * interval '1 millisecond' END,
        on_await_timeout = CASE WHEN k.seq IS NULL THEN $6::text END,
        signal_seq       = k.seq,
        lease_token = NULL, lease_until = NULL, updated_at = t.now
    FROM t, kept k
    WHERE j.id = $2::text AND j.lease_token = $3 AND j.lease_until > t.now
    RETURNING j.*
),
taken AS (
    UPDATE __SCHEMA__.errand_signals s SET delivered_at = t.now
    FROM back b, t
    WHERE s.job_id = $2::text AND s.seq = b.signal_seq
),
closed AS (
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome)
    SELECT b.id, b.replays, b.attempts + 1, b.attempt_started_at, t.now, 'awaiting'
    FROM back b, t
),
woken AS (
    SELECT pg_notify(n.nspname || '.errand_jobs', b.queue)
    FROM back b, pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = '__SCHEMA__.errand_jobs'::regclass AND b.state = 'ready'
)
SELECT *, (SELECT count(*) FROM woken) AS notified FROM back
