-- The jobs carrying the metadata entry $9 = $10 that match the other
-- filters, oldest first (created_at, then id), one page after the job $8:
-- a range scan of errand_job_meta for that entry, each row's job read by
-- key, so the cost follows the jobs carrying the entry, not the table. (A
-- search with several entries reads one here and checks the rest on the
-- jobs read.) $1 state, $2 queue, $3 kind, $4 error text, $5 since,
-- $6 before, $7 limit. As in list.sql, a $8 that names no job makes the
-- page empty.
SELECT j.* FROM __SCHEMA__.errand_job_meta m
JOIN LATERAL (SELECT * FROM __SCHEMA__.errand_jobs WHERE id = m.job_id OFFSET 0) j ON true
WHERE m.key = $9::text AND m.value = $10::text
  AND ($1::text IS NULL OR j.state = $1::text)
  AND ($2::text IS NULL OR j.queue = $2::text)
  AND ($3::text IS NULL OR j.kind = $3::text)
  AND ($4::text IS NULL OR strpos(j.last_error, $4) > 0)
  AND ($5::timestamptz IS NULL OR j.updated_at >= $5)
  AND ($6::timestamptz IS NULL OR j.updated_at < $6)
  AND (m.created_at, m.job_id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                           CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                                  coalesce($8::text, ''))
ORDER BY m.created_at, m.job_id
LIMIT $7
