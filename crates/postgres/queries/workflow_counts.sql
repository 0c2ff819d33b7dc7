-- How many steps of the workflow $1 are in each state (its steps found
-- through errand_workflow_steps, each job read by key).
SELECT j.state, count(*) FROM __SCHEMA__.errand_workflow_steps s
JOIN __SCHEMA__.errand_jobs j ON j.id = s.job_id
WHERE s.workflow = $1::text
GROUP BY j.state
