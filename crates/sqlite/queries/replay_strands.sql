-- How many unmet dependencies of the jobs in :ids (a JSON array of
-- distinct ids) could never release them once replayed: a dependency
-- that is gone (purged or pruned), cancelled (unless the job's policy is
-- `run`), or dead under `cancel` — unless it is replayed with them. A
-- replay puts them back only when there is none. (An edge out of a done
-- job is met by that state alone, here as everywhere.) Read in the
-- replay's own transaction.
SELECT count(*) FROM errand_dependencies e
JOIN errand_jobs j ON j.id = e.job_id
LEFT JOIN errand_jobs d ON d.id = e.depends_on
WHERE e.job_id IN (SELECT value FROM json_each(:ids))
  AND e.met = 0
  AND e.depends_on NOT IN (SELECT value FROM json_each(:ids))
  AND (d.id IS NULL
       OR (d.state = 'cancelled' AND j.on_dependency_failure <> 'run')
       OR (d.state = 'dead' AND j.on_dependency_failure = 'cancel'))
