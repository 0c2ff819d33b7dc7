-- The end of both release statements (release.sql, release_done.sql),
-- appended to each when the queries are loaded: it follows their
-- `changed` CTE, which returns each changed job's state and queue.
-- Idle workers wake as for an insert: one notification per queue with a
-- released job, on the channel '<schema>.errand_jobs', sent at commit.
woken AS (
    SELECT pg_notify(n.nspname || '.errand_jobs', r.queue)
    FROM (SELECT DISTINCT queue FROM changed WHERE state = 'ready') r,
         pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = '__SCHEMA__.errand_jobs'::regclass
)
SELECT (SELECT count(*) FROM changed WHERE state = 'ready') AS ready,
       (SELECT count(*) FROM woken) AS notified
