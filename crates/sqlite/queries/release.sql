-- Releases the dependents of jobs that have ended, inside the transaction
-- that ended them (release_dependents in release.rs). Two selections:
--
-- `@general`, for jobs in :ids (a JSON array) that ended dead or
-- cancelled. Three statements run in this order, each reading what the
-- one before left:
--   1. `release`: every edge now met — the dependent's policy is `run` —
--      lowers its dependent's count; a blocked dependent whose count
--      reaches zero becomes ready (due at its own time or now, whichever
--      is later);
--   2. `mark`: those edges are marked met, so no later ending counts them
--      again (a dependency replayed and then done, after its `run`
--      dependent went ahead);
--   3. `cancel`: the blocked dependents the rule cancels — policy `cancel`
--      under a dead or cancelled dependency, `wait` under a cancelled one
--      — and, through them, theirs.
-- Statements 1 and 2 change nothing the `doomed` set is built from (it
-- follows unmet edges into blocked `wait`/`cancel` dependents only), so
-- all three see the same one. Cancelled dependents count as sources
-- (ended cancelled) for statements 1 and 2: their `run` dependents go on.
--
-- `@done`, for jobs just acknowledged: statement 1 alone (see there).
--
-- Every job is found by its id, edges by their dependency: `+state` and
-- CROSS JOIN keep SQLite from walking the listing index by state instead
-- (a scan of every done or blocked job, per settlement).
-- @general
WITH RECURSIVE
src (id, state) AS (
    SELECT j.id, j.state FROM json_each(:ids) i CROSS JOIN errand_jobs j ON j.id = i.value
    WHERE +j.state IN ('dead', 'cancelled')
),
doomed (id, cause, cause_state) AS (
    SELECT e.job_id, s.id, s.state
    FROM src s
    CROSS JOIN errand_dependencies e ON e.depends_on = s.id
    CROSS JOIN errand_jobs d ON d.id = e.job_id
    WHERE +d.state = 'blocked' AND e.met = 0
      AND ((d.on_dependency_failure = 'cancel' AND s.state IN ('dead', 'cancelled'))
        OR (d.on_dependency_failure = 'wait' AND s.state = 'cancelled'))
    UNION
    SELECT e.job_id, x.id, 'cancelled'
    FROM doomed x
    CROSS JOIN errand_dependencies e ON e.depends_on = x.id
    CROSS JOIN errand_jobs d ON d.id = e.job_id
    WHERE +d.state = 'blocked' AND e.met = 0
      AND d.on_dependency_failure IN ('wait', 'cancel')
),
sources (id, state) AS (
    SELECT id, state FROM src
    UNION
    SELECT id, 'cancelled' FROM doomed
),
meets (job_id, depends_on) AS (
    SELECT e.job_id, e.depends_on
    FROM sources s
    CROSS JOIN errand_dependencies e ON e.depends_on = s.id
    CROSS JOIN errand_jobs d ON d.id = e.job_id
    WHERE e.met = 0 AND d.on_dependency_failure = 'run'
)
-- @done
-- The jobs in :ids were just acknowledged (done) by the transaction that
-- runs this: nothing is cancelled, and every unmet edge out of them is
-- met. Only `release` runs: these edges are not marked, because a job is
-- acknowledged once in its life (a done job is never replayed), so nothing
-- can count them again; a reader takes an edge whose dependency is done as
-- met. The callers pass only distinct jobs their own statement just set
-- done, so the jobs are not read again: the unmet edges out of each are
-- one range of errand_dependencies_of, which holds all three columns.
WITH meets (job_id, depends_on) AS (
    SELECT e.job_id, e.depends_on
    FROM json_each(:ids) i
    CROSS JOIN errand_dependencies e ON e.depends_on = i.value
    WHERE e.met = 0
)
-- @release
UPDATE errand_jobs AS j
SET waiting_on = j.waiting_on - m.n,
    state      = CASE WHEN j.state = 'blocked' AND j.waiting_on = m.n THEN 'ready' ELSE j.state END,
    available_at = CASE WHEN j.state = 'blocked' AND j.waiting_on = m.n
                        THEN max(j.available_at, :now) ELSE j.available_at END,
    updated_at = :now
FROM (SELECT job_id, count(*) AS n FROM meets GROUP BY job_id) AS m
WHERE j.id = m.job_id
RETURNING state = 'ready'
-- @mark
UPDATE errand_dependencies
SET met = 1
WHERE (job_id, depends_on) IN (SELECT job_id, depends_on FROM meets)
-- @cancel
UPDATE errand_jobs AS j
SET state            = 'cancelled',
    last_error       = 'cancelled: its dependency ' || x.cause || ' ended ' || x.cause_state,
    last_error_class = 'cancelled',
    finished_at      = :now,
    updated_at       = :now
-- (SQLite takes the bare cause_state from the row holding min(cause).)
FROM (SELECT id AS doomed_id, min(cause) AS cause, cause_state FROM doomed GROUP BY id) AS x
WHERE j.id = x.doomed_id AND +j.state = 'blocked'
