-- The capped queues that are not paused, each with its free slots: its
-- cap less its running jobs (expired leases included: they hold their
-- slot until reclaimed or swept), counted through the running jobs' index.
SELECT l.queue,
       max(l.concurrency - (SELECT count(*) FROM errand_jobs j INDEXED BY errand_jobs_leases
                            WHERE j.state = 'running' AND j.queue = l.queue), 0) AS free
FROM errand_queue_limits l
WHERE l.queue NOT IN (SELECT queue FROM errand_paused_queues)
ORDER BY l.queue
