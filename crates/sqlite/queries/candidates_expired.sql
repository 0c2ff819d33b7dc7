-- Running jobs whose lease expired with attempts left: reclaimable.
SELECT id FROM errand_jobs
WHERE state = 'running'
  AND lease_until <= :now
  AND attempts < max_attempts
  AND (:all_queues OR queue IN (SELECT value FROM json_each(:queues)))
ORDER BY lease_until, id
LIMIT :limit
