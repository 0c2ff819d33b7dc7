-- Starts the batch $1 unless it exists. $2 now.
INSERT INTO __SCHEMA__.errand_batches (id, created_at)
VALUES ($1::text, coalesce($2::timestamptz, now()))
ON CONFLICT (id) DO NOTHING
