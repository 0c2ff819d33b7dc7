-- Takes the advisory lock of each capped queue (errand_queue_limits) among
-- the claimed ones ($2, NULL = all) that is not paused and has due ready
-- jobs, in queue order, and returns those queues. Held to the end of the
-- claim's transaction, a queue's lock makes the claims that may start its
-- jobs take turns: claim.sql, which runs after this statement with a fresh
-- snapshot, counts the running jobs the last one committed and starts no
-- more than the cap allows. Every claim takes these locks after the key
-- lock (key_lock.sql) and in queue order, so no two claims wait on each
-- other in a circle.
SELECT l.queue
FROM (
    SELECT l.queue
    FROM __SCHEMA__.errand_queue_limits l
    WHERE ($2::text[] IS NULL OR l.queue = ANY ($2::text[]))
      AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.errand_paused_queues p WHERE p.queue = l.queue)
      AND EXISTS (
          SELECT 1 FROM __SCHEMA__.errand_jobs j
          WHERE j.queue = l.queue AND j.state = 'ready'
            AND j.available_at <= coalesce($1::timestamptz, now()))
    ORDER BY l.queue
    -- Keeps the sort below the locks: they are taken in this order.
    OFFSET 0
) l
CROSS JOIN LATERAL (
    SELECT pg_advisory_xact_lock(hashtextextended('__SCHEMA__.errand_queue_limits ' || l.queue, 0))
) locked
