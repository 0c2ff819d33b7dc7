-- The first $2 jobs that depend on $1: blocked ones first (what a purge of
-- $1 would strand), then by id.
SELECT e.job_id, d.state, e.met
FROM __SCHEMA__.errand_dependencies e
JOIN __SCHEMA__.errand_jobs d ON d.id = e.job_id
WHERE e.depends_on = $1::text
ORDER BY d.state <> 'blocked', e.job_id
LIMIT $2::bigint
