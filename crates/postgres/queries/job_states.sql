-- The state of each job in $1 that is stored: the check that a child added
-- at run time depends on no blocked job.
SELECT j.id, j.state FROM __SCHEMA__.errand_jobs j WHERE j.id = ANY ($1::text[])
