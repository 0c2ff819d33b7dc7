-- One queue's counts for the statistics, each reading at most :cap rows of
-- that queue's range of an index that leads with the queue (so a queue is
-- never left out because others hold more rows, and nothing walks a
-- million-row table). Plain and keyed ready jobs in the per-queue due
-- index's order; running jobs (few) through the lease index; dead jobs
-- through their per-queue index.
SELECT
    (SELECT coalesce(sum(available_at <= :now), 0) FROM (
        SELECT available_at FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
        WHERE queue = :queue AND state = 'ready' LIMIT :cap)) AS due,
    (SELECT coalesce(sum(available_at > :now), 0) FROM (
        SELECT available_at FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
        WHERE queue = :queue AND state = 'ready' LIMIT :cap)) AS scheduled,
    (SELECT min(available_at) FROM (
        SELECT available_at FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
        WHERE queue = :queue AND state = 'ready' LIMIT :cap) WHERE available_at <= :now) AS oldest,
    (SELECT count(*) FROM (
        SELECT 1 FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
        WHERE queue = :queue AND state = 'ready' LIMIT :cap)) AS ready_read,
    (SELECT count(*) FROM (
        SELECT 1 FROM errand_jobs INDEXED BY errand_jobs_leases
        WHERE state = 'running' AND queue = :queue LIMIT :cap)) AS running,
    (SELECT coalesce(sum(lease_until > :now), 0) FROM (
        SELECT lease_until FROM errand_jobs INDEXED BY errand_jobs_leases
        WHERE state = 'running' AND queue = :queue LIMIT :cap)) AS live,
    (SELECT count(*) FROM (
        SELECT 1 FROM errand_jobs INDEXED BY errand_jobs_dead_by_queue
        WHERE queue = :queue AND state = 'dead' LIMIT :cap)) AS dead
