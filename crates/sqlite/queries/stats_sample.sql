-- One state's rows for the statistics, at most :cap of them (the oldest,
-- through the listing index), grouped by queue: a page view or a scrape
-- never walks a million-row table.
SELECT queue, count(*) AS n,
       coalesce(available_at <= :now, 0) AS due,
       coalesce(sum(lease_until > :now), 0) AS live,
       min(available_at) AS oldest
FROM (
    SELECT queue, available_at, lease_until FROM errand_jobs INDEXED BY errand_jobs_state
    WHERE state = :state
    ORDER BY created_at, id
    LIMIT :cap
)
GROUP BY queue, available_at <= :now
