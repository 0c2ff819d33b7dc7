-- Errand's schema for SQLite, version 1: the baseline of release 0.1.
--
-- Times are integer milliseconds since the Unix epoch (UTC). Every table is
-- STRICT. docs/sqlite.md lists each index with the statements that read it.
--
-- Names that grow with the product (job states, operator actions, failure
-- classes, attempt outcomes) are checked for their shape here and for
-- their meaning in the library, which is the one list of them: adding one
-- changes no table. (A trigger checking the state list cost about as much
-- CPU per claim and acknowledgment as the rest of the row's checks
-- together; SQLite cannot change a CHECK without rebuilding the table.)
-- The rules that tie a state to other columns are CHECKs below.

CREATE TABLE errand_jobs (
    id               TEXT    NOT NULL PRIMARY KEY,
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    state            TEXT    NOT NULL
        CHECK (length(state) BETWEEN 1 AND 40 AND state NOT GLOB '*[^a-z_]*'),
    payload          TEXT    NOT NULL CHECK (json_valid(payload)),
    priority         INTEGER NOT NULL DEFAULT 0 CHECK (priority BETWEEN -32768 AND 32767),
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    -- Deliberate replays by an operator; each starts a new attempt cycle.
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
    -- The fence: a settlement names the token of the lease it holds.
    lease_token      TEXT,
    lease_until      INTEGER,
    last_error       TEXT,
    last_error_class TEXT
        CHECK (length(last_error_class) BETWEEN 1 AND 40
            AND last_error_class NOT GLOB '*[^a-z_]*'),
    finished_at      INTEGER,
    -- A concurrency key: at most key_limit of the queue's jobs with this key
    -- run at once, in enqueue order when key_ordered.
    key_name         TEXT    CHECK (length(key_name) BETWEEN 1 AND 200),
    key_limit        INTEGER
        CHECK ((key_limit IS NULL) = (key_name IS NULL))
        CHECK (key_limit BETWEEN 1 AND 10000),
    key_ordered      INTEGER NOT NULL DEFAULT 0
        CHECK (key_ordered IN (0, 1))
        CHECK (key_ordered = 0 OR key_limit = 1),
    -- When the current attempt started (set while running).
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
    output           TEXT    CHECK (output IS NULL OR state = 'done'),
    progress         TEXT,
    workflow         TEXT    CHECK (workflow IS NULL OR length(workflow) BETWEEN 1 AND 200),
    tags             TEXT    CHECK (tags IS NULL OR json_type(tags) = 'array'),
    meta             TEXT    CHECK (meta IS NULL OR json_type(meta) = 'object'),
    unique_key       TEXT    CHECK (unique_key IS NULL OR length(unique_key) BETWEEN 1 AND 300),
    batch            TEXT    CHECK (batch IS NULL OR length(batch) BETWEEN 1 AND 200),
    -- The signal a `waiting` job waits for, until when, and what happens
    -- then; every way out of `waiting` clears them.
    await_signal     TEXT    CHECK (length(await_signal) BETWEEN 1 AND 100),
    await_until      INTEGER,
    on_await_timeout TEXT    CHECK (on_await_timeout IN ('fail', 'run', 'cancel')),
    -- The signal (errand_signals.seq) that ended the latest wait: the
    -- next attempts read its payload.
    signal_seq       INTEGER,
    -- The step that added the job to its workflow as it completed (a
    -- child added at run time); not a reference: the step may be pruned
    -- first.
    added_by         TEXT    CHECK (added_by IS NULL OR length(added_by) BETWEEN 1 AND 200),
    -- Attempts never exceed the budget.
    CHECK (attempts BETWEEN 0 AND max_attempts),
    CHECK (lease_expiries BETWEEN 0 AND max_lease_expiries),
    -- A running job always has a lease; no other state has one.
    CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_until IS NOT NULL)),
    -- Finished states carry the time they finished; live ones do not.
    CHECK ((state IN ('done', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
    -- A blocked job waits for something; a job that may run waits for nothing.
    CHECK (state <> 'blocked' OR waiting_on > 0),
    CHECK (state NOT IN ('waiting', 'ready', 'running', 'done', 'dead') OR waiting_on = 0),
    CHECK (waiting_on = 0 OR on_dependency_failure IS NOT NULL),
    -- A waiting job, and only a waiting one, waits for a signal, with its
    -- policy; a wait's parts come together.
    CHECK ((state = 'waiting') = (await_signal IS NOT NULL)),
    CHECK ((await_signal IS NULL) = (on_await_timeout IS NULL)),
    CHECK (await_until IS NULL OR await_signal IS NOT NULL)
) STRICT;

CREATE INDEX errand_jobs_due
    ON errand_jobs (priority DESC, available_at, id)
    WHERE state = 'ready';

CREATE INDEX errand_jobs_due_by_queue
    ON errand_jobs (queue, priority DESC, available_at, id)
    WHERE state = 'ready';

CREATE INDEX errand_jobs_leases
    ON errand_jobs (lease_until, id)
    WHERE state = 'running';

CREATE INDEX errand_jobs_keys
    ON errand_jobs (queue, key_name, state)
    WHERE key_name IS NOT NULL;

-- The waits that time out, for expire_waits.sql.
CREATE INDEX errand_jobs_await_timeouts
    ON errand_jobs (await_until)
    WHERE state = 'waiting' AND await_until IS NOT NULL;

CREATE INDEX errand_jobs_dead_by_queue
    ON errand_jobs (queue, finished_at)
    WHERE state = 'dead';

CREATE INDEX errand_jobs_blocked_by_queue
    ON errand_jobs (queue)
    WHERE state = 'blocked';

CREATE INDEX errand_jobs_waiting_by_queue
    ON errand_jobs (queue)
    WHERE state = 'waiting';

CREATE INDEX errand_jobs_state
    ON errand_jobs (state, created_at)
    WHERE state <> 'running';

CREATE INDEX errand_jobs_unique
    ON errand_jobs (unique_key, created_at)
    WHERE unique_key IS NOT NULL;

CREATE INDEX errand_jobs_workflow
    ON errand_jobs (workflow, created_at, id)
    WHERE workflow IS NOT NULL;

CREATE INDEX errand_jobs_batch
    ON errand_jobs (batch, created_at, id)
    WHERE batch IS NOT NULL;

-- One row per attempt that ended other than by success (failed, snoozed,
-- released, cancelled, or its lease expired); the current attempt and a
-- succeeding one are read from the job row. `cycle` is the job's replay
-- count when the attempt began.
CREATE TABLE errand_attempts (
    seq          INTEGER PRIMARY KEY,
    job_id       TEXT    NOT NULL REFERENCES errand_jobs (id) ON DELETE CASCADE,
    cycle        INTEGER NOT NULL,
    attempt      INTEGER NOT NULL CHECK (attempt >= 1),
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    outcome      TEXT
        CHECK (length(outcome) BETWEEN 1 AND 40 AND outcome NOT GLOB '*[^a-z_]*'),
    error        TEXT,
    error_class  TEXT
        CHECK (length(error_class) BETWEEN 1 AND 40 AND error_class NOT GLOB '*[^a-z_]*'),
    -- An attempt ends with its outcome and only then.
    CHECK ((finished_at IS NULL) = (outcome IS NULL))
) STRICT;

CREATE INDEX errand_attempts_job ON errand_attempts (job_id, seq);

CREATE INDEX errand_attempts_finished ON errand_attempts (finished_at)
    WHERE finished_at IS NOT NULL;

-- A job's dependencies, in the order they were named; `met` once the
-- dependency is done (or, under the `run` policy, finished otherwise).
CREATE TABLE errand_dependencies (
    job_id     TEXT    NOT NULL REFERENCES errand_jobs (id) ON DELETE CASCADE,
    depends_on TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    met        INTEGER NOT NULL DEFAULT 0 CHECK (met IN (0, 1)),
    PRIMARY KEY (job_id, depends_on),
    CHECK (job_id <> depends_on)
) STRICT, WITHOUT ROWID;

CREATE INDEX errand_dependencies_of ON errand_dependencies (depends_on, met, job_id);

-- The signals sent to a job, in the order sent. `delivered_at` is set
-- when the signal ends a wait of the job; until then (sent with `buffer`
-- to a job not waiting for it) it is kept for the job's next wait of its
-- name. Rows go with their job.
CREATE TABLE errand_signals (
    seq          INTEGER PRIMARY KEY,
    job_id       TEXT    NOT NULL REFERENCES errand_jobs (id) ON DELETE CASCADE,
    name         TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    payload      TEXT    CHECK (payload IS NULL OR json_valid(payload)),
    sent_at      INTEGER NOT NULL,
    delivered_at INTEGER
) STRICT;

CREATE INDEX errand_signals_job ON errand_signals (job_id, seq);

-- Tags, one row per tag of a job, for listings by tag in creation order.
CREATE TABLE errand_job_tags (
    tag        TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    job_id     TEXT    NOT NULL REFERENCES errand_jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (tag, created_at, job_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX errand_job_tags_job ON errand_job_tags (job_id);

-- Metadata entries, one row per entry of a job, for searches by metadata
-- in creation order (list_meta.sql); written once with the job, so claims
-- and settlements never touch them.
CREATE TABLE errand_job_meta (
    key        TEXT    NOT NULL,
    value      TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    job_id     TEXT    NOT NULL REFERENCES errand_jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (key, value, created_at, job_id)
) STRICT, WITHOUT ROWID;

CREATE INDEX errand_job_meta_job ON errand_job_meta (job_id);

-- Batches: sealed once every job is in, with the callbacks to enqueue when
-- they have all finished (on_finish) or all succeeded (on_success).
CREATE TABLE errand_batches (
    id         TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    created_at INTEGER NOT NULL,
    sealed_at  INTEGER,
    on_success TEXT,
    on_finish  TEXT,
    CHECK (sealed_at IS NOT NULL OR (on_success IS NULL AND on_finish IS NULL))
) STRICT, WITHOUT ROWID;

-- Every operator action. A job's action names its job (and the job's
-- queue), a queue's action its queue, a schedule's action its schedule.
CREATE TABLE errand_audit (
    seq      INTEGER PRIMARY KEY,
    job_id   TEXT,
    queue    TEXT,
    action   TEXT    NOT NULL
        CHECK (length(action) BETWEEN 1 AND 40 AND action NOT GLOB '*[^a-z_]*'),
    operator TEXT    NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason   TEXT,
    at       INTEGER NOT NULL,
    -- For a copy: the new job (the original is job_id).
    copy_id  TEXT,
    -- For a schedule's action: the schedule.
    schedule TEXT,
    -- An entry names one job or one schedule, or else a queue.
    CHECK ((job_id IS NOT NULL) + (schedule IS NOT NULL) <= 1),
    CHECK (job_id IS NOT NULL OR schedule IS NOT NULL OR queue IS NOT NULL),
    -- A purge cannot be undone: it says why.
    CHECK (action <> 'purge' OR (reason IS NOT NULL AND length(reason) > 0)),
    -- A copy, and only a copy, names the new job, which is another job.
    CHECK ((copy_id IS NOT NULL) = (action = 'copy')),
    CHECK (copy_id IS NULL OR (job_id IS NOT NULL AND copy_id <> job_id))
) STRICT;

CREATE INDEX errand_audit_job ON errand_audit (job_id, seq);
CREATE INDEX errand_audit_queue ON errand_audit (queue, seq);
CREATE INDEX errand_audit_copy ON errand_audit (copy_id, seq) WHERE copy_id IS NOT NULL;
CREATE INDEX errand_audit_schedule ON errand_audit (schedule, seq) WHERE schedule IS NOT NULL;

-- Queues an operator paused: no claim takes their jobs.
CREATE TABLE errand_paused_queues (
    queue     TEXT    NOT NULL PRIMARY KEY,
    operator  TEXT    NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason    TEXT,
    paused_at INTEGER NOT NULL
) STRICT;

-- Queues with a concurrency cap: a claim starts one of their jobs only
-- while fewer than `concurrency` of them are running. Claims read these
-- queues apart from the others (claim.rs), counting the running jobs
-- through errand_jobs_leases.
CREATE TABLE errand_queue_limits (
    queue       TEXT    NOT NULL PRIMARY KEY,
    concurrency INTEGER NOT NULL CHECK (concurrency BETWEEN 1 AND 100000),
    operator    TEXT    NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason      TEXT,
    set_at      INTEGER NOT NULL
) STRICT;

-- Each queue's jobs per state, counted whole by a running service once a
-- minute while some count passes the statistics' cap (counts.rs); the
-- statistics show these where their live read stops at the cap. `ready`
-- is due now, `scheduled` due later.
CREATE TABLE errand_counts (
    queue      TEXT    NOT NULL,
    state      TEXT    NOT NULL
        CHECK (state IN ('ready', 'scheduled', 'blocked', 'waiting', 'running', 'dead')),
    n          INTEGER NOT NULL CHECK (n >= 0),
    counted_at INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) STRICT, WITHOUT ROWID;

-- Token buckets of the rate limits, shared by every process.
CREATE TABLE errand_rate_limits (
    name         TEXT    NOT NULL PRIMARY KEY,
    tokens       REAL    NOT NULL CHECK (tokens >= 0),
    last_granted INTEGER NOT NULL DEFAULT 0,
    updated_at   INTEGER NOT NULL
) STRICT;

-- What each worker process last reported about itself.
CREATE TABLE errand_workers (
    id            TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    host          TEXT    NOT NULL,
    pid           INTEGER NOT NULL,
    queues        TEXT    NOT NULL CHECK (json_valid(queues)),
    started_at    INTEGER NOT NULL,
    last_cycle_at INTEGER NOT NULL,
    metrics       TEXT    NOT NULL CHECK (json_valid(metrics))
) STRICT;

-- Schedules stored in the database (as opposed to those a worker is
-- started with).
CREATE TABLE errand_schedules (
    name          TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 100
        AND name GLOB '[A-Za-z0-9]*' AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    cron          TEXT    NOT NULL CHECK (length(cron) BETWEEN 1 AND 200),
    kind          TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 100
        AND kind GLOB '[A-Za-z0-9]*' AND kind NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    queue         TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 100
        AND queue GLOB '[A-Za-z0-9]*' AND queue NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    payload       TEXT    NOT NULL CHECK (json_valid(payload)),
    max_attempts  INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    misfire       TEXT    NOT NULL CHECK (misfire IN ('skip', 'once')
        OR (misfire GLOB 'backfill:[1-9]*' AND misfire NOT GLOB 'backfill:*[^0-9]*'
            AND length(misfire) <= 13 AND CAST(substr(misfire, 10) AS INTEGER) <= 1000)),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    -- Ticks before this are never enqueued: when the schedule was added,
    -- replaced or last resumed.
    active_since  INTEGER NOT NULL,
    paused_at     INTEGER,
    paused_by     TEXT,
    paused_reason TEXT,
    -- The IANA time zone the pattern is read in.
    tz            TEXT    NOT NULL DEFAULT 'UTC' CHECK (length(tz) BETWEEN 1 AND 64),
    CHECK ((paused_at IS NULL) = (paused_by IS NULL)),
    CHECK (paused_at IS NOT NULL OR paused_reason IS NULL)
) STRICT;

-- Per-queue counters by minute for the charts.
CREATE TABLE errand_minutes (
    queue  TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 100
        AND queue GLOB '[A-Za-z0-9]*' AND queue NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    -- Minutes since the Unix epoch.
    minute INTEGER NOT NULL,
    series TEXT    NOT NULL CHECK (length(series) BETWEEN 1 AND 40
        AND series GLOB '[a-z]*' AND series NOT GLOB '*[^a-z0-9_.]*'),
    value  INTEGER NOT NULL CHECK (value >= 0),
    PRIMARY KEY (queue, minute, series)
) STRICT, WITHOUT ROWID;

CREATE INDEX errand_minutes_by_minute ON errand_minutes (minute, series, value);
