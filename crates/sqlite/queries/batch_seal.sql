-- Seals the open batch :id, recording its callbacks.
UPDATE errand_batches
SET sealed_at = :now, on_success = :on_success, on_finish = :on_finish
WHERE id = :id AND sealed_at IS NULL
