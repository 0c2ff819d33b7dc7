-- A key's earliest-enqueued ready jobs that may take its free slots: the
-- due ones for a concurrency limit; for an ordered key the first ready job
-- whatever its due time (a job waiting for its retry blocks those behind it).
SELECT id, available_at FROM errand_jobs INDEXED BY errand_jobs_keys
WHERE queue = :queue AND key_name = :key AND state = 'ready'
  AND (:ordered OR available_at <= :now)
ORDER BY rowid
LIMIT :slots
