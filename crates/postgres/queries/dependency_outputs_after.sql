-- One page of the outputs of the jobs $1 depends on, by dependency id
-- (byte order: the edges' ids are in collation "C"): those after $2 (''
-- for the first page), at most $3 (NULL for one that recorded none, or
-- that is gone). The edges read are one range of the primary key
-- (job_id, depends_on).
SELECT e.depends_on, d.output::text
FROM __SCHEMA__.errand_dependencies e
LEFT JOIN __SCHEMA__.errand_jobs d ON d.id = e.depends_on
WHERE e.job_id = $1::text AND e.depends_on > $2::text
ORDER BY e.depends_on
LIMIT $3::bigint
