-- The dependents of step :step that still wait for it (blocked, their
-- edge to it unmet), in id order: they wait for its children too.
SELECT j.id FROM errand_jobs j
WHERE j.id IN (
    SELECT e.job_id FROM errand_dependencies e
    WHERE e.depends_on = :step AND e.met = 0
)
  AND j.state = 'blocked'
ORDER BY j.id
