-- The queues the ordinary candidate statements leave out — paused queues
-- and capped ones — each with its free slots when it is capped and not
-- paused (its cap less its running jobs, expired leases included: they
-- hold their slot until reclaimed or swept; counted through the running
-- jobs' index), else NULL, and whether it holds ready jobs. A capped
-- queue's jobs are read on their own (candidates_ready_of.sql), up to its
-- free slots; while any of these queues holds ready jobs a claim across
-- every queue reads the other queues' ranges (range_due.sql) instead of
-- walking the due index past them. One statement, run by every claim: two
-- empty tables when no queue is paused or capped.
SELECT x.queue,
       CASE WHEN x.paused THEN NULL
            ELSE max(x.concurrency - (SELECT count(*) FROM errand_jobs j INDEXED BY errand_jobs_leases
                                      WHERE j.state = 'running' AND j.queue = x.queue), 0)
       END AS free,
       EXISTS (SELECT 1 FROM errand_jobs j INDEXED BY errand_jobs_due_by_queue
               WHERE j.state = 'ready' AND j.queue = x.queue) AS has_ready
FROM (SELECT l.queue, l.concurrency,
             l.queue IN (SELECT queue FROM errand_paused_queues) AS paused
      FROM errand_queue_limits l
      UNION ALL
      SELECT p.queue, NULL, 1 FROM errand_paused_queues p
      WHERE p.queue NOT IN (SELECT queue FROM errand_queue_limits)) x
ORDER BY x.queue
