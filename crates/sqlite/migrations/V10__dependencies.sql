-- Jobs may depend on other jobs.
--
-- A job with dependencies is inserted `blocked`, a new state, and counts
-- the dependencies it still waits for (`waiting_on`); `errand_dependencies`
-- holds one row per edge and whether it is met. Whatever ends a dependency
-- releases its dependents in the same transaction: a met edge lowers the
-- count, and the job whose count reaches zero becomes `ready`.
--
-- SQLite cannot change a CHECK, so errand_jobs is rebuilt with the new
-- state. errand_attempts refers to it and would lose its rows to the
-- cascade when the old table is dropped, so its rows wait in a plain copy
-- and the table is made again. Columns keep their order (the store reads
-- a job by position); the new ones come last.

CREATE TABLE errand_attempts_keep AS SELECT * FROM errand_attempts;
DROP TABLE errand_attempts;

CREATE TABLE errand_jobs_v10 (
    id               TEXT    NOT NULL PRIMARY KEY,
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (state IN ('blocked', 'ready', 'running', 'done', 'dead', 'cancelled')),
    payload          TEXT    NOT NULL CHECK (json_valid(payload)),
    priority         INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -32768 AND 32767),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    replays          INTEGER NOT NULL DEFAULT 0 CHECK (replays >= 0),
    lease_expiries     INTEGER NOT NULL DEFAULT 0,
    max_lease_expiries INTEGER NOT NULL DEFAULT 5 CHECK (max_lease_expiries BETWEEN 1 AND 1000),
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
    key_name         TEXT
        CHECK (length(key_name) BETWEEN 1 AND 200),
    key_limit        INTEGER
        CHECK ((key_limit IS NULL) = (key_name IS NULL))
        CHECK (key_limit BETWEEN 1 AND 10000),
    key_ordered      INTEGER NOT NULL DEFAULT 0
        CHECK (key_ordered IN (0, 1))
        CHECK (key_ordered = 0 OR key_limit = 1),
    attempt_started_at INTEGER,
    deadline         INTEGER,
    traceparent      TEXT
        CHECK (traceparent IS NULL OR (length(traceparent) = 55
            AND traceparent GLOB '00-[0-9a-f]*-[0-9a-f]*-[0-9a-f][0-9a-f]')),
    -- Dependencies not yet met.
    waiting_on       INTEGER NOT NULL DEFAULT 0 CHECK (waiting_on >= 0),
    -- What the job does when a dependency ends dead or cancelled; set
    -- exactly when it has dependencies.
    on_dependency_failure TEXT
        CHECK (on_dependency_failure IN ('wait', 'cancel', 'run')),
    -- Whether some job depends on this one: the settlements release
    -- dependents only of jobs that have them.
    has_dependents   INTEGER NOT NULL DEFAULT 0 CHECK (has_dependents IN (0, 1)),
    CHECK (attempts BETWEEN 0 AND max_attempts),
    CHECK (lease_expiries BETWEEN 0 AND max_lease_expiries),
    CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK ((state IN ('done', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
    -- A blocked job waits for something; a job that may run waits for nothing.
    CHECK (state <> 'blocked' OR waiting_on > 0),
    CHECK (state NOT IN ('ready', 'running', 'done', 'dead') OR waiting_on = 0),
    CHECK (waiting_on = 0 OR on_dependency_failure IS NOT NULL)
) STRICT;

INSERT INTO errand_jobs_v10
    (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
     lease_expiries, max_lease_expiries, give_up_at, available_at, created_at, updated_at,
     lease_token, lease_until, last_error, last_error_class, finished_at,
     key_name, key_limit, key_ordered, attempt_started_at, deadline, traceparent)
SELECT id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
       lease_expiries, max_lease_expiries, give_up_at, available_at, created_at, updated_at,
       lease_token, lease_until, last_error, last_error_class, finished_at,
       key_name, key_limit, key_ordered, attempt_started_at, deadline, traceparent
FROM errand_jobs;

DROP TABLE errand_jobs;
ALTER TABLE errand_jobs_v10 RENAME TO errand_jobs;

CREATE INDEX errand_jobs_due
    ON errand_jobs (priority DESC, available_at, id)
    WHERE state = 'ready';
CREATE INDEX errand_jobs_due_by_queue
    ON errand_jobs (queue, priority DESC, available_at, id)
    WHERE state = 'ready';
CREATE INDEX errand_jobs_leases
    ON errand_jobs (lease_until, id)
    WHERE state = 'running';
CREATE INDEX errand_jobs_state ON errand_jobs (state, created_at, id)
    WHERE state <> 'running';
CREATE INDEX errand_jobs_keys
    ON errand_jobs (queue, key_name, state)
    WHERE key_name IS NOT NULL;
CREATE INDEX errand_jobs_dead_by_queue
    ON errand_jobs (queue, finished_at)
    WHERE state = 'dead';

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

INSERT INTO errand_attempts
    (seq, job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class)
SELECT seq, job_id, cycle, attempt, started_at, finished_at, outcome, error, error_class
FROM errand_attempts_keep;
DROP TABLE errand_attempts_keep;

CREATE INDEX errand_attempts_job ON errand_attempts (job_id, seq);
CREATE INDEX errand_attempts_finished ON errand_attempts (finished_at)
    WHERE finished_at IS NOT NULL;

-- One row per dependency: `job_id` waits for `depends_on`. The dependency
-- is not a foreign key: a finished dependency may be purged or pruned
-- while its met edges stay with the dependent.
CREATE TABLE errand_dependencies (
    job_id     TEXT    NOT NULL REFERENCES errand_jobs (id) ON DELETE CASCADE,
    depends_on TEXT    NOT NULL,
    -- The order the dependencies were named in.
    position   INTEGER NOT NULL,
    met        INTEGER NOT NULL DEFAULT 0 CHECK (met IN (0, 1)),
    PRIMARY KEY (job_id, depends_on),
    CHECK (job_id <> depends_on)
) STRICT, WITHOUT ROWID;

-- The statistics count blocked jobs per queue.
CREATE INDEX errand_jobs_blocked_by_queue ON errand_jobs (queue)
    WHERE state = 'blocked';

-- A settlement finds the dependents of the job it ends.
CREATE INDEX errand_dependencies_of ON errand_dependencies (depends_on, job_id);
