-- The edge table's job ids take the collation of every other job id
-- ("C", the errand_job_id domain). Compared with a job's id, a column in
-- the database's default collation is compared under "C", and an index
-- built under another collation cannot serve that comparison: a
-- settlement's lookup of the edges out of the job it ended scanned the
-- whole table instead of using errand_dependencies_unmet.
ALTER TABLE __SCHEMA__.errand_dependencies
    ALTER COLUMN job_id TYPE text COLLATE "C",
    ALTER COLUMN depends_on TYPE text COLLATE "C";
