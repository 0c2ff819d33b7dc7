-- $1 state, $2 queue, $3 kind, $4 error text, $5 since, $6 before, $7 limit,
-- $8 the id the page starts after (keyset pagination on created_at, id).
SELECT * FROM __SCHEMA__.errand_jobs
WHERE ($1::text IS NULL OR state = $1)
  AND ($2::text IS NULL OR queue = $2)
  AND ($3::text IS NULL OR kind = $3)
  AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
  AND ($5::timestamptz IS NULL OR updated_at >= $5)
  AND ($6::timestamptz IS NULL OR updated_at < $6)
  AND ($8::text IS NULL OR (created_at, id) >
       ((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8), $8))
ORDER BY created_at, id
LIMIT $7
