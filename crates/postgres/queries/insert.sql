-- Inserts a job unless one with the same id exists. $1 now, $2 id, $3 queue,
-- $4 kind, $5 payload, $6 priority, $7 max attempts, $8 due time (NULL: now),
-- $9 delay in milliseconds (added to the due time), $10 lost-lease budget,
-- $11 elapsed-time budget in milliseconds (NULL: none), $12 concurrency key
-- (NULL: none), $13 its limit, $14 whether it is ordered, $15 the business
-- deadline, $16 the W3C trace context, $17 the workflow, $18 the
-- metadata (JSON text), $19 the unique key. (A job with tags,
-- dependencies or a batch goes through insert_many.sql.)
INSERT INTO __SCHEMA__.errand_jobs
    (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
     max_lease_expiries, give_up_at, available_at, created_at, updated_at,
     key_name, key_limit, key_ordered, deadline, traceparent, workflow, meta, unique_key)
SELECT $2::text, $3::text, $4::text, 'ready', $5::text::json, $6, 0, $7::integer, 0,
       $10::integer, t.now + $11::bigint * interval '1 millisecond',
       coalesce($8::timestamptz, t.now) + $9::bigint * interval '1 millisecond', t.now, t.now,
       $12::text, $13::integer, $14::boolean, $15::timestamptz, $16::text,
       $17::text, $18::text::jsonb, $19::text
FROM (SELECT coalesce($1::timestamptz, now()) AS now) t
ON CONFLICT (id) DO NOTHING
RETURNING *
