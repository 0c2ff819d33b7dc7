-- Claims up to $2 due jobs in one statement: reclaimable expired leases
-- first, then ready jobs by priority and due time. SKIP LOCKED lets
-- concurrent claimers pass each other; the UPDATE re-checks every
-- condition. $3: queues (NULL = all), $4: one fresh token per row,
-- $5: lease length in milliseconds, $6: whether this transaction holds the
-- key lock (key_lock.sql), without which no keyed job is claimed, $7:
-- whether to take back expired leases (without it only ready jobs), $8:
-- the capped queues whose locks this transaction holds (cap_lock.sql),
-- $9: whether to read the other queues' ranges rather than walk the due
-- index (a claim across every queue while paused or capped queues have
-- due jobs), $10: the named queues to read ready jobs from as `ready`
-- reads them ($3 without the paused and capped ones that have due jobs,
-- whose ranges it would only read past; NULL = all).
--
-- Keyed jobs are reached through their keys, not the due index: for each
-- key with due jobs (best first), its running count and its earliest ready
-- jobs give the ones it admits — up to its free slots; for an ordered key
-- its first ready job, only if due. A saturated key costs one probe, not a
-- scan of its backlog. Holding the key lock, no other claim can start a
-- keyed job between these counts and this statement's commit.
--
-- Paused queues (errand_paused_queues) are left out of every scan: the
-- list is read once per statement, an InitPlan, so the scans keep their
-- index order. Capped queues (errand_queue_limits) are left out of the
-- ready scans too, except those of $8: each of these is read on its own
-- (`capped`), up to its free slots — its cap less its running jobs,
-- counted in this statement's snapshot, which follows the queue's lock —
-- and its keyed and unkeyed jobs together start no more than that.
--
-- The due-set scans compare with `coalesce($1, now())` directly rather
-- than joining `t`: as a plain index scan the planner takes the index
-- whose order the LIMIT needs even before the table has statistics (joined
-- to `t` it once chose the per-queue index and sorted the whole backlog).
WITH RECURSIVE t AS (SELECT coalesce($1::timestamptz, now()) AS now),
expired AS (
    SELECT j.id, 0 AS src, 0::smallint AS priority, j.lease_until AS due,
           j.attempt_started_at AS started
    FROM __SCHEMA__.errand_jobs j
    WHERE $7::boolean AND j.state = 'running' AND j.lease_until <= coalesce($1::timestamptz, now())
      AND j.attempts < j.max_attempts
      AND j.lease_expiries + 1 < j.max_lease_expiries
      AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
      AND j.queue <> ALL (ARRAY(SELECT p.queue FROM __SCHEMA__.errand_paused_queues p))
    ORDER BY j.lease_until, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
ready AS (
    SELECT j.id, 1 AS src, j.priority, j.available_at AS due, j.queue
    FROM __SCHEMA__.errand_jobs j
    WHERE NOT $9::boolean
      AND j.state = 'ready' AND j.key_name IS NULL
      AND j.available_at <= coalesce($1::timestamptz, now())
      AND ($10::text[] IS NULL OR j.queue = ANY ($10::text[]))
      AND j.queue <> ALL (ARRAY(SELECT p.queue FROM __SCHEMA__.errand_paused_queues p
                                UNION ALL SELECT l.queue FROM __SCHEMA__.errand_queue_limits l))
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
-- While paused or capped queues have due jobs, those may stand ahead of
-- the others' in the due index, and walking it past them cost 74-78 ms a
-- claim with 200,000 of them ahead (against 7-10 ms): with $9 the other
-- queues are read instead one by one, each from its range of the due
-- index by queue (found by one probe per queue with ready jobs), and the
-- ranges' heads merged in claim order.
queues AS (
    (SELECT j.queue FROM __SCHEMA__.errand_jobs j
     WHERE $9::boolean
       AND j.state = 'ready' AND j.key_name IS NULL
       AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
     ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM __SCHEMA__.errand_jobs j
            WHERE j.state = 'ready' AND j.key_name IS NULL AND j.queue > q.queue
              AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
            ORDER BY j.queue LIMIT 1)
    FROM queues q WHERE q.queue IS NOT NULL
),
ranged AS (
    SELECT r.id, 1 AS src, r.priority, r.due, r.queue
    FROM unnest(ARRAY(
            SELECT c.id
            FROM queues q
            CROSS JOIN LATERAL (
                SELECT o.id, o.priority, o.available_at FROM __SCHEMA__.errand_jobs o
                WHERE o.queue = q.queue AND o.state = 'ready' AND o.key_name IS NULL
                  AND o.available_at <= coalesce($1::timestamptz, now())
                ORDER BY o.priority DESC, o.available_at, o.id
                LIMIT $2
            ) c
            WHERE q.queue IS NOT NULL
              AND q.queue <> ALL (ARRAY(SELECT p.queue FROM __SCHEMA__.errand_paused_queues p
                                        UNION ALL SELECT l.queue FROM __SCHEMA__.errand_queue_limits l))
            ORDER BY c.priority DESC, c.available_at, c.id
            LIMIT $2)) AS h(id)
    -- Each id looked up on its own, by the primary key, and rechecked. (As
    -- one `id = ANY (…)` scan, a generic plan made before the table had
    -- statistics walked the due index instead — every ready job, at every
    -- claim.) No order here: `picked` orders.
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.available_at AS due, j.queue
        FROM __SCHEMA__.errand_jobs j
        WHERE j.id = h.id
          AND j.state = 'ready' AND j.key_name IS NULL
          AND j.available_at <= coalesce($1::timestamptz, now())
        FOR UPDATE OF j SKIP LOCKED
    ) r
    -- Only while paused or capped queues have due jobs: otherwise never
    -- started (a one-time filter).
    WHERE $9::boolean
),
caps AS (
    SELECT l.queue,
           greatest(l.concurrency - (SELECT count(*) FROM __SCHEMA__.errand_jobs o
                                     WHERE o.state = 'running' AND o.queue = l.queue), 0) AS free
    FROM __SCHEMA__.errand_queue_limits l
    WHERE l.queue = ANY ($8::text[])
),
capped AS (
    SELECT r.id, 1 AS src, r.priority, r.due, r.queue
    FROM caps c
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.available_at AS due, j.queue
        FROM __SCHEMA__.errand_jobs j
        WHERE j.queue = c.queue AND j.state = 'ready' AND j.key_name IS NULL
          AND j.available_at <= coalesce($1::timestamptz, now())
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT least(c.free, $2)
        FOR UPDATE OF j SKIP LOCKED
    ) r
),
keys AS (
    SELECT j.queue, j.key_name, max(j.priority) AS priority, min(j.available_at) AS due
    FROM __SCHEMA__.errand_jobs j, t
    WHERE $6::boolean AND j.state = 'ready' AND j.key_name IS NOT NULL
      AND j.available_at <= t.now
      AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
      AND j.queue <> ALL (ARRAY(SELECT p.queue FROM __SCHEMA__.errand_paused_queues p))
      AND (j.queue <> ALL (ARRAY(SELECT l.queue FROM __SCHEMA__.errand_queue_limits l))
           OR j.queue = ANY ($8::text[]))
    GROUP BY j.queue, j.key_name
),
admitted AS (
    SELECT a.id
    FROM (SELECT * FROM keys ORDER BY priority DESC, due, queue, key_name) k
    CROSS JOIN t
    CROSS JOIN LATERAL (
        SELECT count(*) AS running FROM __SCHEMA__.errand_jobs o
        WHERE o.queue = k.queue AND o.key_name = k.key_name AND o.state = 'running'
    ) r
    CROSS JOIN LATERAL (
        SELECT o.key_limit, o.key_ordered FROM __SCHEMA__.errand_jobs o
        WHERE o.queue = k.queue AND o.key_name = k.key_name AND o.state = 'ready'
        ORDER BY o.seq LIMIT 1
    ) h
    CROSS JOIN LATERAL (
        SELECT o.id, o.available_at FROM __SCHEMA__.errand_jobs o
        WHERE o.queue = k.queue AND o.key_name = k.key_name AND o.state = 'ready'
          AND (h.key_ordered OR o.available_at <= t.now)
        ORDER BY o.seq LIMIT greatest(h.key_limit - r.running, 0)
    ) a
    WHERE a.available_at <= t.now
    LIMIT $2
),
ready_keyed AS (
    SELECT j.id, 1 AS src, j.priority, j.available_at AS due, j.queue
    FROM __SCHEMA__.errand_jobs j, t
    WHERE j.id = ANY (ARRAY(SELECT id FROM admitted)) AND j.state = 'ready' AND j.available_at <= t.now
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
-- Each picked job carries its token ($4, by position), so the UPDATE
-- joins one relation: every relation joined to an UPDATE is copied whole
-- into every row for its recheck, which cost a sixth of a claim's time
-- when the tokens and `t` were joined too.
-- The ready candidates, a capped queue's beyond its free slots left out.
due AS (
    SELECT u.id, u.src, u.priority, u.due
    FROM (SELECT u0.*, row_number() OVER (PARTITION BY u0.queue
                                          ORDER BY u0.priority DESC, u0.due, u0.id) AS k
          FROM (SELECT * FROM ready UNION ALL SELECT * FROM ranged
                UNION ALL SELECT * FROM capped UNION ALL SELECT * FROM ready_keyed) u0) u
    LEFT JOIN caps c ON c.queue = u.queue
    WHERE c.queue IS NULL OR u.k <= c.free
),
picked AS (
    SELECT u.id, u.src, u.n, ($4::text[])[u.n] AS token
    FROM (SELECT id, src, row_number() OVER (ORDER BY src, priority DESC, due, id) AS n
          FROM (SELECT id, src, priority, due FROM expired UNION ALL SELECT * FROM due) u0
          ORDER BY src, priority DESC, due, id
          LIMIT $2) u
),
claimed AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state          = 'running',
        attempts       = j.attempts + 1,
        lease_expiries = j.lease_expiries + CASE WHEN j.state = 'running' THEN 1 ELSE 0 END,
        lease_token = p.token,
        lease_until = coalesce($1::timestamptz, now()) + $5::bigint * interval '1 millisecond',
        attempt_started_at = coalesce($1::timestamptz, now()),
        updated_at  = coalesce($1::timestamptz, now())
    FROM picked p
    WHERE j.id = p.id
      AND j.attempts < j.max_attempts
      AND ((j.state = 'ready' AND j.available_at <= coalesce($1::timestamptz, now()))
           OR (j.state = 'running' AND j.lease_until <= coalesce($1::timestamptz, now())
               AND j.lease_expiries + 1 < j.max_lease_expiries))
    RETURNING j.*, p.src, p.n
),
-- A reclaimed lease: the attempt it held (its start read by `expired`,
-- under the row lock) goes to the history.
closed AS (
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
    SELECT c.id, c.replays, c.attempts - 1, e.started, t.now, 'lease_expired',
           'lease expired before the attempt was settled', 'lease_expired'
    FROM claimed c JOIN expired e ON e.id = c.id, t
    WHERE c.src = 0
)
SELECT * FROM claimed ORDER BY n
