-- The dependents of step $1 that still wait for it (blocked, their edge
-- to it unmet), locked in id order — as every release takes them, so the
-- two cannot deadlock — before its children are added to them
-- (child_edges.sql, which runs after this on a fresh snapshot). A release
-- by another of their dependencies waits for this transaction, and then
-- counts from the row it committed.
SELECT j.id FROM __SCHEMA__.errand_jobs j
WHERE j.id IN (
    SELECT e.job_id FROM __SCHEMA__.errand_dependencies e
    WHERE e.depends_on = $1::text AND NOT e.met
)
  AND j.state = 'blocked'
ORDER BY j.id FOR UPDATE
