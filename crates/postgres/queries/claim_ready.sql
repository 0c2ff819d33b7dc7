-- The common claim: due ready jobs without a concurrency key, when this
-- claim neither reclaims expired leases nor holds the key lock (claim.sql
-- does all three). The same order, locking and rechecks as claim.sql's
-- ready jobs; a smaller plan to start and run at every claim.
-- $1 now, $2 limit, $3 queues (NULL = all), $4 one fresh token per row,
-- $5 lease length in milliseconds.
WITH ready AS (
    SELECT j.id, j.priority, j.available_at AS due
    FROM __SCHEMA__.errand_jobs j
    WHERE j.state = 'ready' AND j.key_name IS NULL
      AND j.available_at <= coalesce($1::timestamptz, now())
      AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
      AND j.queue <> ALL (ARRAY(SELECT p.queue FROM __SCHEMA__.errand_paused_queues p))
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
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
