-- The steps of one workflow that match the other filters, oldest first
-- (created_at, then id), one page after the job :after: a range scan of
-- errand_jobs_workflow, however large the table. As in list.sql, an
-- :after that names no job makes the page empty.
SELECT * FROM errand_jobs INDEXED BY errand_jobs_workflow
WHERE workflow = :workflow
  AND (:state IS NULL OR state = :state)
  AND (:queue IS NULL OR queue = :queue)
  AND (:kind IS NULL OR kind = :kind)
  AND (:error IS NULL OR instr(last_error, :error) > 0)
  AND (:since IS NULL OR updated_at >= :since)
  AND (:before IS NULL OR updated_at < :before)
  AND (created_at, id) > (coalesce((SELECT created_at FROM errand_jobs WHERE id = :after),
                                     CASE WHEN :after IS NULL THEN -9223372036854775808 END),
                            coalesce(:after, ''))
ORDER BY created_at, id
LIMIT :limit
