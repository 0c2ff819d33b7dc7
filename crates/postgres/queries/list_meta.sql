-- The jobs carrying every metadata entry of $9 (a JSON object of strings)
-- that match the other filters, oldest first (created_at, then id), one
-- page after the job $8: the containment is read through errand_jobs_meta,
-- the GIN index of the jobs that carry metadata, so the cost follows the
-- jobs carrying those entries, not the table (they are then sorted: a
-- page of an entry carried by a million jobs reads all of them). $1 state,
-- $2 queue, $3 kind, $4 error text, $5 since, $6 before, $7 limit. As in
-- list.sql, a $8 that names no job makes the page empty.
SELECT * FROM __SCHEMA__.errand_jobs
WHERE meta @> $9::text::jsonb
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
