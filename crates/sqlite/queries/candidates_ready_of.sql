-- Due ready jobs of one queue (:queue), read like candidates_ready.sql: in
-- claim order straight from the queue's range of the index, so the claim
-- stops reading when it has enough. (A list of queues cannot be read in
-- claim order from this index: candidates_ready_in.sql sorts what it
-- reads.) A claim reads a capped queue this way too, up to its free
-- slots, and never passes a paused or capped queue otherwise
-- (candidates.rs), so capped queues are not left out here.
SELECT id, queue, key_name, key_limit, key_ordered, rowid FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
WHERE state = 'ready'
  AND available_at <= :now
  AND queue NOT IN (SELECT queue FROM errand_paused_queues)
  AND queue = :queue
ORDER BY priority DESC, available_at, id
