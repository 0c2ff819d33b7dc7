-- One page of the outputs of the jobs :id depends on, by dependency id
-- (byte order): those after :after ('' for the first page), at most
-- :limit (NULL for one that recorded none, or that is gone). The edges
-- read are one range of the primary key (job_id, depends_on).
SELECT e.depends_on, d.output
FROM errand_dependencies e
LEFT JOIN errand_jobs d ON d.id = e.depends_on
WHERE e.job_id = :id AND e.depends_on > :after
ORDER BY e.depends_on
LIMIT :limit
