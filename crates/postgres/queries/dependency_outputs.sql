-- The outputs of the jobs $1 depends on, in the order they were named
-- (NULL for one that recorded none, or that is gone).
SELECT e.depends_on, d.output::text
FROM __SCHEMA__.errand_dependencies e
LEFT JOIN __SCHEMA__.errand_jobs d ON d.id = e.depends_on
WHERE e.job_id = $1::text
ORDER BY e.position
