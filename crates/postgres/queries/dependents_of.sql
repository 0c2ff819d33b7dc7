-- The first $2 jobs that depend on $1: blocked ones first (what a purge of
-- $1 would strand), then by id. An edge out of a done job is met, marked
-- or not (release.sql).
SELECT e.job_id, d.state,
       e.met OR coalesce((SELECT s.state FROM __SCHEMA__.errand_jobs s
                          WHERE s.id = $1::text) = 'done', false)
FROM __SCHEMA__.errand_dependencies e
JOIN __SCHEMA__.errand_jobs d ON d.id = e.job_id
WHERE e.depends_on = $1::text
ORDER BY d.state <> 'blocked', e.job_id
LIMIT $2::bigint
