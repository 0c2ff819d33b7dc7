-- A worker's report: $1 now, $2 id, $3 host, $4 pid, $5 queues (json),
-- $6 started_at, $7 metrics (json). Workers silent for a day are forgotten.
WITH up AS (
    INSERT INTO __SCHEMA__.errand_workers (id, host, pid, queues, started_at, last_cycle_at, metrics)
    VALUES ($2, $3, $4, $5::text::jsonb, $6, coalesce($1::timestamptz, now()), $7::text::jsonb)
    ON CONFLICT (id) DO UPDATE SET
        host = excluded.host, pid = excluded.pid, queues = excluded.queues,
        started_at = excluded.started_at, last_cycle_at = excluded.last_cycle_at,
        metrics = excluded.metrics
)
DELETE FROM __SCHEMA__.errand_workers
WHERE last_cycle_at < coalesce($1::timestamptz, now()) - interval '1 day' AND id <> $2::text
