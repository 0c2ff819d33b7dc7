-- Workflows, tags and metadata: what a job carries to be found and read by
-- people. None of them changes how it runs.
--
-- `workflow` is the id of the graph of jobs a step was enqueued with;
-- `tags` a JSON array of short labels, `meta` a JSON object of short text
-- values (both NULL when there are none).
ALTER TABLE __SCHEMA__.errand_jobs
    ADD COLUMN workflow text COLLATE "C"
        CHECK (workflow IS NULL OR length(workflow) BETWEEN 1 AND 200),
    ADD COLUMN tags jsonb CHECK (tags IS NULL OR jsonb_typeof(tags) = 'array'),
    ADD COLUMN meta jsonb CHECK (meta IS NULL OR jsonb_typeof(meta) = 'object');

-- A workflow's steps, in the listing's order. No settlement changes these
-- columns, so row updates stay heap-only.
CREATE INDEX errand_jobs_workflow ON __SCHEMA__.errand_jobs (workflow, created_at, id)
    WHERE workflow IS NOT NULL;

-- One row per tag of a job, in the listing's order within a tag, so that
-- `jobs --tag T` reads only the jobs carrying it however large the table.
-- Rows go with their job (pruned or purged).
CREATE TABLE __SCHEMA__.errand_job_tags (
    tag        text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    job_id     text COLLATE "C" NOT NULL
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (tag, created_at, job_id)
);
CREATE INDEX errand_job_tags_job ON __SCHEMA__.errand_job_tags (job_id);
