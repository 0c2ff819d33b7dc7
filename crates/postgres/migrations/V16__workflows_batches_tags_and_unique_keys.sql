-- Workflows, tags and metadata: what a job carries to be found and read by
-- people. None of them changes how it runs. Unique keys: a unique or
-- debounced job records the key it is judged by. Batches: a job may
-- belong to one, whose callbacks are enqueued when it is sealed.
--
-- `workflow` is the id of the graph of jobs a step was enqueued with;
-- `tags` a JSON array of short labels, `meta` a JSON object of short text
-- values (both NULL when there are none).
ALTER TABLE __SCHEMA__.errand_jobs
    ADD COLUMN workflow text COLLATE "C"
        CHECK (workflow IS NULL OR length(workflow) BETWEEN 1 AND 200),
    ADD COLUMN tags jsonb CHECK (tags IS NULL OR jsonb_typeof(tags) = 'array'),
    ADD COLUMN meta jsonb CHECK (meta IS NULL OR jsonb_typeof(meta) = 'object'),
    ADD COLUMN unique_key text COLLATE "C"
        CHECK (unique_key IS NULL OR length(unique_key) BETWEEN 1 AND 300),
    ADD COLUMN batch text COLLATE "C"
        CHECK (batch IS NULL OR length(batch) BETWEEN 1 AND 200);

-- The jobs a unique enqueue compares itself with, newest first. Enqueuers
-- of one key take a transaction-scoped advisory lock on it first, so two
-- of them never both find nothing.
CREATE INDEX errand_jobs_unique ON __SCHEMA__.errand_jobs (unique_key, created_at)
    WHERE unique_key IS NOT NULL;

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

-- A batch: open until sealed; sealing it records the callbacks it
-- enqueued. An enqueue into a batch and its seal each lock its row for
-- the rest of their transaction, so a job joins before the seal lists the
-- batch's jobs, or is refused after it.
CREATE TABLE __SCHEMA__.errand_batches (
    id         text COLLATE "C" PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL,
    sealed_at  timestamptz,
    on_success text COLLATE "C",
    on_finish  text COLLATE "C",
    CHECK (sealed_at IS NOT NULL OR (on_success IS NULL AND on_finish IS NULL))
);
-- A batch's jobs.
CREATE INDEX errand_jobs_batch ON __SCHEMA__.errand_jobs (batch, created_at, id)
    WHERE batch IS NOT NULL;
