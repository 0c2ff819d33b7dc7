-- The signals sent to job :id, oldest first, with their payloads' sizes.
SELECT seq, name, sent_at, delivered_at, coalesce(length(CAST(payload AS BLOB)), 0)
FROM errand_signals
WHERE job_id = :id
ORDER BY seq
