-- Payloads and outputs are stored as the text they were given (json), not
-- rebuilt (jsonb): jsonb keeps numbers as numeric and writes them back in
-- full digits, so a payload of `1e308`s within the size limit read back
-- about fifty times larger, into every answer, worker and input file. The
-- size limits are checked on the text, and now hold for what is read.
-- Nothing reads these columns by path. Rewrites errand_jobs once.
ALTER TABLE __SCHEMA__.errand_jobs
    ALTER COLUMN payload TYPE json USING payload::json,
    ALTER COLUMN output TYPE json USING output::json;
