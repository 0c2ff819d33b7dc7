-- The job that stands in for a unique enqueue: the newest with the key $1
-- created after $2 (when given), in one of the states $3 (any when NULL),
-- and, when $4, waiting to start (ready with no attempt in this cycle).
-- Ties go to the greatest id.
SELECT * FROM __SCHEMA__.errand_jobs
WHERE unique_key = $1::text
  AND ($2::timestamptz IS NULL OR created_at > $2)
  AND ($3::text[] IS NULL OR state = ANY ($3::text[]))
  AND (NOT $4::boolean OR (state = 'ready' AND attempts = 0))
ORDER BY created_at DESC, id DESC
LIMIT 1
