-- A workflow's steps move from an index on errand_jobs to a table of their
-- own, written once when a step is enqueued.
--
-- Every state change rewrites a job's row, and since `state` is indexed
-- the new row version is never heap-only: PostgreSQL adds an entry for it
-- to every index whose condition the row meets. A partial index on
-- `workflow` therefore took one more entry on each release, claim and
-- acknowledgment of every step (measured: a 100,000-job workflow drained
-- about 15% slower with it; docs/performance.md). Rows here go with their
-- job (pruned or purged), as tags do.
CREATE TABLE __SCHEMA__.errand_workflow_steps (
    workflow   text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    job_id     text COLLATE "C" NOT NULL
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (workflow, created_at, job_id)
);
CREATE INDEX errand_workflow_steps_job ON __SCHEMA__.errand_workflow_steps (job_id);

INSERT INTO __SCHEMA__.errand_workflow_steps (workflow, created_at, job_id)
SELECT workflow, created_at, id FROM __SCHEMA__.errand_jobs
WHERE workflow IS NOT NULL;

DROP INDEX __SCHEMA__.errand_jobs_workflow;
