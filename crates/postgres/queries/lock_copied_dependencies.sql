-- Locks (FOR UPDATE, in id order) the jobs that the originals in $1
-- depend on, before a copy locks the originals (copy_check.sql): the
-- copies will depend on them, and the insert locks them for update anyway.
-- Taken first, they are locked in the order a replay or a settlement takes
-- them — a dependency before its dependents — so none of those can
-- deadlock with the copy.
SELECT j.id FROM __SCHEMA__.errand_jobs j
WHERE j.id IN (
    SELECT e.depends_on FROM __SCHEMA__.errand_dependencies e
    WHERE e.job_id = ANY($1::text[])
)
  AND j.id <> ALL ($1::text[])
ORDER BY j.id FOR UPDATE
