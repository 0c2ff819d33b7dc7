DROP SCHEMA IF EXISTS __S__ CASCADE; CREATE SCHEMA __S__;
CREATE TABLE __S__.jobs (
    pk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id text COLLATE "C" NOT NULL UNIQUE CHECK (length(id) BETWEEN 1 AND 200),
    queue text COLLATE "C" NOT NULL,
    kind text COLLATE "C" NOT NULL,
    payload json NOT NULL,
    created_at timestamptz NOT NULL,
    max_lease_expiries int NOT NULL DEFAULT 5,
    give_up_at timestamptz, deadline timestamptz, traceparent text,
    key_limit int, key_ordered bool NOT NULL DEFAULT false,
    workflow text, tags jsonb, meta jsonb, unique_key text, batch text,
    on_dependency_failure text
);
CREATE TABLE __S__.runs (
    pk bigint PRIMARY KEY,
    state text NOT NULL CHECK (state IN ('blocked','ready','running','done','dead','cancelled')),
    queue text COLLATE "C" NOT NULL,
    priority smallint NOT NULL DEFAULT 0,
    available_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    attempts int NOT NULL DEFAULT 0,
    max_attempts int NOT NULL,
    replays int NOT NULL DEFAULT 0,
    lease_expiries int NOT NULL DEFAULT 0,
    lease_token uuid,
    lease_until timestamptz,
    attempt_started_at timestamptz,
    finished_at timestamptz,
    updated_at timestamptz NOT NULL,
    last_error text, last_error_class text,
    key_name text COLLATE "C",
    waiting_on int NOT NULL DEFAULT 0,
    has_dependents bool NOT NULL DEFAULT false,
    output json, progress text,
    CHECK (attempts BETWEEN 0 AND max_attempts),
    CHECK ((state = 'running') = (lease_token IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK (state <> 'running' OR attempt_started_at IS NOT NULL),
    CHECK ((state IN ('done', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
    CHECK (output IS NULL OR state = 'done'),
    CHECK (state <> 'blocked' OR waiting_on > 0),
    CHECK (state NOT IN ('ready', 'running', 'done', 'dead') OR waiting_on = 0)
) WITH (fillfactor = 80);
CREATE INDEX runs_due ON __S__.runs (priority DESC, available_at, pk) WHERE state = 'ready' AND key_name IS NULL;
CREATE INDEX runs_due_by_queue ON __S__.runs (queue, priority DESC, available_at, pk) WHERE state = 'ready' AND key_name IS NULL;
CREATE INDEX runs_leases ON __S__.runs (lease_until, pk) WHERE state = 'running';
CREATE INDEX runs_state ON __S__.runs (state, created_at, pk) WHERE __LISTING__;
CREATE TABLE __S__.errand_paused_queues (queue text COLLATE "C" PRIMARY KEY);
