-- Jobs may depend on other jobs.
--
-- A job with dependencies is inserted `blocked`, a new state, and counts
-- the dependencies it still waits for (`waiting_on`); errand_dependencies
-- holds one row per edge and whether it is met. Whatever ends a dependency
-- releases its dependents in the same transaction: a met edge lowers the
-- count, and the job whose count reaches zero becomes `ready`.
ALTER TABLE __SCHEMA__.errand_jobs
    DROP CONSTRAINT errand_jobs_state_check,
    ADD CONSTRAINT errand_jobs_state_check
        CHECK (state IN ('blocked', 'ready', 'running', 'done', 'dead', 'cancelled')),
    -- Dependencies not yet met.
    ADD COLUMN waiting_on integer NOT NULL DEFAULT 0 CHECK (waiting_on >= 0),
    -- What the job does when a dependency ends dead or cancelled; set
    -- exactly when it has dependencies.
    ADD COLUMN on_dependency_failure text
        CHECK (on_dependency_failure IN ('wait', 'cancel', 'run')),
    -- Whether some job depends on this one: a settlement releases
    -- dependents only of a job that has them, and an enqueue that names a
    -- job as a dependency sets it under the job's row lock, so a
    -- settlement waiting for that lock sees it when it re-reads the row.
    ADD COLUMN has_dependents boolean NOT NULL DEFAULT false,
    -- A blocked job waits for something; a job that may run waits for nothing.
    ADD CONSTRAINT errand_jobs_blocked_waits CHECK (state <> 'blocked' OR waiting_on > 0),
    ADD CONSTRAINT errand_jobs_runnable_waits_for_nothing
        CHECK (state NOT IN ('ready', 'running', 'done', 'dead') OR waiting_on = 0),
    ADD CONSTRAINT errand_jobs_waiting_has_policy
        CHECK (waiting_on = 0 OR on_dependency_failure IS NOT NULL);

-- One row per dependency: `job_id` waits for `depends_on`. The dependency
-- is not a foreign key: a finished dependency may be purged or pruned
-- while its met edges stay with the dependent.
CREATE TABLE __SCHEMA__.errand_dependencies (
    job_id     text    NOT NULL REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    depends_on text    NOT NULL,
    -- The order the dependencies were named in.
    position   integer NOT NULL,
    met        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, depends_on),
    CHECK (job_id <> depends_on)
);

-- A settlement finds the unmet edges out of the job it ends (a small
-- index: met edges leave it); the detail page, every edge of a job.
CREATE INDEX errand_dependencies_unmet ON __SCHEMA__.errand_dependencies (depends_on)
    WHERE NOT met;
CREATE INDEX errand_dependencies_of ON __SCHEMA__.errand_dependencies (depends_on, job_id);

-- The statistics count blocked jobs per queue.
CREATE INDEX errand_jobs_blocked_by_queue ON __SCHEMA__.errand_jobs (queue)
    WHERE state = 'blocked';
