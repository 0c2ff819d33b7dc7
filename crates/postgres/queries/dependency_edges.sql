-- The dependency edges of the jobs in $1: each job with the jobs it
-- depends on, in the order they were named.
SELECT job_id, depends_on FROM __SCHEMA__.errand_dependencies
WHERE job_id = ANY ($1::text[])
ORDER BY job_id, position
