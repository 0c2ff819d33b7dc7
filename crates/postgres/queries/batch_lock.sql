-- Locks the batch $1 until the transaction ends: jobs joining it and its
-- seal run one after another.
SELECT 1 FROM __SCHEMA__.errand_batches WHERE id = $1::text FOR UPDATE
