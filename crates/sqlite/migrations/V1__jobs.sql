-- Errand's job table and its history, for SQLite.
-- Times are integer milliseconds since the Unix epoch (UTC).

CREATE TABLE errand_jobs (
    id               TEXT    NOT NULL PRIMARY KEY,
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state IN ('ready', 'running', 'done', 'dead', 'cancelled')),
    payload          TEXT    NOT NULL CHECK (json_valid(payload)),
    priority         INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -32768 AND 32767),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    replays          INTEGER NOT NULL DEFAULT 0 CHECK (replays >= 0),
    -- Leases that expired without the attempt being settled, and the budget
    -- after which the job is quarantined as dead (class lost_lease).
    lease_expiries     INTEGER NOT NULL DEFAULT 0,
    max_lease_expiries INTEGER NOT NULL DEFAULT 5 CHECK (max_lease_expiries BETWEEN 1 AND 1000),
    -- The elapsed-time budget: no retry is scheduled past this time.
    give_up_at       INTEGER,
    available_at     INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    lease_token      TEXT,
    lease_until      INTEGER,
    last_error       TEXT,
    last_error_class TEXT
        CHECK (last_error_class IN ('retryable', 'permanent', 'timeout', 'lease_expired', 'lost_lease', 'cancelled')),
    finished_at      INTEGER,
    -- Attempts never exceed the budget.
    CHECK (attempts BETWEEN 0 AND max_attempts),
    CHECK (lease_expiries BETWEEN 0 AND max_lease_expiries),
    -- A running job always has a lease; no other state has one.
    CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_until IS NOT NULL)),
    -- Finished states carry the time they finished; live ones do not.
    CHECK ((state IN ('done', 'dead', 'cancelled')) = (finished_at IS NOT NULL))
) STRICT;

-- The due set: ready jobs by priority and due time, across all queues and
-- per queue. Partial, so finished rows never enter it.
CREATE INDEX errand_jobs_due
    ON errand_jobs (priority DESC, available_at, id)
    WHERE state = 'ready';

CREATE INDEX errand_jobs_due_by_queue
    ON errand_jobs (queue, priority DESC, available_at, id)
    WHERE state = 'ready';

-- Live leases, for reclaiming expired ones and for the sweep.
CREATE INDEX errand_jobs_leases
    ON errand_jobs (lease_until, id)
    WHERE state = 'running';

-- Operator listings by state.
CREATE INDEX errand_jobs_state ON errand_jobs (state, created_at, id);

-- One row per attempt started (and per snooze or release, which give the
-- attempt back). `cycle` is the job's replay count when the attempt began.
CREATE TABLE errand_attempts (
    seq          INTEGER PRIMARY KEY,
    job_id       TEXT    NOT NULL REFERENCES errand_jobs (id) ON DELETE CASCADE,
    cycle        INTEGER NOT NULL,
    attempt      INTEGER NOT NULL CHECK (attempt >= 1),
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    outcome      TEXT CHECK (outcome IN
        ('succeeded', 'retry', 'dead', 'snoozed', 'cancelled', 'released', 'lease_expired')),
    error        TEXT,
    error_class  TEXT
) STRICT;

CREATE INDEX errand_attempts_job ON errand_attempts (job_id, seq);

-- Every operator action.
CREATE TABLE errand_audit (
    seq      INTEGER PRIMARY KEY,
    job_id   TEXT    NOT NULL,
    action   TEXT    NOT NULL CHECK (action IN ('replay', 'cancel')),
    operator TEXT    NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason   TEXT,
    at       INTEGER NOT NULL
) STRICT;

CREATE INDEX errand_audit_job ON errand_audit (job_id, seq);

-- Token buckets for rate limits shared by every process using the file.
CREATE TABLE errand_rate_limits (
    name         TEXT    NOT NULL PRIMARY KEY,
    tokens       REAL    NOT NULL CHECK (tokens >= 0),
    last_granted INTEGER NOT NULL DEFAULT 0,
    updated_at   INTEGER NOT NULL
) STRICT;
