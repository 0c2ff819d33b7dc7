-- The first :limit jobs that depend on :id: blocked ones first (what a
-- purge of :id would strand), then by id. An edge from a done job is met,
-- marked or not (release.sql).
SELECT e.job_id, d.state,
       e.met OR coalesce((SELECT s.state FROM errand_jobs s WHERE s.id = :id) = 'done', 0)
FROM errand_dependencies e
JOIN errand_jobs d ON d.id = e.job_id
WHERE e.depends_on = :id
ORDER BY d.state <> 'blocked', e.job_id
LIMIT :limit
