-- Due ready jobs of one capped queue (:queue), read like
-- candidates_ready_of.sql: the claim reads at most the queue's free slots
-- (excluded_queues.sql).
SELECT id, queue, key_name, key_limit, key_ordered, rowid FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
WHERE state = 'ready'
  AND available_at <= :now
  AND queue NOT IN (SELECT queue FROM errand_paused_queues)
  AND queue = :queue
ORDER BY priority DESC, available_at, id
