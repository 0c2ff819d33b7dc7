-- Seals the open batch $1, recording its callbacks $3 (on success) and $4
-- (on finish). $2 now.
UPDATE __SCHEMA__.errand_batches
SET sealed_at = coalesce($2::timestamptz, now()), on_success = $3::text, on_finish = $4::text
WHERE id = $1::text AND sealed_at IS NULL
