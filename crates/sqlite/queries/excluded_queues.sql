-- The queues a claim across every queue takes nothing from as the due
-- index lists them — paused queues, and capped ones (read on their own) —
-- each with whether it holds ready jobs. When one does, the claim reads
-- the other queues' ranges (range_due.sql) instead of walking the due
-- index past those jobs.
SELECT x.queue,
       EXISTS (SELECT 1 FROM errand_jobs j INDEXED BY errand_jobs_due_by_queue
               WHERE j.state = 'ready' AND j.queue = x.queue) AS has_ready
FROM (SELECT queue FROM errand_paused_queues UNION SELECT queue FROM errand_queue_limits) x
