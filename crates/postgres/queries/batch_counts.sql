-- How many jobs of the batch $1 are in each state.
SELECT state, count(*) FROM __SCHEMA__.errand_jobs
WHERE batch = $1::text
GROUP BY state
