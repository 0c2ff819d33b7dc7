-- Claims up to $2 due jobs in one statement: reclaimable expired leases
-- first, then ready jobs by priority and due time. SKIP LOCKED lets
-- concurrent claimers pass each other; the UPDATE re-checks every
-- condition. $3: queues (NULL = all), $4: one fresh token per row,
-- $5: lease length in milliseconds.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
expired AS (
    SELECT j.id, 0 AS src, 0::smallint AS priority, j.lease_until AS due
    FROM __SCHEMA__.errand_jobs j, t
    WHERE j.state = 'running' AND j.lease_until <= t.now AND j.attempts < j.max_attempts
      AND j.lease_expiries + 1 < j.max_lease_expiries
      AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
    ORDER BY j.lease_until, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
ready AS (
    SELECT j.id, 1 AS src, j.priority, j.available_at AS due
    FROM __SCHEMA__.errand_jobs j, t
    WHERE j.state = 'ready' AND j.available_at <= t.now
      AND ($3::text[] IS NULL OR j.queue = ANY ($3::text[]))
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $2
    FOR UPDATE OF j SKIP LOCKED
),
picked AS (
    SELECT id, src, row_number() OVER (ORDER BY src, priority DESC, due, id) AS n
    FROM (SELECT * FROM expired UNION ALL SELECT * FROM ready) u
    ORDER BY src, priority DESC, due, id
    LIMIT $2
),
claimed AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state          = 'running',
        attempts       = j.attempts + 1,
        lease_expiries = j.lease_expiries + CASE WHEN j.state = 'running' THEN 1 ELSE 0 END,
        lease_token = tk.token,
        lease_until = t.now + $5::bigint * interval '1 millisecond',
        updated_at  = t.now
    FROM picked p
    JOIN unnest($4::text[]) WITH ORDINALITY AS tk (token, n) ON tk.n = p.n,
    t
    WHERE j.id = p.id
      AND j.attempts < j.max_attempts
      AND ((j.state = 'ready' AND j.available_at <= t.now)
           OR (j.state = 'running' AND j.lease_until <= t.now
               AND j.lease_expiries + 1 < j.max_lease_expiries))
    RETURNING j.*, p.src, p.n
),
closed AS (
    UPDATE __SCHEMA__.errand_attempts a
    SET finished_at = t.now, outcome = 'lease_expired',
        error = 'lease expired before the attempt was settled', error_class = 'lease_expired'
    FROM claimed c, t
    WHERE c.src = 0 AND a.job_id = c.id AND a.finished_at IS NULL
),
opened AS (
    INSERT INTO __SCHEMA__.errand_attempts (job_id, cycle, attempt, started_at)
    SELECT c.id, c.replays, c.attempts, t.now FROM claimed c, t
)
SELECT * FROM claimed ORDER BY n
