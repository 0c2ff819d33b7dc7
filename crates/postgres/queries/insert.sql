-- Inserts a job unless one with the same id exists. $1 now, $2 id, $3 queue,
-- $4 kind, $5 payload, $6 priority, $7 max attempts, $8 due time (NULL: now),
-- $9 delay in milliseconds (added to the due time).
INSERT INTO __SCHEMA__.errand_jobs
    (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
     available_at, created_at, updated_at)
SELECT $2, $3, $4, 'ready', $5::text::jsonb, $6, 0, $7, 0,
       coalesce($8::timestamptz, t.now) + $9::bigint * interval '1 millisecond', t.now, t.now
FROM (SELECT coalesce($1::timestamptz, now()) AS now) t
ON CONFLICT (id) DO NOTHING
RETURNING *
