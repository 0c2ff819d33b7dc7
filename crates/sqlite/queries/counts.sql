-- Every queue's jobs per state, counted whole, each state through the
-- partial index that holds it by queue (as the statistics' sample reads
-- them, but without the cap): ready jobs split into due now (`ready`) and
-- due later (`scheduled`). :now in milliseconds.
SELECT queue, CASE WHEN available_at <= :now THEN 'ready' ELSE 'scheduled' END AS state,
       count(*) AS n
FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
WHERE state = 'ready'
GROUP BY 1, 2
UNION ALL
SELECT queue, 'blocked', count(*) FROM errand_jobs INDEXED BY errand_jobs_blocked_by_queue
WHERE state = 'blocked' GROUP BY 1
UNION ALL
SELECT queue, 'waiting', count(*) FROM errand_jobs INDEXED BY errand_jobs_waiting_by_queue
WHERE state = 'waiting' GROUP BY 1
UNION ALL
SELECT queue, 'running', count(*) FROM errand_jobs INDEXED BY errand_jobs_leases
WHERE state = 'running' GROUP BY 1
UNION ALL
SELECT queue, 'dead', count(*) FROM errand_jobs INDEXED BY errand_jobs_dead_by_queue
WHERE state = 'dead' GROUP BY 1
