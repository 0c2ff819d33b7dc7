-- The jobs in :ids (a JSON array) now have dependents: their settlements
-- release them.
UPDATE errand_jobs SET has_dependents = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND has_dependents = 0
