-- How many of the jobs in :ids (a JSON array of distinct ids) are in one of
-- the states in :states (a JSON array): an operator action changes them
-- only when all are.
SELECT count(*) FROM errand_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN (SELECT value FROM json_each(:states))
