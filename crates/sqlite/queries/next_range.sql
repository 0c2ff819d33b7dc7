-- The next range of the due index by queue after queue :after: the first
-- queue past it that holds ready jobs, with its highest priority (one
-- probe of the index, in its order).
SELECT queue, priority FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
WHERE state = 'ready' AND queue > :after
ORDER BY queue, priority DESC
LIMIT 1
