-- One pgbench transaction: claim up to 100 due jobs, then complete them:
-- two statements, two commits per 100 jobs.
WITH claimed AS (
    UPDATE floor_jobs SET state = 'running', attempt = attempt + 1, started_at = now()
    WHERE id IN (SELECT id FROM floor_jobs
                 WHERE state = 'available' AND queue = 'default' AND run_at <= now()
                 ORDER BY priority, run_at, id
                 LIMIT 100
                 FOR UPDATE SKIP LOCKED)
    RETURNING id)
SELECT coalesce(array_agg(id), '{}') AS ids FROM claimed \gset
UPDATE floor_jobs SET state = 'done', finished_at = now() WHERE id = ANY (':ids'::bigint[]);
