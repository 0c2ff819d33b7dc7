-- Takes the schema's key lock when keyed jobs are due in the claimed
-- queues ($2, NULL = all), and returns one row: no queue, and whether it
-- took the lock. (Sent as one statement with cap_lock.sql, this first:
-- see `Queries::claim_locks`.)
-- Held to the end of the claim's transaction, it makes claims that may
-- start keyed jobs take turns, so each sees the running counts the last
-- one committed (the claim statement runs after it, with a fresh snapshot).
SELECT NULL::text AS queue, count(*) > 0 AS locked FROM (
    SELECT pg_advisory_xact_lock(hashtextextended('__SCHEMA__.errand_jobs keys', 0))
    FROM (SELECT 1) one
    WHERE EXISTS (
        SELECT 1 FROM __SCHEMA__.errand_jobs j
        WHERE j.state = 'ready' AND j.key_name IS NOT NULL
          AND j.available_at <= coalesce($1::timestamptz, now())
          AND ($2::text[] IS NULL OR j.queue = ANY ($2::text[])))
) locked
