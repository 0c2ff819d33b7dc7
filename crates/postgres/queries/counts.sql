-- Every queue's jobs per state, counted whole, each state through the
-- partial index that holds it (as the statistics' sample reads them, but
-- without the cap): ready jobs split into due now (`ready`) and due later
-- (`scheduled`), unkeyed and keyed ones apart (a queue may have both
-- rows; the caller adds them up). $1 now.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now)
SELECT j.queue, CASE WHEN j.available_at <= t.now THEN 'ready' ELSE 'scheduled' END AS state,
       count(*) AS n
FROM __SCHEMA__.errand_jobs j, t
WHERE j.state = 'ready' AND j.key_name IS NULL
GROUP BY 1, 2
UNION ALL
SELECT j.queue, CASE WHEN j.available_at <= t.now THEN 'ready' ELSE 'scheduled' END, count(*)
FROM __SCHEMA__.errand_jobs j, t
WHERE j.state = 'ready' AND j.key_name IS NOT NULL
GROUP BY 1, 2
UNION ALL
SELECT j.queue, 'blocked', count(*) FROM __SCHEMA__.errand_jobs j WHERE j.state = 'blocked' GROUP BY 1
UNION ALL
SELECT j.queue, 'waiting', count(*) FROM __SCHEMA__.errand_jobs j WHERE j.state = 'waiting' GROUP BY 1
UNION ALL
SELECT j.queue, 'running', count(*) FROM __SCHEMA__.errand_jobs j WHERE j.state = 'running' GROUP BY 1
UNION ALL
SELECT j.queue, 'dead', count(*) FROM __SCHEMA__.errand_jobs j WHERE j.state = 'dead' GROUP BY 1
