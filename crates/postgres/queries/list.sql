-- $1 state, $2 queue, $3 kind, $4 error text, $5 since, $6 before, $7 limit,
-- $8 the id the page starts after (keyset pagination on created_at, id).
--
-- One member per state, each a range scan of errand_jobs_state
-- (state, created_at, id) that stops after $7 rows, merged and cut to $7:
-- a page costs about $7 index entries per state instead of a scan and sort
-- of the whole table (docs/dashboard.md). Running jobs are left out of that
-- index (a claim would write an entry per attempt); they are few, at most
-- the workers' slots, and their member reads the lease index and sorts. A member whose state is not $1 is
-- skipped by its one-time filter. The cursor is a row comparison the index
-- can seek to; without $8 it starts below every row, and a $8 that names no
-- job makes the page empty (the caller then reports the vanished cursor).
SELECT * FROM (
  (SELECT * FROM __SCHEMA__.errand_jobs
   WHERE state = 'blocked' AND coalesce($1::text, 'blocked') = 'blocked'
     AND ($2::text IS NULL OR queue = $2::text)
     AND ($3::text IS NULL OR kind = $3::text)
     AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
     AND ($5::timestamptz IS NULL OR updated_at >= $5)
     AND ($6::timestamptz IS NULL OR updated_at < $6)
     AND (created_at, id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                      CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                             coalesce($8::text, ''))
   ORDER BY created_at, id
   LIMIT $7)
  UNION ALL
  (SELECT * FROM __SCHEMA__.errand_jobs
   WHERE state = 'waiting' AND coalesce($1::text, 'waiting') = 'waiting'
     AND ($2::text IS NULL OR queue = $2::text)
     AND ($3::text IS NULL OR kind = $3::text)
     AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
     AND ($5::timestamptz IS NULL OR updated_at >= $5)
     AND ($6::timestamptz IS NULL OR updated_at < $6)
     AND (created_at, id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                      CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                             coalesce($8::text, ''))
   ORDER BY created_at, id
   LIMIT $7)
  UNION ALL
  (SELECT * FROM __SCHEMA__.errand_jobs
   WHERE state = 'ready' AND coalesce($1::text, 'ready') = 'ready'
     AND ($2::text IS NULL OR queue = $2::text)
     AND ($3::text IS NULL OR kind = $3::text)
     AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
     AND ($5::timestamptz IS NULL OR updated_at >= $5)
     AND ($6::timestamptz IS NULL OR updated_at < $6)
     AND (created_at, id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                      CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                             coalesce($8::text, ''))
   ORDER BY created_at, id
   LIMIT $7)
  UNION ALL
  (SELECT * FROM __SCHEMA__.errand_jobs
   WHERE state = 'running' AND coalesce($1::text, 'running') = 'running'
     AND ($2::text IS NULL OR queue = $2::text)
     AND ($3::text IS NULL OR kind = $3::text)
     AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
     AND ($5::timestamptz IS NULL OR updated_at >= $5)
     AND ($6::timestamptz IS NULL OR updated_at < $6)
     AND (created_at, id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                      CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                             coalesce($8::text, ''))
   ORDER BY created_at, id
   LIMIT $7)
  UNION ALL
  (SELECT * FROM __SCHEMA__.errand_jobs
   WHERE state = 'done' AND coalesce($1::text, 'done') = 'done'
     AND ($2::text IS NULL OR queue = $2::text)
     AND ($3::text IS NULL OR kind = $3::text)
     AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
     AND ($5::timestamptz IS NULL OR updated_at >= $5)
     AND ($6::timestamptz IS NULL OR updated_at < $6)
     AND (created_at, id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                      CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                             coalesce($8::text, ''))
   ORDER BY created_at, id
   LIMIT $7)
  UNION ALL
  (SELECT * FROM __SCHEMA__.errand_jobs
   WHERE state = 'dead' AND coalesce($1::text, 'dead') = 'dead'
     AND ($2::text IS NULL OR queue = $2::text)
     AND ($3::text IS NULL OR kind = $3::text)
     AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
     AND ($5::timestamptz IS NULL OR updated_at >= $5)
     AND ($6::timestamptz IS NULL OR updated_at < $6)
     AND (created_at, id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                      CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                             coalesce($8::text, ''))
   ORDER BY created_at, id
   LIMIT $7)
  UNION ALL
  (SELECT * FROM __SCHEMA__.errand_jobs
   WHERE state = 'cancelled' AND coalesce($1::text, 'cancelled') = 'cancelled'
     AND ($2::text IS NULL OR queue = $2::text)
     AND ($3::text IS NULL OR kind = $3::text)
     AND ($4::text IS NULL OR strpos(last_error, $4) > 0)
     AND ($5::timestamptz IS NULL OR updated_at >= $5)
     AND ($6::timestamptz IS NULL OR updated_at < $6)
     AND (created_at, id) > (coalesce((SELECT created_at FROM __SCHEMA__.errand_jobs WHERE id = $8::text),
                                      CASE WHEN $8::text IS NULL THEN '-infinity'::timestamptz END),
                             coalesce($8::text, ''))
   ORDER BY created_at, id
   LIMIT $7)
) AS page
ORDER BY created_at, id
LIMIT $7
