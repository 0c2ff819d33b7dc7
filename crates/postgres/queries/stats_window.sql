-- Attempts that ended in the window and did not succeed, by queue, by
-- whether the job went dead with that attempt, and by class: a failure
-- recorded as `dead`, or a lease that expired on the final attempt (the
-- job's finish time is the attempt's), is a dead letter; the rest are
-- retries. A dead letter is classed as the job was (lost_lease, say).
-- At most $3 attempts are read, the newest: a retry storm cannot make a
-- scrape slow. $1 now, $2 the window in milliseconds.
SELECT j.queue,
       (a.outcome = 'dead'
        OR (a.outcome = 'lease_expired' AND j.state = 'dead' AND j.finished_at = a.finished_at)) AS dead,
       coalesce(CASE WHEN a.outcome = 'lease_expired' AND j.state = 'dead'
                          AND j.finished_at = a.finished_at
                     THEN j.last_error_class ELSE a.error_class END, 'unknown') AS class,
       count(*) AS n
FROM (
    SELECT * FROM __SCHEMA__.errand_attempts
    WHERE finished_at >= coalesce($1::timestamptz, now()) - $2::bigint * interval '1 millisecond'
      AND outcome IN ('retry', 'dead', 'lease_expired')
    ORDER BY finished_at DESC
    LIMIT $3
) a
-- One primary-key probe per attempt (LIMIT 1 keeps the planner from
-- hashing the whole job table for a join).
CROSS JOIN LATERAL (
    SELECT o.queue, o.state, o.finished_at, o.last_error_class
    FROM __SCHEMA__.errand_jobs o WHERE o.id = a.job_id LIMIT 1
) j
GROUP BY 1, 2, 3
