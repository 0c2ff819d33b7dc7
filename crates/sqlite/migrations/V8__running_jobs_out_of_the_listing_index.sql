-- Running jobs leave the listing index. Every claim took a job out of the
-- entry for `ready` and put it under `running`, and every acknowledgment
-- moved it again to `done`: two B-tree changes per transition on the
-- single writer's path. With running jobs outside the index a claim only
-- removes an entry and an acknowledgment only adds one. Running jobs are
-- at most the workers' slots and are listed through errand_jobs_leases,
-- which holds exactly them.
--
-- SQLite uses a partial index only when a query's WHERE clause contains
-- the index's condition as written, so every query that reads this index
-- says `state <> 'running'` (list.sql, prune.sql).
DROP INDEX errand_jobs_state;
CREATE INDEX errand_jobs_state ON errand_jobs (state, created_at, id)
    WHERE state <> 'running';
