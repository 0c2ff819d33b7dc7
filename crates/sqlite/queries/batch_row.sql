-- The batch :id and how many jobs it holds.
SELECT id, created_at, sealed_at, on_success, on_finish,
       (SELECT count(*) FROM errand_jobs INDEXED BY errand_jobs_batch WHERE batch = :id)
FROM errand_batches
WHERE id = :id
