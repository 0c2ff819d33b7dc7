-- The jobs :id depends on, in the order they were named, with their state
-- (NULL once purged or pruned) and whether each is met (an edge from a
-- done job is, marked or not: release.sql). (:limit is unused:
-- every dependency is listed.)
SELECT e.depends_on, d.state, e.met OR coalesce(d.state = 'done', 0)
FROM errand_dependencies e
LEFT JOIN errand_jobs d ON d.id = e.depends_on
WHERE e.job_id = :id
ORDER BY e.position
LIMIT :limit
