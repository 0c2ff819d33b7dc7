-- Errand's schema for PostgreSQL, version 1: the baseline of release 0.1.
--
-- __SCHEMA__ is replaced by the configured schema name (quoted). Ids, names
-- and tokens compare bytewise (collation "C"): they are opaque identifiers,
-- and every column compared with one takes the same collation so that
-- joins use the indexes. docs/postgres.md lists each index with the
-- statements that read it.
--
-- Two costs shaped the table. PostgreSQL evaluates every table CHECK on
-- every row version, and a job's row is written at its enqueue, claim and
-- settlement, none of them a heap-only update (the state is in the partial
-- indexes' predicates): so rules on columns that never change after the
-- insert live in domains, whose check runs only when a value is stored,
-- and only the rules that tie changing columns together stay on the table.
-- And every row version adds an entry to each index whose predicate it
-- meets: so the indexes are partial, and a workflow's steps live in a table
-- of their own instead of an index on errand_jobs.
--
-- Names that grow with the product (operator actions, failure classes,
-- attempt outcomes) are checked for their shape here and for their meaning
-- in the library, which is the one list of them: adding one needs no
-- migration. The job states, which the table's rules are written in, are
-- one named constraint that a later version can replace without a rewrite.

CREATE DOMAIN __SCHEMA__.errand_job_id AS text COLLATE "C"
    CHECK (length(VALUE) BETWEEN 1 AND 200 AND VALUE ~ '^[A-Za-z0-9_.:@/+=-]+$');
-- Queue, kind and schedule names: 1-100 letters, digits or -_.: starting
-- with a letter or digit. (An unbounded pattern plus a length bound: a
-- bounded repetition such as {0,99} costs PostgreSQL's regex engine that
-- many copies of its states.)
CREATE DOMAIN __SCHEMA__.errand_name AS text COLLATE "C"
    CHECK (length(VALUE) <= 100 AND VALUE ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$');
-- Workflow, batch and concurrency-key labels.
CREATE DOMAIN __SCHEMA__.errand_label AS text COLLATE "C"
    CHECK (length(VALUE) BETWEEN 1 AND 200);
CREATE DOMAIN __SCHEMA__.errand_unique_key AS text COLLATE "C"
    CHECK (length(VALUE) BETWEEN 1 AND 300);
-- A word the library defines: an operator action, a failure class, an
-- attempt's outcome.
CREATE DOMAIN __SCHEMA__.errand_word AS text COLLATE "C"
    CHECK (length(VALUE) <= 40 AND VALUE ~ '^[a-z][a-z_]*$');
CREATE DOMAIN __SCHEMA__.errand_budget AS integer
    CHECK (VALUE BETWEEN 1 AND 1000);
CREATE DOMAIN __SCHEMA__.errand_key_limit AS integer
    CHECK (VALUE BETWEEN 1 AND 10000);
CREATE DOMAIN __SCHEMA__.errand_dependency_policy AS text
    CHECK (VALUE IN ('wait', 'cancel', 'run'));
CREATE DOMAIN __SCHEMA__.errand_await_policy AS text
    CHECK (VALUE IN ('fail', 'run', 'cancel'));
CREATE DOMAIN __SCHEMA__.errand_traceparent AS text COLLATE "C"
    CHECK (VALUE ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
CREATE DOMAIN __SCHEMA__.errand_json_array AS jsonb
    CHECK (jsonb_typeof(VALUE) = 'array');
CREATE DOMAIN __SCHEMA__.errand_json_object AS jsonb
    CHECK (jsonb_typeof(VALUE) = 'object');

CREATE TABLE __SCHEMA__.errand_jobs (
    id                    __SCHEMA__.errand_job_id NOT NULL PRIMARY KEY,
    -- Enqueue order, for the order of an ordered concurrency key.
    seq                   bigint GENERATED ALWAYS AS IDENTITY,
    queue                 __SCHEMA__.errand_name NOT NULL,
    kind                  __SCHEMA__.errand_name NOT NULL,
    state                 text NOT NULL,
    -- Payload and output are kept as the text given (json, not jsonb, which
    -- would write numbers back in full digits).
    payload               json NOT NULL,
    priority              smallint NOT NULL DEFAULT 0,
    attempts              integer NOT NULL DEFAULT 0,
    max_attempts          __SCHEMA__.errand_budget NOT NULL,
    -- Deliberate replays by an operator; each starts a new attempt cycle.
    replays               integer NOT NULL DEFAULT 0 CHECK (replays >= 0),
    -- Leases that expired without the attempt being settled, and the budget
    -- after which the job is quarantined as dead (class lost_lease).
    lease_expiries        integer NOT NULL DEFAULT 0,
    max_lease_expiries    __SCHEMA__.errand_budget NOT NULL DEFAULT 5,
    -- The elapsed-time budget: no retry is scheduled past this time.
    give_up_at            timestamptz,
    available_at          timestamptz NOT NULL,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    -- The fence: a settlement names the token of the lease it holds.
    lease_token           text COLLATE "C",
    lease_until           timestamptz,
    last_error            text,
    last_error_class      __SCHEMA__.errand_word,
    finished_at           timestamptz,
    -- A concurrency key: at most key_limit of the queue's jobs with this key
    -- run at once, in enqueue order (seq) when key_ordered.
    key_name              __SCHEMA__.errand_label,
    key_limit             __SCHEMA__.errand_key_limit,
    key_ordered           boolean NOT NULL DEFAULT false,
    -- When the current attempt started. The current attempt lives on the
    -- row; errand_attempts receives an attempt only once it is superseded.
    attempt_started_at    timestamptz,
    deadline              timestamptz,
    traceparent           __SCHEMA__.errand_traceparent,
    -- Dependencies not yet met.
    waiting_on            integer NOT NULL DEFAULT 0 CHECK (waiting_on >= 0),
    -- What the job does when a dependency ends dead or cancelled; set
    -- exactly when it has dependencies.
    on_dependency_failure __SCHEMA__.errand_dependency_policy,
    -- Whether some job depends on this one: a settlement releases
    -- dependents only of a job that has them, and an enqueue that names a
    -- job as a dependency sets it under the job's row lock, so a
    -- settlement waiting for that lock sees it when it re-reads the row.
    has_dependents        boolean NOT NULL DEFAULT false,
    output                json,
    -- The latest progress a handler reported, carried by lease renewals.
    progress              text,
    workflow              __SCHEMA__.errand_label,
    tags                  __SCHEMA__.errand_json_array,
    meta                  __SCHEMA__.errand_json_object,
    unique_key            __SCHEMA__.errand_unique_key,
    batch                 __SCHEMA__.errand_label,
    -- Someone waits for this job to end (see errand_notify_finished).
    awaited               boolean NOT NULL DEFAULT false,
    -- The signal a `waiting` job waits for, until when, and what happens
    -- then; every way out of `waiting` clears them.
    await_signal          __SCHEMA__.errand_name,
    await_until           timestamptz,
    on_await_timeout      __SCHEMA__.errand_await_policy,
    -- The signal (errand_signals.seq) that ended the latest wait: the
    -- next attempts read its payload.
    signal_seq            bigint,
    -- The step that added the job to its workflow as it completed (a
    -- child added at run time); not a reference: the step may be pruned
    -- first.
    added_by              __SCHEMA__.errand_job_id,
    CONSTRAINT errand_jobs_state_known
        CHECK (state IN ('blocked', 'waiting', 'ready', 'running', 'done', 'dead', 'cancelled')),
    -- Attempts never exceed the budget.
    CONSTRAINT errand_jobs_attempts_within_budget
        CHECK (attempts BETWEEN 0 AND max_attempts),
    CONSTRAINT errand_jobs_lease_expiries_within_budget
        CHECK (lease_expiries BETWEEN 0 AND max_lease_expiries),
    -- A running job always has a lease and knows when its attempt began;
    -- no other state has a lease.
    CONSTRAINT errand_jobs_running_has_lease
        CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_until IS NOT NULL)),
    CONSTRAINT errand_jobs_running_attempt_started
        CHECK (state <> 'running' OR attempt_started_at IS NOT NULL),
    -- Finished states carry the time they finished; live ones do not.
    CONSTRAINT errand_jobs_finished_at
        CHECK ((state IN ('done', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
    CONSTRAINT errand_jobs_output_when_done
        CHECK (output IS NULL OR state = 'done'),
    -- A key always has a limit, and only a keyed job has one; an ordered
    -- key runs one job at a time.
    CONSTRAINT errand_jobs_key_has_limit CHECK ((key_limit IS NULL) = (key_name IS NULL)),
    CONSTRAINT errand_jobs_ordered_key_runs_one CHECK (NOT key_ordered OR key_limit = 1),
    -- A blocked job waits for something; a job that may run waits for nothing.
    CONSTRAINT errand_jobs_blocked_waits CHECK (state <> 'blocked' OR waiting_on > 0),
    CONSTRAINT errand_jobs_runnable_waits_for_nothing
        CHECK (state NOT IN ('waiting', 'ready', 'running', 'done', 'dead') OR waiting_on = 0),
    -- A waiting job, and only a waiting one, waits for a signal, with its
    -- policy; a wait's parts come together.
    CONSTRAINT errand_jobs_waiting_has_signal
        CHECK ((state = 'waiting') = (await_signal IS NOT NULL)),
    CONSTRAINT errand_jobs_await_whole
        CHECK ((await_signal IS NULL) = (on_await_timeout IS NULL)
               AND (await_until IS NULL OR await_signal IS NOT NULL)),
    CONSTRAINT errand_jobs_waiting_has_policy
        CHECK (waiting_on = 0 OR on_dependency_failure IS NOT NULL)
) WITH (
    -- A hot, frequently updated table: vacuum it early, and leave room in
    -- each page for the next version of its rows.
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02
);

CREATE INDEX errand_jobs_due ON __SCHEMA__.errand_jobs (priority DESC, available_at, id)
    WHERE state = 'ready' AND key_name IS NULL;
CREATE INDEX errand_jobs_due_by_queue
    ON __SCHEMA__.errand_jobs (queue, priority DESC, available_at, id)
    WHERE state = 'ready' AND key_name IS NULL;
CREATE INDEX errand_jobs_keyed_due ON __SCHEMA__.errand_jobs (available_at)
    INCLUDE (queue, key_name, priority)
    WHERE state = 'ready' AND key_name IS NOT NULL;
CREATE INDEX errand_jobs_keys ON __SCHEMA__.errand_jobs (queue, key_name, state, seq)
    WHERE key_name IS NOT NULL AND state IN ('ready', 'running');
CREATE INDEX errand_jobs_leases ON __SCHEMA__.errand_jobs (lease_until, id)
    WHERE state = 'running';
CREATE INDEX errand_jobs_state ON __SCHEMA__.errand_jobs (state, created_at, id)
    WHERE state <> 'running';
-- The waits that time out, for expire_waits.sql.
CREATE INDEX errand_jobs_await_timeouts ON __SCHEMA__.errand_jobs (await_until)
    WHERE state = 'waiting' AND await_until IS NOT NULL;
CREATE INDEX errand_jobs_dead_by_queue ON __SCHEMA__.errand_jobs (queue, finished_at)
    WHERE state = 'dead';
CREATE INDEX errand_jobs_blocked_by_queue ON __SCHEMA__.errand_jobs (queue)
    WHERE state = 'blocked';
CREATE INDEX errand_jobs_waiting_by_queue ON __SCHEMA__.errand_jobs (queue)
    WHERE state = 'waiting';
CREATE INDEX errand_jobs_unique ON __SCHEMA__.errand_jobs (unique_key, created_at)
    WHERE unique_key IS NOT NULL;
CREATE INDEX errand_jobs_batch ON __SCHEMA__.errand_jobs (batch, created_at, id)
    WHERE batch IS NOT NULL;

-- One row per attempt superseded (failed, snoozed, released, cancelled, or
-- its lease expired); the current attempt and a succeeding one are read
-- from the job row. `cycle` is the job's replay count when it began.
CREATE TABLE __SCHEMA__.errand_attempts (
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    job_id      text COLLATE "C" NOT NULL
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    cycle       integer NOT NULL,
    attempt     integer NOT NULL CHECK (attempt >= 1),
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    outcome     __SCHEMA__.errand_word,
    error       text,
    error_class __SCHEMA__.errand_word,
    -- Keyed by the job: the history and the cascade read it, and each row
    -- costs one entry here instead of one for `seq` and one for the job.
    CONSTRAINT errand_attempts_pkey PRIMARY KEY (job_id, seq)
);
CREATE INDEX errand_attempts_finished ON __SCHEMA__.errand_attempts (finished_at)
    WHERE finished_at IS NOT NULL;

-- One row per dependency: `job_id` waits for `depends_on`, `met` once that
-- is done (or, under the `run` policy, finished otherwise). The dependency
-- is not a foreign key: a finished dependency may be purged or pruned
-- while its met edges stay with the dependent.
CREATE TABLE __SCHEMA__.errand_dependencies (
    job_id     text COLLATE "C" NOT NULL
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    depends_on text COLLATE "C" NOT NULL,
    -- The order the dependencies were named in.
    position   integer NOT NULL,
    met        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (job_id, depends_on),
    CHECK (job_id <> depends_on)
);
CREATE INDEX errand_dependencies_of ON __SCHEMA__.errand_dependencies (depends_on, job_id);
CREATE INDEX errand_dependencies_unmet ON __SCHEMA__.errand_dependencies (depends_on)
    WHERE NOT met;

-- The signals sent to a job, in the order sent. `delivered_at` is set
-- when the signal ends a wait of the job; until then (sent with `buffer`
-- to a job not waiting for it) it is kept for the job's next wait of its
-- name. Rows go with their job.
CREATE TABLE __SCHEMA__.errand_signals (
    seq          bigint GENERATED BY DEFAULT AS IDENTITY,
    job_id       text COLLATE "C" NOT NULL
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    name         __SCHEMA__.errand_name NOT NULL,
    payload      json,
    sent_at      timestamptz NOT NULL,
    delivered_at timestamptz,
    CONSTRAINT errand_signals_pkey PRIMARY KEY (job_id, seq)
);

-- One row per tag of a job, in the listing's order within a tag. Rows go
-- with their job (pruned or purged).
CREATE TABLE __SCHEMA__.errand_job_tags (
    tag        text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    job_id     text COLLATE "C" NOT NULL
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (tag, created_at, job_id)
);
CREATE INDEX errand_job_tags_job ON __SCHEMA__.errand_job_tags (job_id);

-- One row per metadata entry of a job, in creation order within an entry,
-- for searches by metadata (list_meta.sql). Written once with the job (an
-- index on errand_jobs.meta would take its entries again at every claim
-- and settlement); rows go with their job.
CREATE TABLE __SCHEMA__.errand_job_meta (
    key        text COLLATE "C" NOT NULL,
    value      text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    job_id     text COLLATE "C" NOT NULL
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (key, value, created_at, job_id)
);
CREATE INDEX errand_job_meta_job ON __SCHEMA__.errand_job_meta (job_id);

-- A workflow's steps, written once when a step is enqueued (an index on
-- errand_jobs would take an entry at every state change of every step).
CREATE TABLE __SCHEMA__.errand_workflow_steps (
    workflow   text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    job_id     text COLLATE "C" NOT NULL
        REFERENCES __SCHEMA__.errand_jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (workflow, created_at, job_id)
);
CREATE INDEX errand_workflow_steps_job ON __SCHEMA__.errand_workflow_steps (job_id);

-- A batch: open until sealed; sealing it records the callbacks it
-- enqueued. An enqueue into a batch and its seal each lock its row for the
-- rest of their transaction, so a job joins before the seal lists the
-- batch's jobs, or is refused after it.
CREATE TABLE __SCHEMA__.errand_batches (
    id         text COLLATE "C" NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    created_at timestamptz NOT NULL,
    sealed_at  timestamptz,
    on_success text COLLATE "C",
    on_finish  text COLLATE "C",
    CHECK (sealed_at IS NOT NULL OR (on_success IS NULL AND on_finish IS NULL))
);

-- Every operator action. A job's action names its job (and the job's
-- queue), a queue's action its queue, a schedule's action its schedule.
CREATE TABLE __SCHEMA__.errand_audit (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id   text COLLATE "C",
    queue    text COLLATE "C",
    action   __SCHEMA__.errand_word NOT NULL,
    operator text NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason   text,
    at       timestamptz NOT NULL,
    -- For a copy: the new job (the original is job_id).
    copy_id  text COLLATE "C",
    -- For a schedule's action: the schedule.
    schedule text COLLATE "C",
    -- An entry names one job or one schedule, or else a queue.
    CONSTRAINT errand_audit_one_target CHECK (num_nonnulls(job_id, schedule) <= 1),
    CONSTRAINT errand_audit_has_target
        CHECK (job_id IS NOT NULL OR schedule IS NOT NULL OR queue IS NOT NULL),
    -- A purge cannot be undone: it says why.
    CONSTRAINT errand_audit_purge_reason CHECK (action <> 'purge' OR (reason IS NOT NULL AND length(reason) > 0)),
    -- A copy, and only a copy, names the new job, which is another job.
    CONSTRAINT errand_audit_copy CHECK ((copy_id IS NOT NULL) = (action = 'copy')),
    CONSTRAINT errand_audit_copy_other
        CHECK (copy_id IS NULL OR (job_id IS NOT NULL AND copy_id <> job_id))
);
CREATE INDEX errand_audit_job ON __SCHEMA__.errand_audit (job_id, seq);
CREATE INDEX errand_audit_queue ON __SCHEMA__.errand_audit (queue, seq);
CREATE INDEX errand_audit_copy ON __SCHEMA__.errand_audit (copy_id, seq)
    WHERE copy_id IS NOT NULL;
CREATE INDEX errand_audit_schedule ON __SCHEMA__.errand_audit (schedule, seq)
    WHERE schedule IS NOT NULL;

-- A queue listed here is paused: claims take nothing from it until an
-- operator resumes it.
CREATE TABLE __SCHEMA__.errand_paused_queues (
    queue     text COLLATE "C" NOT NULL PRIMARY KEY,
    operator  text NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason    text,
    paused_at timestamptz NOT NULL
);

-- Queues with a concurrency cap: a claim starts one of their jobs only
-- while fewer than `concurrency` of them are running. Ordinary claims
-- leave these queues out (claim.sql, claim_ready.sql); a claim takes
-- their jobs with claim_capped.sql, holding the queue's advisory lock
-- (cap_lock.sql) so that claims of a capped queue take turns, each
-- counting the running jobs the last one committed.
CREATE TABLE __SCHEMA__.errand_queue_limits (
    queue       text COLLATE "C" NOT NULL PRIMARY KEY,
    concurrency integer NOT NULL CHECK (concurrency BETWEEN 1 AND 100000),
    operator    text NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason      text,
    set_at      timestamptz NOT NULL
);

-- Each queue's jobs per state, counted whole by a running service once a
-- minute while some count passes the statistics' cap (counts.sql); the
-- statistics show these where their live read stops at the cap. `ready`
-- is due now, `scheduled` due later.
CREATE TABLE __SCHEMA__.errand_counts (
    queue      text COLLATE "C" NOT NULL,
    state      text NOT NULL
        CHECK (state IN ('ready', 'scheduled', 'blocked', 'waiting', 'running', 'dead')),
    n          bigint NOT NULL CHECK (n >= 0),
    counted_at timestamptz NOT NULL,
    PRIMARY KEY (queue, state)
);

-- Token buckets of the rate limits, shared by every worker host.
CREATE TABLE __SCHEMA__.errand_rate_limits (
    name         text NOT NULL PRIMARY KEY,
    tokens       double precision NOT NULL CHECK (tokens >= 0),
    last_granted integer NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL
);

-- Each worker process reports itself every few seconds: its last completed
-- claim cycle and its cumulative counters, summed by /metrics.
CREATE TABLE __SCHEMA__.errand_workers (
    id            text NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    host          text NOT NULL,
    pid           bigint NOT NULL,
    queues        jsonb NOT NULL,
    started_at    timestamptz NOT NULL,
    last_cycle_at timestamptz NOT NULL,
    metrics       jsonb NOT NULL
);

-- Periodic schedules stored in the database: every running service reads
-- them and enqueues one job per tick (`cron:NAME:TICK`), so adding one
-- needs no deploy. The payload is kept as the text given. (Rarely written,
-- so its rules are plain table checks, and its statements' parameters are
-- plain text.)
CREATE TABLE __SCHEMA__.errand_schedules (
    name          text NOT NULL PRIMARY KEY CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'),
    cron          text NOT NULL CHECK (length(cron) BETWEEN 1 AND 200),
    kind          text NOT NULL CHECK (kind ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'),
    queue         text NOT NULL CHECK (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'),
    payload       text NOT NULL CHECK (payload::jsonb IS NOT NULL),
    max_attempts  integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    misfire       text NOT NULL CHECK (CASE
        WHEN misfire ~ '^backfill:[1-9][0-9]{0,3}$' THEN substr(misfire, 10)::integer <= 1000
        ELSE misfire IN ('skip', 'once')
    END),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    -- Ticks before this are never enqueued: when the schedule was added,
    -- replaced or last resumed.
    active_since  timestamptz NOT NULL,
    paused_at     timestamptz,
    paused_by     text,
    paused_reason text,
    -- The IANA time zone the pattern is read in.
    tz            text NOT NULL DEFAULT 'UTC' CHECK (length(tz) BETWEEN 1 AND 64),
    CHECK ((paused_at IS NULL) = (paused_by IS NULL)),
    CHECK (paused_at IS NOT NULL OR paused_reason IS NULL)
);

-- Per-minute counts behind the dashboard's charts: one row per queue,
-- minute and series, so this grows with queues and minutes, never with
-- jobs; minutes older than two days are deleted.
CREATE TABLE __SCHEMA__.errand_minutes (
    queue  __SCHEMA__.errand_name NOT NULL,
    -- Minutes since the Unix epoch.
    minute bigint NOT NULL,
    series text COLLATE "C" NOT NULL CHECK (series ~ '^[a-z][a-z0-9_.]{0,39}$'),
    value  bigint NOT NULL CHECK (value >= 0),
    PRIMARY KEY (queue, minute, series)
);
CREATE INDEX errand_minutes_by_minute ON __SCHEMA__.errand_minutes (minute, series)
    INCLUDE (value);

-- Wake idle workers when due jobs are inserted: one notification per queue
-- per statement, delivered at commit (and never for a rolled-back insert).
-- The channel is '<schema>.errand_jobs'; the payload is the queue name.
CREATE FUNCTION __SCHEMA__.errand_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.errand_jobs', q.queue)
    FROM (SELECT DISTINCT queue FROM new_rows
          WHERE state = 'ready' AND available_at <= now()) q;
    RETURN NULL;
END
$$;

CREATE TRIGGER errand_jobs_notify_insert
    AFTER INSERT ON __SCHEMA__.errand_jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.errand_notify_insert();

-- Tell those who wait for a job (`Client::wait`, `errand wait`, the API's
-- `?wait=`) that it ended: a waiter marks the job `awaited` after its
-- store listens on '<schema>.errand_finished', and the update that ends
-- the job (done, dead or cancelled, by whichever path) notifies its id
-- there at commit. Jobs nobody waits for cost the condition alone.
CREATE FUNCTION __SCHEMA__.errand_notify_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.errand_finished', NEW.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER errand_jobs_notify_finished
    AFTER UPDATE OF state ON __SCHEMA__.errand_jobs
    FOR EACH ROW
    WHEN (NEW.awaited AND NEW.state IN ('done', 'dead', 'cancelled')
          AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION __SCHEMA__.errand_notify_finished();

-- Enqueue from SQL: triggers, and programs in any language, inside their
-- own transaction. Same rules as the Rust API; returns the job id. An
-- existing id returns that id and creates nothing. It stores the payload
-- it is given: where payloads are encrypted (docs/encryption.md), the
-- caller seals it first, for the id it passes.
--   SELECT errand.enqueue('receipt', '{"payment": "p-1"}', id => 'p-1');
-- A unique enqueue takes the same transaction-scoped advisory lock on its
-- key as the library's (hashtextextended(key, 7266140), as
-- queries/unique_lock.sql), then looks for the newest job with the key in
-- a fresh snapshot, so a library enqueue and an SQL one of the same key
-- never both create a job.
CREATE FUNCTION __SCHEMA__.enqueue(
    kind          text,
    payload       jsonb       DEFAULT '{}',
    queue         text        DEFAULT 'default',
    id            text        DEFAULT NULL,
    run_at        timestamptz DEFAULT NULL,
    max_attempts  integer     DEFAULT 25,
    priority      integer     DEFAULT 0,
    key           text        DEFAULT NULL,
    key_limit     integer     DEFAULT NULL,
    ordered       boolean     DEFAULT false,
    delay         interval    DEFAULT NULL,
    deadline      timestamptz DEFAULT NULL,
    traceparent   text        DEFAULT NULL,
    give_up_after interval    DEFAULT NULL,
    unique_key    text        DEFAULT NULL,
    unique_for    interval    DEFAULT NULL,
    unique_while  text[]      DEFAULT NULL,
    tags          text[]      DEFAULT NULL,
    await_signal  text        DEFAULT NULL,
    await_timeout interval    DEFAULT NULL,
    on_await_timeout text     DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    new_id text := coalesce(enqueue.id, gen_random_uuid()::text);
    lim integer := CASE WHEN enqueue.key IS NULL THEN NULL ELSE coalesce(enqueue.key_limit, 1) END;
    longest constant interval := interval '36500 days';
    due timestamptz;
    stand_in text;
    bad text;
BEGIN
    IF enqueue.kind IS NULL OR enqueue.kind !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'errand.enqueue: kind % is not valid', coalesce(quote_literal(enqueue.kind), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'use 1 to 100 letters, digits or -_.: starting with a letter or digit';
    END IF;
    IF enqueue.queue IS NULL OR enqueue.queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'errand.enqueue: queue % is not valid', coalesce(quote_literal(enqueue.queue), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'use 1 to 100 letters, digits or -_.: starting with a letter or digit';
    END IF;
    IF new_id !~ '^[A-Za-z0-9_.:@/+=-]{1,200}$' THEN
        RAISE EXCEPTION 'errand.enqueue: id % is not valid', quote_literal(new_id)
            USING ERRCODE = '22023', HINT = 'use 1 to 200 letters, digits or -_.:@/+=';
    END IF;
    IF enqueue.payload IS NULL OR octet_length(enqueue.payload::text) > 1048576 THEN
        RAISE EXCEPTION 'errand.enqueue: the payload must be JSON of at most 1048576 bytes'
            USING ERRCODE = '22023', HINT = 'store large data elsewhere and pass a reference';
    END IF;
    IF enqueue.max_attempts IS NULL OR enqueue.max_attempts NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'errand.enqueue: max_attempts must be between 1 and 1000 (got %)', enqueue.max_attempts
            USING ERRCODE = '22023';
    END IF;
    IF enqueue.priority IS NULL OR enqueue.priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'errand.enqueue: priority must be between -32768 and 32767 (got %)', enqueue.priority
            USING ERRCODE = '22023';
    END IF;
    IF enqueue.key IS NULL AND (enqueue.key_limit IS NOT NULL OR enqueue.ordered) THEN
        RAISE EXCEPTION 'errand.enqueue: key_limit and ordered need a key'
            USING ERRCODE = '22023', HINT = 'pass key => ''tenant-7''';
    END IF;
    IF enqueue.key IS NOT NULL AND (octet_length(enqueue.key) NOT BETWEEN 1 AND 200
                                    OR enqueue.key ~ '[[:cntrl:]]') THEN
        RAISE EXCEPTION 'errand.enqueue: key % is not valid', quote_literal(enqueue.key)
            USING ERRCODE = '22023', HINT = 'use 1 to 200 bytes without control characters';
    END IF;
    IF lim IS NOT NULL AND lim NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'errand.enqueue: key_limit must be between 1 and 10000 (got %)', lim
            USING ERRCODE = '22023';
    END IF;
    IF enqueue.ordered AND lim <> 1 THEN
        RAISE EXCEPTION 'errand.enqueue: an ordered key runs one job at a time: key_limit must be 1 (got %)', lim
            USING ERRCODE = '22023';
    END IF;

    -- A wait for a signal: the job is stored waiting.
    IF enqueue.await_signal IS NULL AND (enqueue.await_timeout IS NOT NULL OR enqueue.on_await_timeout IS NOT NULL) THEN
        RAISE EXCEPTION 'errand.enqueue: await_timeout and on_await_timeout need an await_signal'
            USING ERRCODE = '22023', HINT = 'pass await_signal => ''paid''';
    END IF;
    IF enqueue.await_signal IS NOT NULL AND enqueue.await_signal !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'errand.enqueue: await_signal % is not valid', quote_literal(enqueue.await_signal)
            USING ERRCODE = '22023',
                  HINT = 'use 1 to 100 letters, digits or -_.: starting with a letter or digit';
    END IF;
    IF enqueue.on_await_timeout IS NOT NULL AND enqueue.on_await_timeout NOT IN ('fail', 'run', 'cancel') THEN
        RAISE EXCEPTION 'errand.enqueue: on_await_timeout % is not a policy', quote_literal(enqueue.on_await_timeout)
            USING ERRCODE = '22023', HINT = 'use fail, run or cancel';
    END IF;
    IF enqueue.await_timeout IS NOT NULL
       AND (enqueue.await_timeout < interval '0' OR enqueue.await_timeout > longest) THEN
        RAISE EXCEPTION 'errand.enqueue: await_timeout % is out of range', enqueue.await_timeout
            USING ERRCODE = '22023', HINT = 'give 0 to 36500 days';
    END IF;

    -- When it is due: at run_at, or after delay, or now.
    IF enqueue.run_at IS NOT NULL AND enqueue.delay IS NOT NULL THEN
        RAISE EXCEPTION 'errand.enqueue: give run_at or delay, not both'
            USING ERRCODE = '22023';
    END IF;
    IF enqueue.delay IS NOT NULL AND (enqueue.delay < interval '0' OR enqueue.delay > longest) THEN
        RAISE EXCEPTION 'errand.enqueue: delay % is out of range', enqueue.delay
            USING ERRCODE = '22023',
                  HINT = 'give 0 to 36500 days; further is a time: pass run_at instead';
    END IF;
    IF enqueue.give_up_after IS NOT NULL
       AND (enqueue.give_up_after < interval '0' OR enqueue.give_up_after > longest) THEN
        RAISE EXCEPTION 'errand.enqueue: give_up_after % is out of range', enqueue.give_up_after
            USING ERRCODE = '22023', HINT = 'give 0 to 36500 days';
    END IF;
    due := coalesce(enqueue.run_at, now() + coalesce(enqueue.delay, interval '0'));
    IF due NOT BETWEEN '1970-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999Z' THEN
        RAISE EXCEPTION 'errand.enqueue: run_at % must fall between 1970 and the end of 9999', due
            USING ERRCODE = '22023';
    END IF;
    IF enqueue.deadline NOT BETWEEN '1970-01-01T00:00:00Z' AND '9999-12-31T23:59:59.999Z' THEN
        RAISE EXCEPTION 'errand.enqueue: deadline % must fall between 1970 and the end of 9999', enqueue.deadline
            USING ERRCODE = '22023';
    END IF;
    IF enqueue.traceparent IS NOT NULL
       AND (enqueue.traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
            OR substr(enqueue.traceparent, 4, 32) = repeat('0', 32)
            OR substr(enqueue.traceparent, 37, 16) = repeat('0', 16)) THEN
        RAISE EXCEPTION 'errand.enqueue: traceparent % is not a W3C trace context', quote_literal(enqueue.traceparent)
            USING ERRCODE = '22023',
                  HINT = 'expected 00-<32 lowercase hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zeros';
    END IF;

    -- Tags: at most 20, each 1-100 letters, digits or -_.:/=@+, none twice.
    IF enqueue.tags IS NOT NULL THEN
        IF array_ndims(enqueue.tags) > 1 THEN
            RAISE EXCEPTION 'errand.enqueue: tags must be a flat array of text'
                USING ERRCODE = '22023', HINT = 'pass tags => ARRAY[''a'', ''b'']';
        END IF;
        IF cardinality(enqueue.tags) > 20 THEN
            RAISE EXCEPTION 'errand.enqueue: a job may carry at most 20 tags (got %)', cardinality(enqueue.tags)
                USING ERRCODE = '22023';
        END IF;
        SELECT t INTO bad FROM unnest(enqueue.tags) AS t
        WHERE t IS NULL OR t !~ '^[A-Za-z0-9_.:/=@+-]{1,100}$' LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'errand.enqueue: tag % is not valid', coalesce(quote_literal(bad), 'NULL')
                USING ERRCODE = '22023', HINT = 'use 1 to 100 letters, digits or -_.:/=@+';
        END IF;
        SELECT t INTO bad FROM unnest(enqueue.tags) AS t GROUP BY t HAVING count(*) > 1 LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'errand.enqueue: the tag % is given twice', quote_literal(bad)
                USING ERRCODE = '22023';
        END IF;
    END IF;

    -- Unique jobs: the key is always given here (the library's default key
    -- hashes its own canonical form of the payload, which SQL does not
    -- reproduce).
    IF (enqueue.unique_for IS NOT NULL OR enqueue.unique_while IS NOT NULL) AND enqueue.unique_key IS NULL THEN
        RAISE EXCEPTION 'errand.enqueue: unique_for and unique_while need a unique_key'
            USING ERRCODE = '22023', HINT = 'pass unique_key => ''sync:account-9''';
    END IF;
    IF enqueue.unique_key IS NOT NULL THEN
        IF enqueue.unique_for IS NULL AND enqueue.unique_while IS NULL THEN
            RAISE EXCEPTION 'errand.enqueue: a unique_key needs unique_for or unique_while'
                USING ERRCODE = '22023', HINT = 'pass unique_for => interval ''10 minutes''';
        END IF;
        IF enqueue.unique_for IS NOT NULL AND enqueue.unique_while IS NOT NULL THEN
            RAISE EXCEPTION 'errand.enqueue: give unique_for or unique_while, not both'
                USING ERRCODE = '22023';
        END IF;
        IF octet_length(enqueue.unique_key) NOT BETWEEN 1 AND 200 OR enqueue.unique_key ~ '[[:cntrl:]]' THEN
            RAISE EXCEPTION 'errand.enqueue: unique_key % is not valid', quote_literal(enqueue.unique_key)
                USING ERRCODE = '22023', HINT = 'use 1 to 200 bytes without control characters';
        END IF;
        IF enqueue.unique_for IS NOT NULL
           AND (enqueue.unique_for <= interval '0' OR enqueue.unique_for > longest) THEN
            RAISE EXCEPTION 'errand.enqueue: unique_for % is out of range', enqueue.unique_for
                USING ERRCODE = '22023', HINT = 'give more than 0 and at most 36500 days';
        END IF;
        IF enqueue.unique_while IS NOT NULL THEN
            IF array_ndims(enqueue.unique_while) > 1 THEN
                RAISE EXCEPTION 'errand.enqueue: unique_while must be a flat array of states'
                    USING ERRCODE = '22023', HINT = 'pass unique_while => ARRAY[''ready'', ''running'']';
            END IF;
            IF cardinality(enqueue.unique_while) = 0 THEN
                RAISE EXCEPTION 'errand.enqueue: unique_while needs at least one state'
                    USING ERRCODE = '22023', HINT = 'pass unique_while => ARRAY[''ready'', ''running'']';
            END IF;
            SELECT s INTO bad FROM unnest(enqueue.unique_while) AS s
            WHERE s IS NULL OR s NOT IN ('blocked', 'waiting', 'ready', 'running', 'done', 'dead', 'cancelled') LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'errand.enqueue: unique_while state % is not a job state', coalesce(quote_literal(bad), 'NULL')
                    USING ERRCODE = '22023', HINT = 'use blocked, waiting, ready, running, done, dead or cancelled';
            END IF;
        END IF;
        -- After the lock, the look-up must see what others committed.
        IF current_setting('transaction_isolation') <> 'read committed' THEN
            RAISE EXCEPTION 'errand.enqueue: a unique job needs a READ COMMITTED transaction (this one is %)',
                    current_setting('transaction_isolation')
                USING ERRCODE = '25000',
                      HINT = 'its check of the jobs already stored must see what other transactions committed while it waited for its lock';
        END IF;
        PERFORM pg_advisory_xact_lock(hashtextextended(enqueue.unique_key, 7266140));
        SELECT j.id INTO stand_in FROM __SCHEMA__.errand_jobs j
        WHERE j.unique_key = enqueue.unique_key
          AND (enqueue.unique_for IS NULL OR j.created_at > now() - enqueue.unique_for)
          AND (enqueue.unique_while IS NULL OR j.state = ANY (enqueue.unique_while))
        ORDER BY j.created_at DESC, j.id DESC
        LIMIT 1;
        IF FOUND THEN
            RETURN stand_in;
        END IF;
    END IF;

    INSERT INTO __SCHEMA__.errand_jobs
        (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
         available_at, created_at, updated_at, key_name, key_limit, key_ordered,
         deadline, traceparent, give_up_at, unique_key, tags,
         await_signal, await_until, on_await_timeout)
    VALUES
        (new_id, enqueue.queue, enqueue.kind,
         CASE WHEN enqueue.await_signal IS NULL THEN 'ready' ELSE 'waiting' END,
         enqueue.payload, enqueue.priority, 0,
         enqueue.max_attempts, 0, due, now(), now(),
         enqueue.key, lim, coalesce(enqueue.ordered, false),
         enqueue.deadline, enqueue.traceparent, now() + enqueue.give_up_after, enqueue.unique_key,
         CASE WHEN cardinality(enqueue.tags) > 0 THEN to_jsonb(enqueue.tags) END,
         enqueue.await_signal, now() + enqueue.await_timeout,
         CASE WHEN enqueue.await_signal IS NOT NULL THEN coalesce(enqueue.on_await_timeout, 'fail') END)
    ON CONFLICT (id) DO NOTHING;
    IF FOUND AND cardinality(enqueue.tags) > 0 THEN
        INSERT INTO __SCHEMA__.errand_job_tags (tag, created_at, job_id)
        SELECT t, now(), new_id FROM unnest(enqueue.tags) AS t;
    END IF;
    RETURN new_id;
END
$$;

-- Send a signal from SQL, inside the caller's transaction (a trigger, a
-- program in any language): the same rules as the library's signal_in.
-- Returns true when delivered (the job waited for it and is ready at
-- commit), false when kept (buffer => true, the job not waiting for it
-- now); raises otherwise, saying what the job waits for. Not audited as a
-- person's action.
--   SELECT errand.signal('hold-42', 'paid', '{"payment": "p-9"}');
CREATE FUNCTION __SCHEMA__.signal(
    job_id  text,
    name    text,
    payload jsonb   DEFAULT NULL,
    buffer  boolean DEFAULT false
) RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    found_state text;
    awaits text;
    seq_no bigint;
BEGIN
    IF signal.name IS NULL OR signal.name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'errand.signal: name % is not valid', coalesce(quote_literal(signal.name), 'NULL')
            USING ERRCODE = '22023',
                  HINT = 'use 1 to 100 letters, digits or -_.: starting with a letter or digit';
    END IF;
    IF octet_length(signal.payload::text) > 65536 THEN
        RAISE EXCEPTION 'errand.signal: the payload must be JSON of at most 65536 bytes'
            USING ERRCODE = '22023', HINT = 'store large data elsewhere and send a reference';
    END IF;
    -- The job's row is locked first, as the library's signal and suspend
    -- lock it, so a suspend of the job runs wholly before or after this.
    SELECT j.state, j.await_signal INTO found_state, awaits
    FROM __SCHEMA__.errand_jobs j WHERE j.id = signal.job_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'errand.signal: no job with id %', quote_literal(signal.job_id)
            USING ERRCODE = 'P0002';
    END IF;
    seq_no := nextval(pg_get_serial_sequence('__SCHEMA__.errand_signals', 'seq'));
    IF found_state = 'waiting' AND awaits = signal.name THEN
        UPDATE __SCHEMA__.errand_jobs j
        SET state = 'ready', available_at = greatest(j.available_at, now()),
            await_signal = NULL, await_until = NULL, on_await_timeout = NULL,
            signal_seq = seq_no, updated_at = now()
        WHERE j.id = signal.job_id;
        INSERT INTO __SCHEMA__.errand_signals (seq, job_id, name, payload, sent_at, delivered_at)
        VALUES (seq_no, signal.job_id, signal.name, signal.payload::text::json, now(), now());
        PERFORM pg_notify(n.nspname || '.errand_jobs', j.queue)
        FROM __SCHEMA__.errand_jobs j, pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE j.id = signal.job_id AND c.oid = '__SCHEMA__.errand_jobs'::regclass;
        RETURN true;
    END IF;
    IF signal.buffer AND found_state NOT IN ('done', 'dead', 'cancelled') THEN
        INSERT INTO __SCHEMA__.errand_signals (seq, job_id, name, payload, sent_at)
        VALUES (seq_no, signal.job_id, signal.name, signal.payload::text::json, now());
        RETURN false;
    END IF;
    RAISE EXCEPTION 'errand.signal: job % is % and does not wait for the signal %',
            quote_literal(signal.job_id), found_state, signal.name
        USING ERRCODE = '55000',
              HINT = CASE WHEN found_state = 'waiting'
                          THEN 'it waits for the signal ' || awaits || '; or pass buffer => true to keep it for a later wait'
                          WHEN found_state IN ('done', 'dead', 'cancelled') THEN 'it has ended'
                          ELSE 'pass buffer => true to keep it for its next wait of that name' END;
END
$$;
