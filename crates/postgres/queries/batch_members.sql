-- The jobs of the batch $1, oldest first, locked against deletion (FOR
-- KEY SHARE, in id order) for the rest of the seal's transaction: a job
-- purged or pruned before this read is not listed, and one this read
-- lists cannot go before the callbacks that depend on it are stored (a
-- purge that waited for it then finds them waiting and refuses; a prune
-- skips it). The lock does not hold back the jobs' own settlements and
-- renewals, which change no key.
WITH members AS (
    SELECT id, created_at FROM __SCHEMA__.errand_jobs
    WHERE batch = $1::text
    ORDER BY id FOR KEY SHARE
)
SELECT id FROM members
ORDER BY created_at, id
