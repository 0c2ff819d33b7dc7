-- One state's rows for the statistics, at most $3 of them (the oldest,
-- through the listing index), grouped by queue: a page view or a scrape
-- never walks a million-row table. $1 now, $2 state.
SELECT s.queue, count(*) AS n,
       s.available_at <= s.now AS due,
       count(*) FILTER (WHERE s.lease_until > s.now) AS live,
       min(s.available_at) AS oldest
FROM (
    SELECT j.queue, j.available_at, j.lease_until, coalesce($1::timestamptz, now()) AS now
    FROM __SCHEMA__.errand_jobs j
    WHERE j.state = $2
    ORDER BY j.created_at, j.id
    LIMIT $3
) s
GROUP BY s.queue, s.available_at <= s.now
