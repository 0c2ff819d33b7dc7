-- How many steps of the workflow $1 are in each state.
SELECT state, count(*) FROM __SCHEMA__.errand_jobs
WHERE workflow = $1::text
GROUP BY state
