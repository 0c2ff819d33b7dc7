-- Locks (FOR SHARE, in id order) the dependencies that the jobs in $1 have
-- not met, before a replay of those jobs: none of them can end, nor be
-- purged, until the replay commits, and the replay's statement after this
-- one reads each as it is. A dependency is locked before its dependents,
-- as a settlement takes them, so the two cannot deadlock. A dependency
-- replayed by the same action is left to the replay's own lock (FOR
-- UPDATE): shared here, two replays of it would each wait for the other.
SELECT j.id FROM __SCHEMA__.errand_jobs j
WHERE j.id IN (
    SELECT e.depends_on FROM __SCHEMA__.errand_dependencies e
    WHERE e.job_id = ANY($1::text[]) AND NOT e.met
)
  AND j.id <> ALL ($1::text[])
ORDER BY j.id FOR SHARE
