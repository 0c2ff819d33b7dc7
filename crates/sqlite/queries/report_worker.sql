INSERT INTO errand_workers (id, host, pid, queues, started_at, last_cycle_at, metrics)
VALUES (:id, :host, :pid, :queues, :started_at, :now, :metrics)
ON CONFLICT (id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, queues = excluded.queues,
    started_at = excluded.started_at, last_cycle_at = excluded.last_cycle_at,
    metrics = excluded.metrics
