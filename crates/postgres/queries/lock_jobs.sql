-- Locks the jobs in $1 in id order (no deadlock with another action) for
-- the rest of the transaction: the action's statement after it then reads
-- every edge that an enqueue committed into them (an enqueue naming a job
-- as a dependency locks its row too), and no enqueue can add one until
-- the action commits.
SELECT j.id FROM __SCHEMA__.errand_jobs j
WHERE j.id = ANY($1::text[]) ORDER BY j.id FOR UPDATE
