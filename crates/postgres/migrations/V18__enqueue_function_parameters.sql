-- The SQL enqueue function catches up with the library: a delay instead of
-- a time, a business deadline, a W3C trace context, an elapsed-time budget
-- (give up after), unique jobs (judged by an explicit key, for a period or
-- while a job with the key is in given states) and tags. Every new
-- parameter is trailing and defaults to NULL, so every call that worked
-- before means the same now.
--
-- The unique look-up serializes with the library's own unique enqueues:
-- it takes the same transaction-scoped advisory lock on the key
-- (hashtextextended(key, 7266140), as queries/unique_lock.sql), then looks
-- for the newest job with the key in a fresh snapshot, so a library
-- enqueue and an SQL one of the same key never both create a job.
DROP FUNCTION __SCHEMA__.enqueue(text, jsonb, text, text, timestamptz, integer, integer, text, integer, boolean);

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
    tags          text[]      DEFAULT NULL
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
            WHERE s IS NULL OR s NOT IN ('blocked', 'ready', 'running', 'done', 'dead', 'cancelled') LIMIT 1;
            IF FOUND THEN
                RAISE EXCEPTION 'errand.enqueue: unique_while state % is not a job state', coalesce(quote_literal(bad), 'NULL')
                    USING ERRCODE = '22023', HINT = 'use blocked, ready, running, done, dead or cancelled';
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
         deadline, traceparent, give_up_at, unique_key, tags)
    VALUES
        (new_id, enqueue.queue, enqueue.kind, 'ready', enqueue.payload, enqueue.priority, 0,
         enqueue.max_attempts, 0, due, now(), now(),
         enqueue.key, lim, coalesce(enqueue.ordered, false),
         enqueue.deadline, enqueue.traceparent, now() + enqueue.give_up_after, enqueue.unique_key,
         CASE WHEN cardinality(enqueue.tags) > 0 THEN to_jsonb(enqueue.tags) END)
    ON CONFLICT (id) DO NOTHING;
    IF FOUND AND cardinality(enqueue.tags) > 0 THEN
        INSERT INTO __SCHEMA__.errand_job_tags (tag, created_at, job_id)
        SELECT t, now(), new_id FROM unnest(enqueue.tags) AS t;
    END IF;
    RETURN new_id;
END
$$;
