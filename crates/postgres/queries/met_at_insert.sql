-- Jobs just inserted blocked, some of whose dependencies were already
-- done: $1 the jobs, $2 how many each. Their counts drop by as many; a job
-- that waits for nothing more is ready (due as inserted).
UPDATE __SCHEMA__.errand_jobs j
SET waiting_on = j.waiting_on - m.n,
    state      = CASE WHEN j.waiting_on = m.n THEN 'ready' ELSE j.state END
FROM unnest($1::text[], $2::int4[]) AS m (id, n)
WHERE j.id = m.id AND j.state = 'blocked'
