-- Jobs just inserted blocked, some of whose dependencies were already
-- done: :met is a JSON array of [job, how many]. Their counts drop by as
-- many; a job that waits for nothing more is ready (due as inserted).
UPDATE errand_jobs AS j
SET waiting_on = j.waiting_on - m.n,
    state      = CASE WHEN j.waiting_on = m.n THEN 'ready' ELSE j.state END
FROM (SELECT value ->> 0 AS id, value ->> 1 AS n FROM json_each(:met)) AS m
WHERE j.id = m.id AND +j.state = 'blocked'
