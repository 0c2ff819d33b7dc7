-- Names are validated in the schema too, so rows written by SQL (the
-- enqueue function, an application's own INSERT) obey the same rules.
ALTER TABLE __SCHEMA__.errand_jobs
    ADD CONSTRAINT errand_jobs_names CHECK (
        queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'
        AND kind ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'
        AND id ~ '^[A-Za-z0-9_.:@/+=-]{1,200}$'
    );

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

-- Enqueue from SQL: triggers, and programs in any language, inside their
-- own transaction. Same rules as the Rust API; returns the job id. An
-- existing id returns that id and creates nothing.
--   SELECT errand.enqueue('receipt', '{"payment": "p-1"}', id => 'p-1');
CREATE FUNCTION __SCHEMA__.enqueue(
    kind         text,
    payload      jsonb       DEFAULT '{}',
    queue        text        DEFAULT 'default',
    id           text        DEFAULT NULL,
    run_at       timestamptz DEFAULT NULL,
    max_attempts integer     DEFAULT 25,
    priority     integer     DEFAULT 0
) RETURNS text
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    job_id text := coalesce(enqueue.id, gen_random_uuid()::text);
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
    INSERT INTO __SCHEMA__.errand_jobs
        (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
         available_at, created_at, updated_at)
    VALUES
        (job_id, enqueue.queue, enqueue.kind, 'ready', enqueue.payload, enqueue.priority, 0,
         enqueue.max_attempts, 0, coalesce(enqueue.run_at, now()), now(), now())
    ON CONFLICT (id) DO NOTHING;
    RETURN job_id;
END
$$;
