-- The listing index orders jobs created at the same instant by their place
-- in the table (rowid, which every SQLite index carries as its last key
-- column) instead of by id.
--
-- Jobs enqueued together share a creation time. Their ids follow the order
-- a caller generated them in, and for a workflow that is chain by chain,
-- while the steps that run together (every chain's first step, then every
-- second step) are stored side by side (the bulk insert writes jobs that
-- depend on each other depth by depth). Keyed by id, a wave's entries moved
-- from `blocked` to `ready` and on to `done` at positions ten apart, and
-- each commit rewrote about one index page per step; keyed by rowid they
-- move in runs, as a plain drain's do. The listing (list.sql) pages by
-- (created_at, rowid) to match.
DROP INDEX errand_jobs_state;
CREATE INDEX errand_jobs_state ON errand_jobs (state, created_at)
    WHERE state <> 'running';
