WITH j AS (
    INSERT INTO __S__.errand_jobs (id, queue, kind, state, payload, priority, attempts, max_attempts, available_at, created_at, updated_at)
    SELECT 'j' || lpad(nextval('public.idseq')::text, 12, '0'), 'default', 'noop', 'ready', '{}', 0, 0, 25, now(), now(), now()
    FROM generate_series(1, 5000) ON CONFLICT (id) DO NOTHING
    RETURNING seq, queue, priority, available_at)
INSERT INTO __S__.due (seq, queue, priority, available_at) SELECT seq, queue, priority, available_at FROM j;
