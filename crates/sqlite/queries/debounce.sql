-- A debounced enqueue met its waiting twin :id: it is pushed to :at and
-- takes the new payload, while it still waits to start.
UPDATE errand_jobs
SET available_at = :at, payload = :payload, updated_at = :now
WHERE id = :id AND state = 'ready' AND attempts = 0
RETURNING *
