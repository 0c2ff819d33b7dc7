-- Fenced failures of many jobs in one statement, each judged as fail.sql
-- judges one: no retry time, no attempt left, or a retry past the
-- elapsed-time budget: dead; otherwise ready again at its retry time.
-- $1 now, then one array per field, in input order: $2 ids, $3 tokens,
-- $4 errors, $5 classes, $6 retry times (absolute) or NULL, $7 retry delays
-- in ms or NULL, $8 whether the caller releases dependents (false: a job
-- with dependents is left for a transaction that does). Returns the failed
-- jobs with their input position (`n`).
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now),
i AS (
    SELECT i.*, coalesce(i.at, t.now + i.delay * interval '1 millisecond') AS retry_at
    FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::int8[])
             WITH ORDINALITY AS i (id, token, error, class, at, delay, n), t
),
cur AS (
    SELECT i.n, i.id, i.token, i.error, i.class, i.retry_at,
           (i.retry_at IS NULL OR j.attempts >= j.max_attempts
                  OR i.retry_at > coalesce(j.give_up_at, i.retry_at)) AS dies,
           (i.retry_at IS NOT NULL AND j.attempts < j.max_attempts
                  AND i.retry_at > coalesce(j.give_up_at, i.retry_at)) AS gave_up
    FROM i JOIN __SCHEMA__.errand_jobs j ON j.id = i.id
),
failed AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET state        = CASE WHEN c.dies THEN 'dead' ELSE 'ready' END,
        available_at = CASE WHEN c.dies THEN j.available_at ELSE c.retry_at END,
        finished_at  = CASE WHEN c.dies THEN coalesce($1::timestamptz, now()) ELSE NULL END,
        lease_token = NULL, lease_until = NULL,
        last_error = CASE WHEN c.gave_up
            THEN c.error || ' (gave up: the next retry would fall after the elapsed-time budget)'
            ELSE c.error END,
        last_error_class = c.class, updated_at = coalesce($1::timestamptz, now())
    FROM cur c
    WHERE j.id = c.id AND j.lease_token = c.token AND j.lease_until > coalesce($1::timestamptz, now())
      AND (NOT j.has_dependents OR $8::boolean)
    RETURNING j.*, c.n AS failed_n, c.error AS failed_error, c.class AS failed_class
),
closed AS (
    INSERT INTO __SCHEMA__.errand_attempts
        (job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
    SELECT f.id, f.replays, f.attempts, f.attempt_started_at, t.now,
           CASE WHEN f.state = 'dead' THEN 'dead' ELSE 'retry' END, f.failed_error, f.failed_class
    FROM failed f, t
)
SELECT * FROM failed ORDER BY failed_n
