-- Operator reschedule of every job in $2 (distinct ids), each in a state a
-- reschedule accepts ($8, RescheduleRequest::ACCEPTS), or of none: a new
-- due time ($5 a time, or $6 milliseconds after now; both NULL keeps the
-- job's own) and/or priority ($7; NULL keeps it), with an audit entry each
-- in $2's order. $1 now, $3 operator, $4 reason.
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
    SELECT count(*) = cardinality($2::text[]) AS all_in FROM locked WHERE state = ANY ($8::text[])
),
moved AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET available_at = coalesce($5::timestamptz, t.now + $6::bigint * interval '1 millisecond',
                                j.available_at),
        priority = coalesce($7::smallint, j.priority),
        updated_at = t.now
    FROM t, ok
    WHERE ok.all_in AND j.id IN (SELECT id FROM locked)
    RETURNING j.*
),
audited AS (
    INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at)
    SELECT m.id, m.queue, 'reschedule', $3, $4, t.now FROM moved m, t
    ORDER BY array_position($2::text[], m.id)
)
SELECT * FROM moved
