-- Operator replay of every job in $2 (distinct ids), each in a state a
-- replay accepts ($5, ReplayRequest::ACCEPTS), or of none: a fresh attempt
-- budget, due now (blocked again if it still waits for a dependency), and
-- an audit entry each in $2's order. $1 now, $3 operator, $4 reason.
-- None is replayed while one of them has an unmet dependency that could
-- never release it (`strands`): gone (purged or pruned), cancelled (unless
-- its policy is `run`), or dead under `cancel` — unless that dependency
-- is replayed with it. The caller has locked those dependencies in an
-- earlier statement of the same transaction (lock_unmet_dependencies.sql),
-- so this statement reads them as they are and none can end meanwhile.
-- `locked` takes the rows in id order (no deadlock with another action)
-- and sees their latest state; the update runs only when all qualify.
-- The update must not test the state again: it finds the rows through the
-- statement's snapshot, and a job that reached an accepted state after
-- that snapshot (a worker's retry committing while `locked` waited for
-- it) would be skipped by such a test against its older version, leaving
-- the others changed alone. `locked` holds every row, so none can move.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
locked AS (
    SELECT j.id, j.state FROM __SCHEMA__.errand_jobs j
    WHERE j.id = ANY($2::text[]) ORDER BY j.id FOR UPDATE
),
ok AS (
    SELECT count(*) = cardinality($2::text[]) AS all_in
    FROM locked WHERE state = ANY ($5::text[])
),
strands AS (
    SELECT EXISTS (
        SELECT 1 FROM __SCHEMA__.errand_dependencies e
        JOIN __SCHEMA__.errand_jobs j ON j.id = e.job_id
        LEFT JOIN __SCHEMA__.errand_jobs d ON d.id = e.depends_on
        WHERE e.job_id = ANY($2::text[]) AND NOT e.met
          AND e.depends_on <> ALL ($2::text[])
          AND (d.id IS NULL
               OR (d.state = 'cancelled' AND j.on_dependency_failure <> 'run')
               OR (d.state = 'dead' AND j.on_dependency_failure = 'cancel'))
    ) AS any
),
back AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = CASE WHEN j.waiting_on > 0 THEN 'blocked' ELSE 'ready' END, attempts = 0, lease_expiries = 0, replays = j.replays + 1,
        available_at = t.now, finished_at = NULL, updated_at = t.now, progress = NULL
    FROM t, ok, strands
    WHERE ok.all_in AND NOT strands.any AND j.id IN (SELECT id FROM locked)
    RETURNING j.*
),
audited AS (
    INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at)
    SELECT b.id, b.queue, 'replay', $3, $4, t.now FROM back b, t
    ORDER BY array_position($2::text[], b.id)
)
SELECT * FROM back
