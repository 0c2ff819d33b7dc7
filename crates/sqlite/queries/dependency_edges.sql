-- The dependency edges of the jobs in :ids (a JSON array): each job with
-- the jobs it depends on, in the order they were named.
SELECT job_id, depends_on FROM errand_dependencies
WHERE job_id IN (SELECT value FROM json_each(:ids))
ORDER BY job_id, position
