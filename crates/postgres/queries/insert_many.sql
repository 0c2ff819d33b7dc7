-- Inserts many jobs in one statement (one round trip); ids that already
-- exist are skipped. $1 now, then one array per column, in input order:
-- $2 ids, $3 queues, $4 kinds, $5 payloads, $6 priorities, $7 max attempts,
-- $8 due times (NULL: now), $9 delays in ms.
INSERT INTO __SCHEMA__.errand_jobs
    (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
     available_at, created_at, updated_at)
SELECT u.id, u.queue, u.kind, 'ready', u.payload::jsonb, u.priority, 0, u.max_attempts, 0,
       coalesce(u.at, t.now) + u.delay * interval '1 millisecond', t.now, t.now
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int2[], $7::int4[],
            $8::timestamptz[], $9::int8[])
         WITH ORDINALITY AS u (id, queue, kind, payload, priority, max_attempts, at, delay, n),
     (SELECT coalesce($1::timestamptz, now()) AS now) t
ORDER BY u.n
ON CONFLICT (id) DO NOTHING
RETURNING *
