-- The steps of one workflow that match the other filters, oldest first
-- (created_at, then id), one page after the job $8: a range scan of
-- errand_jobs_workflow, however large the table. $1 state, $2 queue,
-- $3 kind, $4 error text, $5 since, $6 before, $7 limit, $8 the id the page
-- starts after, $9 the workflow. As in
-- list.sql, a $8 that names no job makes the page empty.
SELECT * FROM __SCHEMA__.errand_jobs
WHERE workflow = $9::text
  AND ($1::text IS NULL OR state = $1::text)
  AND ($2::text IS NULL OR queue = $2::text)
  AND ($3::text IS NULL OR kind = $3::text)
  AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
  AND ($5::timestamptz IS NULL OR updated_at >= $5)
  AND ($6::timestamptz IS NULL OR updated_at < $6)
  AND (created_at, id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                   CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                          coalesce($8::text, ''))
ORDER BY created_at, id
LIMIT $7
