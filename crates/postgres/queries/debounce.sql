-- A debounced enqueue met its waiting twin $1: it is pushed to $2 and
-- takes the new payload $3, while it still waits to start. $4 now.
UPDATE __SCHEMA__.errand_jobs
SET available_at = $2::timestamptz, payload = $3::text::json,
    updated_at = coalesce($4::timestamptz, now())
WHERE id = $1::text AND state = 'ready' AND attempts = 0
RETURNING *
