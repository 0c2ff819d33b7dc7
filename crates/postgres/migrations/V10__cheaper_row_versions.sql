-- Cheaper row versions on the hot path.
--
-- A job's row is written three times in its life (enqueued, claimed,
-- settled), and neither the claim nor the settlement can be a HOT update:
-- the state they change is in the partial indexes' predicates. So every
-- version pays for every CHECK constraint of the table and for an entry in
-- each index whose predicate it satisfies. This migration makes both
-- cheaper without weakening what the schema guarantees.
--
-- 1. The name rules move from a table CHECK into domains. A table CHECK is
--    evaluated on every version of the row, so the three regular
--    expressions ran again at each claim and each settlement although the
--    names never change after the insert; a domain's check runs only when
--    a value is stored into the column. The trace-context rule moves the
--    same way. The rules themselves are unchanged.
-- 2. Ids, names and tokens compare bytewise (collation "C"): they are
--    opaque identifiers, and comparing them by the database's locale cost
--    a locale-aware comparison at each step of every index descent. Every
--    column compared with them takes the same collation, so joins keep
--    using the indexes. Names and ids are ASCII, so their order is the one
--    SQLite uses; only ids outside ASCII could sort differently.
-- 3. The listing index leaves running jobs out. A job passes through
--    `running` once per attempt, and each pass wrote an entry that was dead
--    by the settlement. Running jobs are few (at most the workers' slots)
--    and already indexed by their lease (errand_jobs_leases), which the
--    listing reads and sorts.

CREATE DOMAIN __SCHEMA__.errand_name AS text COLLATE "C"
    CHECK (length(VALUE) <= 100 AND VALUE ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$');

CREATE DOMAIN __SCHEMA__.errand_job_id AS text COLLATE "C"
    CHECK (length(VALUE) BETWEEN 1 AND 200 AND VALUE ~ '^[A-Za-z0-9_.:@/+=-]+$');

CREATE DOMAIN __SCHEMA__.errand_traceparent AS text COLLATE "C"
    CHECK (VALUE ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');

-- The history's foreign key is made again once both sides have changed.
ALTER TABLE __SCHEMA__.errand_attempts DROP CONSTRAINT errand_attempts_job_id_fkey;

ALTER TABLE __SCHEMA__.errand_jobs
    DROP CONSTRAINT errand_jobs_names,
    DROP CONSTRAINT errand_jobs_id_check,
    DROP CONSTRAINT errand_jobs_traceparent_check,
    ALTER COLUMN id TYPE __SCHEMA__.errand_job_id,
    ALTER COLUMN queue TYPE __SCHEMA__.errand_name,
    ALTER COLUMN kind TYPE __SCHEMA__.errand_name,
    ALTER COLUMN traceparent TYPE __SCHEMA__.errand_traceparent,
    ALTER COLUMN lease_token TYPE text COLLATE "C",
    ALTER COLUMN key_name TYPE text COLLATE "C";

ALTER TABLE __SCHEMA__.errand_attempts
    ALTER COLUMN job_id TYPE text COLLATE "C",
    ADD CONSTRAINT errand_attempts_job_id_fkey FOREIGN KEY (job_id)
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE;

ALTER TABLE __SCHEMA__.errand_audit
    ALTER COLUMN job_id TYPE text COLLATE "C",
    ALTER COLUMN copy_id TYPE text COLLATE "C",
    ALTER COLUMN queue TYPE text COLLATE "C";

ALTER TABLE __SCHEMA__.errand_paused_queues
    ALTER COLUMN queue TYPE text COLLATE "C";

DROP INDEX __SCHEMA__.errand_jobs_state;
CREATE INDEX errand_jobs_state ON __SCHEMA__.errand_jobs (state, created_at, id)
    WHERE state <> 'running';
