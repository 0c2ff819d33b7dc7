-- d5: the claim and the acknowledgment as heap-only updates of the job's
-- row. No index of errand_jobs names a column they change: the due order
-- and the leases live in a narrow table `due` of their own (one row per
-- ready or running job, keyed by the job's bigint `seq`), and the job's
-- state is in no index. (The foreign keys onto errand_jobs go with its
-- primary key: a small advantage to this design.)
DROP INDEX d5.errand_jobs_due, d5.errand_jobs_due_by_queue, d5.errand_jobs_keyed_due,
    d5.errand_jobs_keys, d5.errand_jobs_leases, d5.errand_jobs_state,
    d5.errand_jobs_dead_by_queue, d5.errand_jobs_blocked_by_queue;
ALTER TABLE d5.errand_jobs DROP CONSTRAINT errand_jobs_pkey CASCADE;
ALTER TABLE d5.errand_jobs ADD PRIMARY KEY (seq);
CREATE UNIQUE INDEX errand_jobs_id ON d5.errand_jobs (id);
CREATE INDEX errand_jobs_listing ON d5.errand_jobs (created_at, seq);
CREATE TABLE d5.due (
    seq          bigint PRIMARY KEY,
    queue        text COLLATE "C" NOT NULL,
    priority     smallint NOT NULL,
    available_at timestamptz NOT NULL,
    lease_until  timestamptz
) WITH (fillfactor = 80);
CREATE INDEX due_ready ON d5.due (priority DESC, available_at, seq) WHERE lease_until IS NULL;
CREATE INDEX due_leases ON d5.due (lease_until) WHERE lease_until IS NOT NULL;
-- Room in each page for the claim's and the acknowledgment's versions of
-- its rows: a heap-only update needs space on the row's own page.
ALTER TABLE d5.errand_jobs SET (fillfactor = 40);
