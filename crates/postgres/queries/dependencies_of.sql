-- The jobs $1 depends on, in the order they were named, with their state
-- (NULL once purged or pruned) and whether each is met (an edge out of a
-- done job is, marked or not: release.sql).
SELECT e.depends_on, d.state, e.met OR coalesce(d.state = 'done', false)
FROM __SCHEMA__.errand_dependencies e
LEFT JOIN __SCHEMA__.errand_jobs d ON d.id = e.depends_on
WHERE e.job_id = $1::text
ORDER BY e.position
