-- Concurrency keys: jobs of one queue sharing a key share its limit
-- (`key_limit` running at once) and, when `key_ordered`, run one at a time
-- in enqueue order (`seq`).

ALTER TABLE __SCHEMA__.errand_jobs
    ADD COLUMN key_name text CHECK (length(key_name) BETWEEN 1 AND 200),
    ADD COLUMN key_limit integer CHECK (key_limit BETWEEN 1 AND 10000),
    ADD COLUMN key_ordered boolean NOT NULL DEFAULT false,
    ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY,
    -- A key always has a limit, and only a keyed job has one.
    ADD CONSTRAINT errand_jobs_key_has_limit CHECK ((key_limit IS NULL) = (key_name IS NULL)),
    -- An ordered key runs one job at a time.
    ADD CONSTRAINT errand_jobs_ordered_key_runs_one CHECK (NOT key_ordered OR key_limit = 1);

-- The plain due set leaves keyed jobs out: claims reach those through their
-- keys (below), so a saturated key's backlog is never scanned row by row.
DROP INDEX __SCHEMA__.errand_jobs_due;
DROP INDEX __SCHEMA__.errand_jobs_due_by_queue;

CREATE INDEX errand_jobs_due
    ON __SCHEMA__.errand_jobs (priority DESC, available_at, id)
    WHERE state = 'ready' AND key_name IS NULL;

CREATE INDEX errand_jobs_due_by_queue
    ON __SCHEMA__.errand_jobs (queue, priority DESC, available_at, id)
    WHERE state = 'ready' AND key_name IS NULL;

-- Keys with due jobs.
CREATE INDEX errand_jobs_keyed_due
    ON __SCHEMA__.errand_jobs (available_at) INCLUDE (queue, key_name, priority)
    WHERE state = 'ready' AND key_name IS NOT NULL;

-- A key's live jobs in enqueue order: its running count, its first ready jobs.
CREATE INDEX errand_jobs_keys
    ON __SCHEMA__.errand_jobs (queue, key_name, state, seq)
    WHERE key_name IS NOT NULL AND state IN ('ready', 'running');
