-- One queue's counts for the statistics, each reading at most :cap rows of
-- that queue's range of an index that leads with the queue (so a queue is
-- never left out because others hold more rows, and nothing walks a
-- million-row table), each range once: ready jobs through the per-queue
-- due index, running jobs (few) through the lease index, dead and blocked
-- and waiting jobs through their per-queue indexes.
SELECT r.due, r.scheduled, r.oldest, r.ready_read, u.running, u.live, d.dead, b.blocked, w.waiting
FROM (
    SELECT coalesce(sum(available_at <= :now), 0) AS due,
           coalesce(sum(available_at > :now), 0) AS scheduled,
           min(CASE WHEN available_at <= :now THEN available_at END) AS oldest,
           count(*) AS ready_read
    FROM (SELECT available_at FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
          WHERE queue = :queue AND state = 'ready' LIMIT :cap)
) r, (
    SELECT count(*) AS running, coalesce(sum(lease_until > :now), 0) AS live
    FROM (SELECT lease_until FROM errand_jobs INDEXED BY errand_jobs_leases
          WHERE state = 'running' AND queue = :queue LIMIT :cap)
) u, (
    SELECT count(*) AS dead
    FROM (SELECT 1 FROM errand_jobs INDEXED BY errand_jobs_dead_by_queue
          WHERE queue = :queue AND state = 'dead' LIMIT :cap)
) d, (
    SELECT count(*) AS blocked
    FROM (SELECT 1 FROM errand_jobs INDEXED BY errand_jobs_blocked_by_queue
          WHERE queue = :queue AND state = 'blocked' LIMIT :cap)
) b, (
    SELECT count(*) AS waiting
    FROM (SELECT 1 FROM errand_jobs INDEXED BY errand_jobs_waiting_by_queue
          WHERE queue = :queue AND state = 'waiting' LIMIT :cap)
) w
