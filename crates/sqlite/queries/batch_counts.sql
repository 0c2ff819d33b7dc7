-- How many jobs of the batch :id are in each state.
SELECT state, count(*) FROM errand_jobs INDEXED BY errand_jobs_batch
WHERE batch = :id
GROUP BY state
