-- The children (:children, a JSON array) a step (:step) added as it
-- completed: marked as added by it and, when :linked (the step's waiting
-- dependents now wait for them), as having dependents, so their
-- settlements release them.
UPDATE errand_jobs
SET added_by = :step, has_dependents = (has_dependents OR :linked)
WHERE id IN (SELECT value FROM json_each(:children))
