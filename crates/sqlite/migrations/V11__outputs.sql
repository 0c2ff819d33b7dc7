-- A job's output: what its handler recorded when it succeeded (JSON text,
-- at most 64 KiB, checked before it is written), read by its dependents.
ALTER TABLE errand_jobs ADD COLUMN output TEXT CHECK (output IS NULL OR state = 'done');
