-- Running jobs whose lease expired with attempts left: reclaimable.
SELECT id FROM errand_jobs INDEXED BY errand_jobs_leases
WHERE state = 'running'
  AND lease_until <= :lease_now
  AND queue NOT IN (SELECT queue FROM errand_paused_queues)
  AND attempts < max_attempts
  AND lease_expiries + 1 < max_lease_expiries
ORDER BY lease_until, id
LIMIT :limit
