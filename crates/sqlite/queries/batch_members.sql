-- The jobs of the batch :id, oldest first.
SELECT id FROM errand_jobs INDEXED BY errand_jobs_batch
WHERE batch = :id
ORDER BY created_at, id
