-- Concurrency keys: jobs of one queue sharing a key share its limit
-- (`key_limit` running at once) and, when `key_ordered`, run one at a time
-- in enqueue order (`seq`).

ALTER TABLE __SCHEMA__.errand_jobs
    ADD COLUMN key_name text CHECK (length(key_name) BETWEEN 1 AND 200),
    ADD COLUMN key_limit integer CHECK (key_limit BETWEEN 1 AND 10000),
    ADD COLUMN key_ordered boolean NOT NULL DEFAULT false,
    ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY,
    -- A key always has a limit, and only a keyed job has one.
    ADD CONSTRAINT errand_jobs_key_has_limit CHECK ((key_limit IS NULL) = (key_name IS NULL)),
    -- An ordered key runs one job at a time.
    ADD CONSTRAINT errand_jobs_ordered_key_runs_one CHECK (NOT key_ordered OR key_limit = 1);

-- The plain due set leaves keyed jobs out: claims reach those through their
-- keys (below), so a saturated key's backlog is never scanned row by row.
DROP INDEX __SCHEMA__.errand_jobs_due;
DROP INDEX __SCHEMA__.errand_jobs_due_by_queue;

CREATE INDEX errand_jobs_due
    ON __SCHEMA__.errand_jobs (priority DESC, available_at, id)
    WHERE state = 'ready' AND key_name IS NULL;

CREATE INDEX errand_jobs_due_by_queue
    ON __SCHEMA__.errand_jobs (queue, priority DESC, available_at, id)
    WHERE state = 'ready' AND key_name IS NULL;

-- Keys with due jobs.
CREATE INDEX errand_jobs_keyed_due
    ON __SCHEMA__.errand_jobs (available_at) INCLUDE (queue, key_name, priority)
    WHERE state = 'ready' AND key_name IS NOT NULL;

-- A key's live jobs in enqueue order: its running count, its first ready jobs.
CREATE INDEX errand_jobs_keys
    ON __SCHEMA__.errand_jobs (queue, key_name, state, seq)
    WHERE key_name IS NOT NULL AND state IN ('ready', 'running');

-- The SQL enqueue function takes a concurrency key too (same rules as the
-- Rust API): key => 'tenant-7', key_limit => 2 (default 1), ordered => true.
DROP FUNCTION __SCHEMA__.enqueue(text, jsonb, text, text, timestamptz, integer, integer);

CREATE FUNCTION __SCHEMA__.enqueue(
    kind         text,
    payload      jsonb       DEFAULT '{}',
    queue        text        DEFAULT 'default',
    id           text        DEFAULT NULL,
    run_at       timestamptz DEFAULT NULL,
    max_attempts integer     DEFAULT 25,
    priority     integer     DEFAULT 0,
    key          text        DEFAULT NULL,
    key_limit    integer     DEFAULT NULL,
    ordered      boolean     DEFAULT false
) RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    job_id text := coalesce(enqueue.id, gen_random_uuid()::text);
    lim integer := CASE WHEN enqueue.key IS NULL THEN NULL ELSE coalesce(enqueue.key_limit, 1) END;
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
    IF job_id !~ '^[A-Za-z0-9_.:@/+=-]{1,200}$' THEN
        RAISE EXCEPTION 'errand.enqueue: id % is not valid', quote_literal(job_id)
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
    INSERT INTO __SCHEMA__.errand_jobs
        (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
         available_at, created_at, updated_at, key_name, key_limit, key_ordered)
    VALUES
        (job_id, enqueue.queue, enqueue.kind, 'ready', enqueue.payload, enqueue.priority, 0,
         enqueue.max_attempts, 0, coalesce(enqueue.run_at, now()), now(), now(),
         enqueue.key, lim, coalesce(enqueue.ordered, false))
    ON CONFLICT (id) DO NOTHING;
    RETURN job_id;
END
$$;
