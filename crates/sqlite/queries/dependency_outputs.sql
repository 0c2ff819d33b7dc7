-- The outputs of the jobs :id depends on, in the order they were named
-- (NULL for one that recorded none, or that is gone).
SELECT e.depends_on, d.output
FROM errand_dependencies e
LEFT JOIN errand_jobs d ON d.id = e.depends_on
WHERE e.job_id = :id
ORDER BY e.position
