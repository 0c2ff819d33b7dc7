-- The step's waiting dependents (:dependents, a JSON array) wait for :n
-- more jobs: the children child_edges.sql linked them to.
UPDATE errand_jobs
SET waiting_on = waiting_on + :n, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:dependents)) AND state = 'blocked'
