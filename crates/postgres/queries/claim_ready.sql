-- The common claim: due ready jobs without a concurrency key, when this
-- claim neither reclaims expired leases nor holds the key lock or a capped
-- queue's lock (claim.sql does all of these). The same order, locking and
-- rechecks as claim.sql's ready jobs; a smaller plan to start and run at
-- every claim. Paused queues and capped queues (errand_queue_limits) are
-- left out.
-- $1 now, $2 limit, $3 queues (NULL = all), $4 one fresh token per row,
-- $5 lease length in milliseconds; $6, $7, $8: where to resume (the
-- priority, due time and id of the last job the previous claim took), or
-- NULL to scan from the start.
--
-- A busy worker's claims walk the due index from where the last one
-- stopped: the entries before it belong to jobs already claimed, dead
-- until vacuum removes them, and walking them again at every claim made a
-- million-job backlog drain at half the speed of a small one. `at_cursor`
-- reads on from the resume point within its priority (an index range);
-- `beyond` reads the lower priorities, or everything without a resume
-- point, and only when `at_cursor` came up short.
WITH at_cursor AS (
    SELECT j.id, j.priority, j.available_at AS due
    FROM __SCHEMA__.errand_jobs j
    WHERE $6::smallint IS NOT NULL
      AND j.priority = $6::smallint AND (j.available_at, j.id) > ($7::timestamptz, $8::text)
      AND j.state = 'ready' AND j.key_name IS NULL
      AND j.available_at <= coalesce($1::timestamptz, now())
      AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
      AND j.queue <> ALL (ARRAY(SELECT p.queue FROM __SCHEMA__.errand_paused_queues p
                                UNION ALL SELECT l.queue FROM __SCHEMA__.errand_queue_limits l))
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
beyond AS (
    SELECT j.id, j.priority, j.available_at AS due
    FROM __SCHEMA__.errand_jobs j
    WHERE ($6::smallint IS NULL OR j.priority < $6::smallint)
      AND j.state = 'ready' AND j.key_name IS NULL
      AND j.available_at <= coalesce($1::timestamptz, now())
      AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
      AND j.queue <> ALL (ARRAY(SELECT p.queue FROM __SCHEMA__.errand_paused_queues p
                                UNION ALL SELECT l.queue FROM __SCHEMA__.errand_queue_limits l))
      AND (SELECT count(*) FROM at_cursor) < $2
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $2 - (SELECT count(*) FROM at_cursor)
    FOR UPDATE OF j SKIP LOCKED
),
ready AS (SELECT * FROM at_cursor UNION ALL SELECT * FROM beyond),
picked AS (
    SELECT r.id, r.n, ($4::text[])[r.n] AS token
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, due, id) AS n FROM ready) r
),
claimed AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state          = 'running',
        attempts       = j.attempts + 1,
        lease_token    = p.token,
        lease_until    = coalesce($1::timestamptz, now()) + $5::bigint * interval '1 millisecond',
        attempt_started_at = coalesce($1::timestamptz, now()),
        updated_at     = coalesce($1::timestamptz, now())
    FROM picked p
    WHERE j.id = p.id
      AND j.attempts < j.max_attempts
      AND j.state = 'ready' AND j.available_at <= coalesce($1::timestamptz, now())
    RETURNING j.*, 1 AS src, p.n
)
SELECT * FROM claimed ORDER BY n
