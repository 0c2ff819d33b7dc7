-- How many blocked jobs wait (an unmet edge) for one of the jobs in :ids
-- (a JSON array of distinct ids). A purge deletes them only when none
-- does: a job waiting for a job that is gone would wait for good. Read in
-- the purge's own transaction, so no enqueue can name them in between.
SELECT count(*) FROM errand_dependencies e
JOIN errand_jobs d ON d.id = e.job_id
WHERE e.depends_on IN (SELECT value FROM json_each(:ids))
  AND e.met = 0
  AND d.state = 'blocked'
