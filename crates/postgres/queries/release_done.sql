-- Releases the dependents of jobs this transaction has just acknowledged
-- ($2, every one now `done`), at $1 (NULL: the server's clock): release.sql
-- without its cascade. A done dependency meets every edge out of it,
-- whatever the dependent's policy, and nothing is cancelled, so each
-- dependent's count drops by its edges from $2 and a blocked dependent
-- whose count reaches zero becomes ready. The edges are not marked (an
-- edge out of a done job is met by that state alone; release.sql says
-- why). The same locking as release.sql: dependents locked in id order
-- before they are changed, so two releases sharing dependents cannot
-- deadlock, and the one that waits counts from the row the other
-- committed. Acknowledgments are by far the commonest settlement, and
-- release.sql's recursive cascade costs each call its set-up even when
-- nothing is cancelled.
WITH
t AS (SELECT coalesce($1::timestamptz, now()) AS now),
counts AS MATERIALIZED (
    SELECT e.job_id, count(*)::integer AS n
    FROM unnest($2::text[]) AS s (id)
    CROSS JOIN LATERAL (
        SELECT e.job_id::text AS job_id FROM __SCHEMA__.errand_dependencies e
        WHERE e.depends_on = s.id AND NOT e.met OFFSET 0
    ) e
    GROUP BY e.job_id
),
locked AS MATERIALIZED (
    SELECT j.id FROM __SCHEMA__.errand_jobs j
    WHERE j.id = ANY (ARRAY(SELECT job_id FROM counts))
    ORDER BY j.id FOR UPDATE
),
changed AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET waiting_on   = j.waiting_on - c.n,
        state        = CASE WHEN j.state = 'blocked' AND j.waiting_on = c.n
                            THEN 'ready' ELSE j.state END,
        available_at = CASE WHEN j.state = 'blocked' AND j.waiting_on = c.n
                            THEN greatest(j.available_at, t.now) ELSE j.available_at END,
        updated_at   = t.now
    FROM counts c, t
    WHERE j.id = ANY (ARRAY(SELECT id FROM locked)) AND j.id = c.job_id
    RETURNING j.state, j.queue
),
-- (The statement ends with release_wake.sql, appended when it is loaded.)
