-- The queues among the claimed ones ($2, NULL = all) whose due ready jobs
-- the ordinary scans leave out — paused queues and capped ones
-- (errand_queue_limits) — each with whether this claim took its lock:
-- taken for a capped queue that is not paused and has, as this
-- statement's snapshot counts them, fewer running jobs than its cap.
--
-- Held to the end of the claim's transaction, a capped queue's lock makes
-- the claims that may start its jobs take turns: claim.sql, which runs
-- after this statement with a fresh snapshot, counts the running jobs
-- again (seeing what the last holder committed) and starts no more than
-- the cap allows. A queue counted full is not locked, so claims do not
-- queue up behind a capped queue with no slot to give (a slot freed
-- meanwhile goes to a later claim: the cap is never exceeded, only
-- reached a claim later). Every claim takes these locks after the key
-- lock (key_lock.sql) and in queue order, so no two claims wait on each
-- other in a circle.
--
-- Any row at all tells a claim across every queue that such jobs are due:
-- it then reads the other queues' ranges (claim.sql's `ranged`) rather
-- than walk the due index past them.
SELECT x.queue, x.lockable AS locked
FROM (
    SELECT q.queue, q.lockable
    FROM (
        SELECT l.queue,
               NOT EXISTS (SELECT 1 FROM __SCHEMA__.errand_paused_queues p WHERE p.queue = l.queue)
               AND (SELECT count(*) FROM __SCHEMA__.errand_jobs o
                    WHERE o.state = 'running' AND o.queue = l.queue) < l.concurrency AS lockable
        FROM __SCHEMA__.errand_queue_limits l
        WHERE ($2::text[] IS NULL OR l.queue = ANY ($2::text[]))
        UNION
        SELECT p.queue, false
        FROM __SCHEMA__.errand_paused_queues p
        WHERE ($2::text[] IS NULL OR p.queue = ANY ($2::text[]))
          AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.errand_queue_limits l WHERE l.queue = p.queue)
    ) q
    -- One probe of the queue's range per queue (`OFFSET 0` keeps each
    -- EXISTS a probe: pulled up into a join, it read every ready job).
    WHERE EXISTS (
              SELECT 1 FROM __SCHEMA__.errand_jobs j
              WHERE j.queue = q.queue AND j.state = 'ready' AND j.key_name IS NULL
                AND j.available_at <= coalesce($1::timestamptz, now())
              OFFSET 0)
       OR EXISTS (
              SELECT 1 FROM __SCHEMA__.errand_jobs j
              WHERE j.queue = q.queue AND j.state = 'ready' AND j.key_name IS NOT NULL
                AND j.available_at <= coalesce($1::timestamptz, now())
              OFFSET 0)
    ORDER BY q.queue
    -- Keeps the sort below the locks: they are taken in this order.
    OFFSET 0
) x
LEFT JOIN LATERAL (
    SELECT pg_advisory_xact_lock(hashtextextended('__SCHEMA__.errand_queue_limits ' || x.queue, 0))
    WHERE x.lockable
) locked ON true
