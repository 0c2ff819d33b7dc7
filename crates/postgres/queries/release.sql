-- Releases the dependents of the jobs in $2 that have ended, at $1 (NULL:
-- the server's clock). Runs in the settlement's transaction, as a
-- statement of its own after the one that ended them (a data-modifying
-- CTE could not see their new state). Every edge that is now met — its
-- dependency is done, or ended and the dependent's policy is `run` —
-- lowers its dependent's count; a blocked dependent whose count
-- reaches zero becomes ready. The blocked dependents the rule cancels
-- (policy `cancel` under a dead or cancelled dependency, `wait` under a
-- cancelled one) are cancelled, and through them theirs; cancelled ones
-- count as ended sources for the edges of their own dependents. (Jobs just
-- acknowledged take release_done.sql, this statement without the cascade.)
--
-- Concurrency: the ended jobs' rows are locked by this transaction, and
-- an enqueue naming one as a dependency must lock that row too, so every
-- edge into them is in this statement's snapshot. Two dependencies of one
-- job ending at once in two transactions meet on the dependent's row:
-- `locked` locks their rows in id order, and the one that waits computes
-- the count from the row the other committed. No edge counts twice
-- (`marked` below). Edges are looked up
-- per dependency, and each dependent by its key (LATERAL, kept apart by
-- OFFSET 0, and `= ANY` below): joined freely, the planner scanned the
-- whole edge table, or every blocked job, for each settlement whenever
-- the statistics were stale (a freshly loaded workflow, autovacuum late).
WITH RECURSIVE
t AS (SELECT coalesce($1::timestamptz, now()) AS now),
-- (The ended jobs are found by key alone, OFFSET 0 keeping the state
-- test out of the scan: combined with the state index, it read every
-- done job's entry.)
src (id, state) AS (
    SELECT s.id, s.state FROM (
        SELECT j.id::text AS id, j.state::text AS state FROM __SCHEMA__.errand_jobs j
        WHERE j.id = ANY($2::text[]) OFFSET 0
    ) s
    WHERE s.state IN ('done', 'dead', 'cancelled')
),
doomed (id, cause, cause_state) AS (
    SELECT e.job_id::text, s.id, s.state
    FROM src s
    CROSS JOIN LATERAL (
        SELECT e.job_id FROM __SCHEMA__.errand_dependencies e
        WHERE e.depends_on = s.id AND NOT e.met OFFSET 0
    ) e
    CROSS JOIN LATERAL (
        SELECT d.on_dependency_failure AS policy FROM __SCHEMA__.errand_jobs d
        WHERE d.id = e.job_id AND d.state = 'blocked' OFFSET 0
    ) d
    WHERE s.state IN ('dead', 'cancelled')
      AND (d.policy = 'cancel' OR (d.policy = 'wait' AND s.state = 'cancelled'))
    UNION
    SELECT e.job_id::text, x.id, 'cancelled'::text
    FROM doomed x
    CROSS JOIN LATERAL (
        SELECT e.job_id FROM __SCHEMA__.errand_dependencies e
        WHERE e.depends_on = x.id AND NOT e.met OFFSET 0
    ) e
    CROSS JOIN LATERAL (
        SELECT 1 FROM __SCHEMA__.errand_jobs d
        WHERE d.id = e.job_id AND d.state = 'blocked'
          AND d.on_dependency_failure IN ('wait', 'cancel') OFFSET 0
    ) d
),
sources (id, state) AS (
    SELECT id, state FROM src
    UNION
    SELECT id, 'cancelled'::text FROM doomed
),
-- The edges that count now: every unmet edge out of a done source, and
-- out of a dead or cancelled one those of `run` dependents.
meets AS (
    SELECT e.job_id, e.depends_on, s.state = 'done' AS by_done
    FROM sources s
    CROSS JOIN LATERAL (
        SELECT e.job_id, e.depends_on FROM __SCHEMA__.errand_dependencies e
        WHERE e.depends_on = s.id AND NOT e.met OFFSET 0
    ) e
    WHERE s.state = 'done'
       OR (SELECT d.on_dependency_failure FROM __SCHEMA__.errand_jobs d
           WHERE d.id = e.job_id) = 'run'
),
-- Only the edges out of dead or cancelled sources are marked met: an edge
-- out of a done job is met by that state alone (the readers say so, and a
-- prune marks it before the job goes), and it is counted once, by the
-- transaction that made its source done. Not writing it saves a row
-- version per edge on the path every successful job takes. The edges out
-- of ended sources may be counted by two transactions at once (a job
-- cancelled in cascade from two sides), so these are re-tested `NOT met`
-- on their latest version here, and only the one that marks counts them.
-- They are reached through their dependencies (`depends_on = ANY`, the
-- index on it), never by a scan of the whole table.
marked AS (
    UPDATE __SCHEMA__.errand_dependencies e
    SET met = true
    FROM meets m
    WHERE e.depends_on = ANY (ARRAY(SELECT DISTINCT depends_on FROM meets WHERE NOT by_done))
      AND NOT m.by_done
      AND e.job_id = m.job_id AND e.depends_on = m.depends_on AND NOT e.met
    RETURNING e.job_id
),
counts AS MATERIALIZED (
    SELECT job_id, count(*)::integer AS n FROM (
        SELECT job_id FROM meets WHERE by_done
        UNION ALL
        SELECT job_id FROM marked
    ) counted
    GROUP BY job_id
),
locked AS MATERIALIZED (
    SELECT j.id FROM __SCHEMA__.errand_jobs j
    WHERE j.id = ANY (ARRAY(SELECT job_id FROM counts UNION SELECT id FROM doomed))
    ORDER BY j.id FOR UPDATE
),
-- One update for both kinds of change: a job may be both released by one
-- dependency and cancelled by another ending in the same call, and a
-- statement cannot change a row twice.
changed AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET waiting_on       = j.waiting_on - coalesce(c.n, 0),
        state            = CASE
            WHEN x.id IS NOT NULL AND j.state = 'blocked' THEN 'cancelled'
            WHEN j.state = 'blocked' AND j.waiting_on = c.n THEN 'ready'
            ELSE j.state END,
        available_at     = CASE
            WHEN x.id IS NULL AND j.state = 'blocked' AND j.waiting_on = c.n
            THEN greatest(j.available_at, t.now) ELSE j.available_at END,
        last_error       = CASE WHEN x.id IS NOT NULL AND j.state = 'blocked'
            THEN 'cancelled: its dependency ' || x.cause || ' ended ' || x.cause_state
            ELSE j.last_error END,
        last_error_class = CASE WHEN x.id IS NOT NULL AND j.state = 'blocked'
            THEN 'cancelled' ELSE j.last_error_class END,
        finished_at      = CASE WHEN x.id IS NOT NULL AND j.state = 'blocked'
            THEN t.now ELSE j.finished_at END,
        updated_at       = t.now
    FROM (SELECT l.id FROM locked l) l
    LEFT JOIN counts c ON c.job_id = l.id
    LEFT JOIN (SELECT DISTINCT ON (id) id, cause, cause_state FROM doomed ORDER BY id, cause) x
        ON x.id = l.id,
         t
    WHERE j.id = ANY (ARRAY(SELECT id FROM locked)) AND j.id = l.id
    RETURNING j.id, j.state, j.queue
),
-- (The statement ends with release_wake.sql, appended when it is loaded.)
