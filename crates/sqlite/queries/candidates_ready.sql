-- Due ready jobs in every queue, highest priority first, then oldest due.
SELECT id FROM errand_jobs INDEXED BY errand_jobs_due
WHERE state = 'ready'
  AND available_at <= :now
ORDER BY priority DESC, available_at, id
LIMIT :limit
