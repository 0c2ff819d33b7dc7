SELECT * FROM errand_jobs
WHERE (:state IS NULL OR state = :state)
  AND (:queue IS NULL OR queue = :queue)
  AND (:kind IS NULL OR kind = :kind)
  AND (:error IS NULL OR instr(last_error, :error) > 0)
  AND (:since IS NULL OR updated_at >= :since)
  AND (:before IS NULL OR updated_at < :before)
  AND (:after IS NULL OR (created_at, id) >
       ((SELECT created_at FROM errand_jobs WHERE id = :after), :after))
ORDER BY created_at, id
LIMIT :limit
