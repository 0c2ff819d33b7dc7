-- The jobs of the batch $1, oldest first.
SELECT id FROM __SCHEMA__.errand_jobs
WHERE batch = $1::text
ORDER BY created_at, id
