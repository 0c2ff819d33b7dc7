-- Operator purge of every job in $2 (distinct ids), each in a state a
-- purge accepts ($5, PurgeRequest::ACCEPTS), or of none; the attempt
-- history goes with them (ON DELETE CASCADE) and the audit keeps an entry
-- each, in $2's order. $1 now, $3 operator, $4 reason.
-- None is purged while a blocked job waits for one of them (`strands`):
-- it would wait for good. The caller has locked the rows already, in an
-- earlier statement of the same transaction (lock_jobs.sql), so this
-- statement's snapshot holds every edge an enqueue made into them.
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
    SELECT count(*) = cardinality($2::text[]) AS all_in FROM locked WHERE state = ANY ($5::text[])
),
strands AS (
    SELECT EXISTS (
        SELECT 1 FROM __SCHEMA__.errand_dependencies e
        JOIN __SCHEMA__.errand_jobs d ON d.id = e.job_id
        WHERE e.depends_on = ANY($2::text[]) AND NOT e.met AND d.state = 'blocked'
    ) AS any
),
gone AS (
    DELETE FROM __SCHEMA__.errand_jobs j
    USING ok, strands
    WHERE ok.all_in AND NOT strands.any AND j.id IN (SELECT id FROM locked)
    RETURNING j.id, j.queue
),
audited AS (
    INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at)
    SELECT g.id, g.queue, 'purge', $3, $4, t.now FROM gone g, t
    ORDER BY array_position($2::text[], g.id)
)
SELECT id FROM gone
