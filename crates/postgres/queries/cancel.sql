-- Operator cancel of every job in $2 (distinct ids), each in a state a
-- cancel accepts ($5, CancelRequest::ACCEPTS), or of none, with an audit
-- entry each in $2's order. $1 now, $3 operator, $4 reason. A running
-- job's attempt ends here, in the history, from the state `locked` read
-- before the update changed it.
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
gone AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state = 'cancelled', lease_token = NULL, lease_until = NULL,
        await_signal = NULL, await_until = NULL, on_await_timeout = NULL,
        last_error = 'cancelled by ' || $3, last_error_class = 'cancelled',
        finished_at = t.now, updated_at = t.now
    FROM t, ok, locked p
    WHERE ok.all_in AND p.id = j.id
    RETURNING j.*, p.state AS prior_state
),
closed AS (
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
    SELECT g.id, g.replays, g.attempts, coalesce(g.attempt_started_at, t.now), t.now,
           'cancelled', 'cancelled by an operator', 'cancelled'
    FROM gone g, t WHERE g.prior_state = 'running'
),
audited AS (
    INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at)
    SELECT g.id, g.queue, 'cancel', $3, $4, t.now FROM gone g, t
    ORDER BY array_position($2::text[], g.id)
)
SELECT * FROM gone
