WITH j AS (
    INSERT INTO __S__.jobs (id, queue, kind, payload, created_at)
    SELECT 'j' || lpad(nextval('public.idseq')::text, 12, '0'), 'default', 'noop', '{}', now() FROM generate_series(1, 5000)
    ON CONFLICT (id) DO NOTHING
    RETURNING pk, queue, created_at)
INSERT INTO __S__.runs (pk, state, queue, priority, available_at, created_at, max_attempts, updated_at)
SELECT pk, 'ready', queue, 0, now(), created_at, 25, now() FROM j;
