-- Errand's job table and its history, for PostgreSQL.
-- __SCHEMA__ is replaced by the configured schema name (quoted).

CREATE TABLE __SCHEMA__.errand_jobs (
    id               text        NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    queue            text        NOT NULL,
    kind             text        NOT NULL,
    state            text        NOT NULL
        CHECK (state IN ('ready', 'running', 'done', 'dead', 'cancelled')),
    payload          jsonb       NOT NULL,
    priority         smallint    NOT NULL DEFAULT 0,
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    replays          integer     NOT NULL DEFAULT 0 CHECK (replays >= 0),
    -- Leases that expired without the attempt being settled, and the budget
    -- after which the job is quarantined as dead (class lost_lease).
    lease_expiries     integer   NOT NULL DEFAULT 0,
    max_lease_expiries integer   NOT NULL DEFAULT 5 CHECK (max_lease_expiries BETWEEN 1 AND 1000),
    -- The elapsed-time budget: no retry is scheduled past this time.
    give_up_at       timestamptz,
    available_at     timestamptz NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    lease_token      text,
    lease_until      timestamptz,
    last_error       text,
    last_error_class text
        CHECK (last_error_class IN ('retryable', 'permanent', 'timeout', 'lease_expired', 'lost_lease', 'cancelled')),
    finished_at      timestamptz,
    -- Attempts never exceed the budget.
    CHECK (attempts BETWEEN 0 AND max_attempts),
    CHECK (lease_expiries BETWEEN 0 AND max_lease_expiries),
    -- A running job always has a lease; no other state has one.
    CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_until IS NOT NULL)),
    -- Finished states carry the time they finished; live ones do not.
    CHECK ((state IN ('done', 'dead', 'cancelled')) = (finished_at IS NOT NULL))
);

-- The due set, per queue and across queues: partial, so finished and
-- running rows never enter it and the claim cost stays flat as they pile up.
CREATE INDEX errand_jobs_due
    ON __SCHEMA__.errand_jobs (priority DESC, available_at, id)
    WHERE state = 'ready';

CREATE INDEX errand_jobs_due_by_queue
    ON __SCHEMA__.errand_jobs (queue, priority DESC, available_at, id)
    WHERE state = 'ready';

-- Live leases, for reclaiming expired ones and for the sweep.
CREATE INDEX errand_jobs_leases
    ON __SCHEMA__.errand_jobs (lease_until, id)
    WHERE state = 'running';

-- Operator listings by state.
CREATE INDEX errand_jobs_state ON __SCHEMA__.errand_jobs (state, created_at, id);

-- A hot, frequently updated table: vacuum it early.
ALTER TABLE __SCHEMA__.errand_jobs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02,
    fillfactor = 80
);

CREATE TABLE __SCHEMA__.errand_attempts (
    seq          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id       text        NOT NULL REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    cycle        integer     NOT NULL,
    attempt      integer     NOT NULL CHECK (attempt >= 1),
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    outcome      text CHECK (outcome IN
        ('succeeded', 'retry', 'dead', 'snoozed', 'cancelled', 'released', 'lease_expired')),
    error        text,
    error_class  text
);

CREATE INDEX errand_attempts_job ON __SCHEMA__.errand_attempts (job_id, seq);
CREATE INDEX errand_attempts_open ON __SCHEMA__.errand_attempts (job_id) WHERE finished_at IS NULL;

CREATE TABLE __SCHEMA__.errand_audit (
    seq      bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   text        NOT NULL,
    action   text        NOT NULL CHECK (action IN ('replay', 'cancel')),
    operator text        NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason   text,
    at       timestamptz NOT NULL
);

CREATE INDEX errand_audit_job ON __SCHEMA__.errand_audit (job_id, seq);

-- Token buckets for rate limits shared by every worker host.
CREATE TABLE __SCHEMA__.errand_rate_limits (
    name         text        NOT NULL PRIMARY KEY,
    tokens       double precision NOT NULL CHECK (tokens >= 0),
    last_granted integer     NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL
);
