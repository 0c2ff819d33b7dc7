-- Inserts many jobs in one statement, in the order bound (the rowid order
-- a concurrency key runs in): the order given, or, for jobs that depend on
-- each other, depth by depth with each key's jobs still in the order given
-- (insert_many_statements in insert.rs); an id that already exists, or
-- repeats earlier in the batch, is skipped. The VALUES placeholder becomes one row per job
-- (insert_many_sql in insert.rs): ?1 is the time, then per job its id, queue,
-- kind, payload, priority, max_attempts, max_lease_expiries, give_up_at,
-- available_at, key_name, key_limit, key_ordered, deadline, traceparent,
-- state (blocked when it has dependencies), waiting_on,
-- on_dependency_failure, workflow, tags, meta, unique_key, batch,
-- await_signal, await_until and on_await_timeout (state waiting when it
-- waits for a signal).
INSERT INTO errand_jobs
    (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
     max_lease_expiries, give_up_at, available_at, created_at, updated_at,
     key_name, key_limit, key_ordered, deadline, traceparent, waiting_on, on_dependency_failure,
     workflow, tags, meta, unique_key, batch, await_signal, await_until, on_await_timeout)
VALUES
    __VALUES__
ON CONFLICT (id) DO NOTHING
RETURNING id
