-- The batch $1 and how many jobs it holds.
SELECT b.created_at, b.sealed_at, b.on_success, b.on_finish,
       (SELECT count(*) FROM __SCHEMA__.errand_jobs j WHERE j.batch = $1::text) AS total
FROM __SCHEMA__.errand_batches b
WHERE b.id = $1::text
