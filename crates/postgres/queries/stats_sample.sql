-- The statistics' counts, per queue: every queue that has blocked, waiting, ready,
-- running or dead jobs or is paused (found by skipping through the indexes that
-- lead with the queue, one probe per queue), then for each queue at most
-- $2 rows per state, read through that queue's own index range — so a
-- queue is never left out because others hold more rows, and no scrape
-- walks a million-row table. $1 now, $2 the rows read per queue and state
-- (the cap plus one: reading more than the cap means truncated).
WITH RECURSIVE
ready_q AS (
    (SELECT j.queue FROM __SCHEMA__.errand_jobs j
     WHERE j.state = 'ready' AND j.key_name IS NULL ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM __SCHEMA__.errand_jobs j
            WHERE j.state = 'ready' AND j.key_name IS NULL AND j.queue > r.queue
            ORDER BY j.queue LIMIT 1)
    FROM ready_q r WHERE r.queue IS NOT NULL
),
keyed_q AS (
    (SELECT j.queue FROM __SCHEMA__.errand_jobs j
     WHERE j.key_name IS NOT NULL AND j.state IN ('ready', 'running') ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM __SCHEMA__.errand_jobs j
            WHERE j.key_name IS NOT NULL AND j.state IN ('ready', 'running') AND j.queue > r.queue
            ORDER BY j.queue LIMIT 1)
    FROM keyed_q r WHERE r.queue IS NOT NULL
),
dead_q AS (
    (SELECT j.queue FROM __SCHEMA__.errand_jobs j
     WHERE j.state = 'dead' ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM __SCHEMA__.errand_jobs j
            WHERE j.state = 'dead' AND j.queue > r.queue ORDER BY j.queue LIMIT 1)
    FROM dead_q r WHERE r.queue IS NOT NULL
),
blocked_q AS (
    (SELECT j.queue FROM __SCHEMA__.errand_jobs j
     WHERE j.state = 'blocked' ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM __SCHEMA__.errand_jobs j
            WHERE j.state = 'blocked' AND j.queue > r.queue ORDER BY j.queue LIMIT 1)
    FROM blocked_q r WHERE r.queue IS NOT NULL
),
waiting_q AS (
    (SELECT j.queue FROM __SCHEMA__.errand_jobs j
     WHERE j.state = 'waiting' ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM __SCHEMA__.errand_jobs j
            WHERE j.state = 'waiting' AND j.queue > r.queue ORDER BY j.queue LIMIT 1)
    FROM waiting_q r WHERE r.queue IS NOT NULL
),
queues AS (
    SELECT queue FROM ready_q WHERE queue IS NOT NULL
    UNION SELECT queue FROM blocked_q WHERE queue IS NOT NULL
    UNION SELECT queue FROM waiting_q WHERE queue IS NOT NULL
    UNION SELECT queue FROM keyed_q WHERE queue IS NOT NULL
    UNION SELECT queue FROM dead_q WHERE queue IS NOT NULL
    UNION SELECT r.queue FROM (SELECT j.queue FROM __SCHEMA__.errand_jobs j
                               WHERE j.state = 'running' LIMIT $2) r
    UNION SELECT p.queue FROM __SCHEMA__.errand_paused_queues p
),
t AS (SELECT coalesce($1::timestamptz, now()) AS now)
SELECT q.queue,
       rn.due + rk.due AS due, rn.scheduled + rk.scheduled AS scheduled,
       least(rn.oldest, rk.oldest) AS oldest,
       greatest(rn.n, rk.n) AS ready_read,
       ru.n AS running, ru.live AS live, d.n AS dead, b.n AS blocked, w.n AS waiting
FROM (SELECT queue FROM queues ORDER BY queue LIMIT 1000) q
CROSS JOIN t
-- Each count below reads its queue's range of an index that leads with the
-- queue, in that index's order. The queue is bounded by a range, not an
-- equality, so that the order asks for the queue first and only such an
-- index can give it: with an equality the planner was free to walk the
-- all-queue due index, or the table, past every other queue's jobs (100 ms
-- and more per queue at a million rows).
-- Plain ready jobs in claim order: when a queue holds more than the cap,
-- its oldest due job is looked for among the first it would claim.
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE s.available_at <= t.now) AS due,
           count(*) FILTER (WHERE s.available_at > t.now) AS scheduled,
           min(s.available_at) FILTER (WHERE s.available_at <= t.now) AS oldest,
           count(*) AS n
    FROM (SELECT j.available_at FROM __SCHEMA__.errand_jobs j
          WHERE j.queue >= q.queue AND j.queue <= q.queue
            AND j.state = 'ready' AND j.key_name IS NULL
          ORDER BY j.queue, j.priority DESC, j.available_at, j.id LIMIT $2) s
) rn
-- Keyed ready jobs, through the keys' index.
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE s.available_at <= t.now) AS due,
           count(*) FILTER (WHERE s.available_at > t.now) AS scheduled,
           min(s.available_at) FILTER (WHERE s.available_at <= t.now) AS oldest,
           count(*) AS n
    FROM (SELECT j.available_at FROM __SCHEMA__.errand_jobs j
          WHERE j.queue >= q.queue AND j.queue <= q.queue
            AND j.key_name IS NOT NULL AND j.state = 'ready'
          ORDER BY j.queue, j.key_name, j.state, j.seq LIMIT $2) s
) rk
CROSS JOIN LATERAL (
    SELECT count(*) AS n, count(*) FILTER (WHERE s.lease_until > t.now) AS live
    FROM (SELECT j.lease_until FROM __SCHEMA__.errand_jobs j
          WHERE j.queue = q.queue AND j.state = 'running' LIMIT $2) s
) ru
CROSS JOIN LATERAL (
    SELECT count(*) AS n
    FROM (SELECT 1 FROM __SCHEMA__.errand_jobs j
          WHERE j.queue >= q.queue AND j.queue <= q.queue AND j.state = 'dead'
          ORDER BY j.queue, j.finished_at LIMIT $2) s
) d
CROSS JOIN LATERAL (
    SELECT count(*) AS n
    FROM (SELECT 1 FROM __SCHEMA__.errand_jobs j
          WHERE j.queue >= q.queue AND j.queue <= q.queue AND j.state = 'blocked'
          ORDER BY j.queue LIMIT $2) s
) b
CROSS JOIN LATERAL (
    SELECT count(*) AS n
    FROM (SELECT 1 FROM __SCHEMA__.errand_jobs j
          WHERE j.queue >= q.queue AND j.queue <= q.queue AND j.state = 'waiting'
          ORDER BY j.queue LIMIT $2) s
) w
ORDER BY q.queue
