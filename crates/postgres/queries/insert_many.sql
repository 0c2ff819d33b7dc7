-- Inserts many jobs in one statement (one round trip); ids that already
-- exist are skipped. $1 now, then one array per column, in input order:
-- $2 ids, $3 queues, $4 kinds, $5 payloads, $6 priorities, $7 max attempts,
-- $8 due times (NULL: now), $9 delays in ms, $10 lost-lease budgets,
-- $11 elapsed-time budgets in ms (NULL: none), $12 concurrency keys (NULL:
-- none), $13 their limits, $14 whether each is ordered, $15 business
-- deadlines, $16 W3C trace contexts, $17 how many dependencies each waits
-- for (NULL: none; then it is inserted blocked), $18 each one's policy when
-- a dependency fails, $19 workflows, $20 tags (JSON arrays as text),
-- $21 metadata (JSON objects as text), $22 unique keys, $23 batches,
-- $24 the signal each waits for (NULL: none; then it is inserted
-- waiting), $25 its wait's timeout in ms (NULL: none), $26 the wait's
-- policy on timeout.
--
-- For jobs with tags, `side_rows` in queries.rs wraps this statement in
-- `WITH ins AS (…)` and appends insert_tags.sql, which writes their tag
-- rows in the same statement.
INSERT INTO __SCHEMA__.errand_jobs
    (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
     max_lease_expiries, give_up_at, available_at, created_at, updated_at,
     key_name, key_limit, key_ordered, deadline, traceparent, waiting_on, on_dependency_failure,
     workflow, tags, meta, unique_key, batch, await_signal, await_until, on_await_timeout)
SELECT u.id, u.queue, u.kind,
       CASE WHEN coalesce(u.waiting_on, 0) > 0 THEN 'blocked'
            WHEN u.await_signal IS NOT NULL THEN 'waiting' ELSE 'ready' END, u.payload::json, u.priority, 0, u.max_attempts, 0,
       u.max_lease_expiries, t.now + u.give_up * interval '1 millisecond',
       coalesce(u.at, t.now) + u.delay * interval '1 millisecond', t.now, t.now,
       u.key_name, u.key_limit, u.key_ordered, u.deadline, u.traceparent,
       coalesce(u.waiting_on, 0), u.policy,
       u.workflow, u.tags::jsonb, u.meta::jsonb, u.unique_key, u.batch,
       u.await_signal, t.now + u.await_for * interval '1 millisecond', u.await_policy
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::int2[], $7::int4[],
            $8::timestamptz[], $9::int8[], $10::int4[], $11::int8[],
            $12::text[], $13::int4[], $14::bool[], $15::timestamptz[], $16::text[],
            $17::int4[], $18::text[], $19::text[], $20::text[], $21::text[], $22::text[],
            $23::text[], $24::text[], $25::int8[], $26::text[])
         WITH ORDINALITY AS u (id, queue, kind, payload, priority, max_attempts, at, delay,
                               max_lease_expiries, give_up, key_name, key_limit, key_ordered,
                               deadline, traceparent, waiting_on, policy, workflow, tags, meta, unique_key,
                               batch, await_signal, await_for, await_policy, n),
     (SELECT coalesce($1::timestamptz, now()) AS now) t
ORDER BY u.n
ON CONFLICT (id) DO NOTHING
RETURNING *
