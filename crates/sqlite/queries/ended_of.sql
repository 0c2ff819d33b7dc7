-- Of the jobs waited for (?1, a JSON array of ids), those that have ended
-- (done, dead or cancelled) or are gone (purged, pruned): their waiters
-- read them again. One primary-key look-up per id.
SELECT w.value
FROM json_each(?1) AS w
WHERE NOT EXISTS (
    SELECT 1 FROM errand_jobs j
    WHERE j.id = w.value AND j.state NOT IN ('done', 'dead', 'cancelled')
)
