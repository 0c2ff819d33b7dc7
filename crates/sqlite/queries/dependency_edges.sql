-- The dependencies of the jobs in :ids (a JSON array), at most :first of
-- each (the first named), in the order they were named, each row with how
-- many its job has in all: a page of steps shows a bounded number of
-- edges, and says how many it left out.
SELECT job_id, depends_on, total FROM (
    SELECT job_id, depends_on, position,
           row_number() OVER (PARTITION BY job_id ORDER BY position) AS n,
           count(*) OVER (PARTITION BY job_id) AS total
    FROM errand_dependencies
    WHERE job_id IN (SELECT value FROM json_each(:ids))
)
WHERE n <= :first
ORDER BY job_id, position
