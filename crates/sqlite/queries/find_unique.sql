-- The job that stands in for a unique enqueue: the newest with the key
-- :key created after :after (when given), in one of the states :states (a
-- JSON array; any when NULL), and, when :unstarted, waiting to start
-- (ready with no attempt in this cycle). Ties go to the greatest id.
SELECT * FROM errand_jobs INDEXED BY errand_jobs_unique
WHERE unique_key = :key
  AND (:after IS NULL OR created_at > :after)
  AND (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
  AND (:unstarted = 0 OR (state = 'ready' AND attempts = 0))
ORDER BY created_at DESC, id DESC
LIMIT 1
