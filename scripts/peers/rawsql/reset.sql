-- A fresh backlog of :jobs available jobs, vacuumed and checkpointed.
TRUNCATE floor_jobs RESTART IDENTITY;
INSERT INTO floor_jobs (payload) SELECT jsonb_build_object('n', i) FROM generate_series(1, :jobs) i;
VACUUM ANALYZE floor_jobs;
CHECKPOINT;
