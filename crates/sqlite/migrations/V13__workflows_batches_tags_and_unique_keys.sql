-- Workflows, tags and metadata: what a job carries to be found and read by
-- people. None of them changes how it runs. Unique keys: a unique or
-- debounced job records the key it is judged by. Batches: a job may
-- belong to one, whose callbacks are enqueued when it is sealed.
--
-- `workflow` is the id of the graph of jobs a step was enqueued with;
-- `tags` a JSON array of short labels, `meta` a JSON object of short text
-- values (both NULL when there are none). Columns come last: the store
-- reads a job by position.
ALTER TABLE errand_jobs ADD COLUMN workflow TEXT
    CHECK (workflow IS NULL OR length(workflow) BETWEEN 1 AND 200);
ALTER TABLE errand_jobs ADD COLUMN tags TEXT
    CHECK (tags IS NULL OR json_type(tags) = 'array');
ALTER TABLE errand_jobs ADD COLUMN meta TEXT
    CHECK (meta IS NULL OR json_type(meta) = 'object');
ALTER TABLE errand_jobs ADD COLUMN unique_key TEXT
    CHECK (unique_key IS NULL OR length(unique_key) BETWEEN 1 AND 300);

ALTER TABLE errand_jobs ADD COLUMN batch TEXT
    CHECK (batch IS NULL OR length(batch) BETWEEN 1 AND 200);

-- The jobs a unique enqueue compares itself with, newest first.
CREATE INDEX errand_jobs_unique ON errand_jobs (unique_key, created_at)
    WHERE unique_key IS NOT NULL;

-- A workflow's steps, in the listing's order.
CREATE INDEX errand_jobs_workflow ON errand_jobs (workflow, created_at, id)
    WHERE workflow IS NOT NULL;

-- One row per tag of a job, in the listing's order within a tag, so that
-- `jobs --tag T` reads only the jobs carrying it however large the table.
-- Rows go with their job (pruned or purged).
CREATE TABLE errand_job_tags (
    tag        TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    job_id     TEXT    NOT NULL REFERENCES errand_jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (tag, created_at, job_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX errand_job_tags_job ON errand_job_tags (job_id);

-- A batch: open until sealed; sealing it records the callbacks it
-- enqueued. Enqueues into a batch and its seal run in the single write
-- transaction, one after another.
CREATE TABLE errand_batches (
    id         TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    created_at INTEGER NOT NULL,
    sealed_at  INTEGER,
    on_success TEXT,
    on_finish  TEXT,
    CHECK (sealed_at IS NOT NULL OR (on_success IS NULL AND on_finish IS NULL))
) STRICT, WITHOUT ROWID;
-- A batch's jobs.
CREATE INDEX errand_jobs_batch ON errand_jobs (batch, created_at, id)
    WHERE batch IS NOT NULL;
