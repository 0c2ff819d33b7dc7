-- The due ready jobs of one queue at one priority, oldest due first: one
-- range of the due index by queue, read no further than the due ones. A
-- claim across every queue merges these ranges in claim order when paused
-- or capped queues hold ready jobs (candidates.rs).
SELECT id, queue, key_name, key_limit, key_ordered, rowid, available_at
FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
WHERE state = 'ready' AND queue = :queue AND priority = :priority AND available_at <= :now
ORDER BY available_at, id
