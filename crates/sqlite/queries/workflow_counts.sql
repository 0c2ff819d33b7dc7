-- How many steps of the workflow :workflow are in each state.
SELECT state, count(*) FROM errand_jobs INDEXED BY errand_jobs_workflow
WHERE workflow = :workflow
GROUP BY state
