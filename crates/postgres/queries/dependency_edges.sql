-- The dependencies of the jobs in $1, at most $2 of each (the first
-- named), in the order they were named, each row with how many its job
-- has in all: a page of steps shows a bounded number of edges, and says
-- how many it left out.
SELECT job_id, depends_on, total FROM (
    SELECT job_id, depends_on, position,
           row_number() OVER (PARTITION BY job_id ORDER BY position) AS n,
           count(*) OVER (PARTITION BY job_id) AS total
    FROM __SCHEMA__.errand_dependencies
    WHERE job_id = ANY ($1::text[])
) e
WHERE n <= $2
ORDER BY job_id, position
