-- The next lower priority among queue :queue's ready jobs below :priority
-- (one probe of the due index by queue).
SELECT priority FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
WHERE state = 'ready' AND queue = :queue AND priority < :priority
ORDER BY priority DESC
LIMIT 1
