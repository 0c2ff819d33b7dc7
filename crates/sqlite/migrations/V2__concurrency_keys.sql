-- Concurrency keys: jobs of one queue sharing a key share its limit
-- (`key_limit` running at once) and, when `key_ordered`, run one at a time
-- in enqueue order (the rowid, which only grows while rows exist).

ALTER TABLE errand_jobs ADD COLUMN key_name TEXT
    CHECK (length(key_name) BETWEEN 1 AND 200);

-- A key always has a limit, and only a keyed job has one.
ALTER TABLE errand_jobs ADD COLUMN key_limit INTEGER
    CHECK ((key_limit IS NULL) = (key_name IS NULL))
    CHECK (key_limit BETWEEN 1 AND 10000);

-- An ordered key runs one job at a time.
ALTER TABLE errand_jobs ADD COLUMN key_ordered INTEGER NOT NULL DEFAULT 0
    CHECK (key_ordered IN (0, 1))
    CHECK (key_ordered = 0 OR key_limit = 1);

-- Keyed jobs by key and state, in enqueue order: counts a key's running
-- jobs and finds its earliest ready ones without touching other keys'.
-- (Partial on the key alone: SQLite proves `key_name = x` implies it, but
-- not `state = 'running'` implies an IN list.)
CREATE INDEX errand_jobs_keys
    ON errand_jobs (queue, key_name, state)
    WHERE key_name IS NOT NULL;
