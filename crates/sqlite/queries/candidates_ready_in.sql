-- Due ready jobs in the named queues (:queues is a JSON array of names),
-- read like candidates_ready.sql.
SELECT id, queue, key_name, key_limit, key_ordered, rowid FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
WHERE state = 'ready'
  AND available_at <= :now
  AND queue NOT IN (SELECT queue FROM errand_paused_queues)
  AND queue NOT IN (SELECT queue FROM errand_queue_limits)
  AND queue IN (SELECT value FROM json_each(:queues))
ORDER BY priority DESC, available_at, id
