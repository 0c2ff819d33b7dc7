-- Due ready jobs, highest priority first, then oldest due.
SELECT id FROM errand_jobs
WHERE state = 'ready'
  AND available_at <= :now
  AND (:all_queues OR queue IN (SELECT value FROM json_each(:queues)))
ORDER BY priority DESC, available_at, id
LIMIT :limit
