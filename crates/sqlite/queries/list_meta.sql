-- The jobs carrying the metadata entry :key = :value that match the other
-- filters, oldest first (created_at, then id), one page after the job
-- :after: a range scan of errand_job_meta for that entry, each row's job
-- read by key, so the cost follows the jobs carrying the entry, not the
-- table. (A search with several entries reads one here and checks the
-- rest on the jobs read.) As in list.sql, an :after that names no job
-- makes the page empty.
SELECT j.* FROM errand_job_meta m CROSS JOIN errand_jobs j ON j.id = m.job_id
WHERE m.key = :key AND m.value = :value
  AND (:state IS NULL OR j.state = :state)
  AND (:queue IS NULL OR j.queue = :queue)
  AND (:kind IS NULL OR j.kind = :kind)
  AND (:error IS NULL OR instr(j.last_error, :error) > 0)
  AND (:since IS NULL OR j.updated_at >= :since)
  AND (:before IS NULL OR j.updated_at < :before)
  AND (m.created_at, m.job_id) > (coalesce((SELECT created_at FROM errand_jobs WHERE id = :after),
                                     CASE WHEN :after IS NULL THEN -9223372036854775808 END),
                            coalesce(:after, ''))
ORDER BY m.created_at, m.job_id
LIMIT :limit
