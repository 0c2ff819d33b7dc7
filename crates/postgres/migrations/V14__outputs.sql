-- A job's output: what its handler recorded when it succeeded (JSON, at
-- most 64 KiB, checked before it is written), read by its dependents.
ALTER TABLE __SCHEMA__.errand_jobs
    ADD COLUMN output jsonb CHECK (output IS NULL OR state = 'done');
