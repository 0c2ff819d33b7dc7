-- Sends a signal to job $2, whose row the transaction has locked (the
-- statement before this one), so a suspend of the job runs wholly before
-- or after it. $1 now, $3 the signal's name, $4 its payload (JSON text or
-- NULL), $5 whether to keep it when the job is not waiting for it, $6 the
-- person who sent it (NULL: a program) and $7 why.
-- Delivered (`woke`): the job was waiting for this name; it is ready, due
-- now (or at its own due time, if later), its wait cleared, resumed by
-- this signal, which is recorded delivered. Otherwise, with $5, a job that
-- has not ended keeps the signal undelivered for a later wait; without
-- it, nothing is written (the caller reads the job to say why).
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
s AS (SELECT nextval(pg_get_serial_sequence('__SCHEMA__.errand_signals', 'seq')) AS seq),
woke AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'ready', available_at = greatest(j.available_at, t.now),
        await_signal = NULL, await_until = NULL, on_await_timeout = NULL,
        signal_seq = s.seq, updated_at = t.now
    FROM t, s
    WHERE j.id = $2::text AND j.state = 'waiting' AND j.await_signal = $3::text
    RETURNING j.*
),
kept AS (
    INSERT INTO __SCHEMA__.errand_signals (seq, job_id, name, payload, sent_at, delivered_at)
    SELECT s.seq, $2::text, $3::text, $4::text::json, t.now,
           CASE WHEN EXISTS (SELECT 1 FROM woke) THEN t.now END
    FROM s, t
    WHERE EXISTS (SELECT 1 FROM woke)
       OR ($5::boolean AND EXISTS (
              SELECT 1 FROM __SCHEMA__.errand_jobs j
              WHERE j.id = $2::text AND j.state NOT IN ('done', 'dead', 'cancelled')))
    RETURNING seq
),
audited AS (
    INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at)
    SELECT $2::text, j.queue, 'signal', $6::text, $7::text, t.now
    FROM kept, t, __SCHEMA__.errand_jobs j
    WHERE $6::text IS NOT NULL AND j.id = $2::text
),
woken AS (
    SELECT pg_notify(n.nspname || '.errand_jobs', w.queue)
    FROM woke w, pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = '__SCHEMA__.errand_jobs'::regclass
)
SELECT (SELECT count(*) FROM kept) AS kept, (SELECT count(*) FROM woken) AS notified, w.*
FROM (SELECT 1) one LEFT JOIN woke w ON true
