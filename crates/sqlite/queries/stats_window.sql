-- Attempts that ended in the window and did not succeed, by queue, by
-- whether the job went dead with that attempt, and by class: a failure
-- recorded as `dead`, or a lease that expired on the final attempt (the
-- job's finish time is the attempt's), is a dead letter; the rest are
-- retries. A dead letter is classed as the job was (lost_lease, say).
-- At most :cap attempts are read, the newest: a retry storm cannot make a
-- scrape slow.
SELECT j.queue,
       (a.outcome = 'dead'
        OR (a.outcome = 'lease_expired' AND j.state = 'dead' AND j.finished_at = a.finished_at)) AS dead,
       coalesce(CASE WHEN a.outcome = 'lease_expired' AND j.state = 'dead'
                          AND j.finished_at = a.finished_at
                     THEN j.last_error_class ELSE a.error_class END, 'unknown') AS class,
       count(*) AS n
FROM (
    SELECT * FROM errand_attempts INDEXED BY errand_attempts_finished
    WHERE finished_at >= :since AND finished_at IS NOT NULL
      AND outcome IN ('retry', 'dead', 'lease_expired')
    ORDER BY finished_at DESC
    LIMIT :cap
) a
JOIN errand_jobs j ON j.id = a.job_id
GROUP BY 1, 2, 3
