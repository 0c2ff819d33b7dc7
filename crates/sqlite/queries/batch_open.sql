-- Starts the batch :id unless it exists.
INSERT INTO errand_batches (id, created_at) VALUES (:id, :now)
ON CONFLICT (id) DO NOTHING
