-- The raw SQL floor: the least a SKIP LOCKED queue can do per job. One
-- narrow table with a bigint key and one partial index for the claim.
DROP TABLE IF EXISTS floor_jobs;
CREATE TABLE floor_jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue        text        NOT NULL DEFAULT 'default',
    state        text        NOT NULL DEFAULT 'available',
    priority     smallint    NOT NULL DEFAULT 0,
    run_at       timestamptz NOT NULL DEFAULT now(),
    attempt      integer     NOT NULL DEFAULT 0,
    started_at   timestamptz,
    finished_at  timestamptz,
    payload      jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX floor_jobs_due ON floor_jobs (queue, priority, run_at, id) WHERE state = 'available';
