-- Jobs matching the filters, oldest first (created_at, then id), one page
-- after the job :after (keyset pagination).
--
-- One member per state, each a range scan of errand_jobs_state
-- (state, created_at, id) that stops after :limit rows, merged and cut to
-- :limit: a page costs about :limit index entries per state instead of a
-- scan and sort of the whole table (1,000,000 rows: ~1 ms instead of
-- ~300 ms; docs/dashboard.md). Running jobs are not in that index (it is
-- partial, `state <> 'running'`, which each member repeats so that SQLite
-- uses it); their member reads errand_jobs_leases, which holds only them,
-- and sorts them: at most the workers' slots. A member whose state is not :state is
-- skipped by its constant condition. The cursor is a row-value range the
-- index can seek to; without :after it starts below every row, and an
-- :after that names no job makes the page empty (the caller then reports
-- the vanished cursor).
SELECT * FROM (
  SELECT * FROM (
    SELECT * FROM errand_jobs
    WHERE state = 'blocked' AND state <> 'running' AND coalesce(:state, 'blocked') = 'blocked'
      AND (:queue IS NULL OR queue = :queue)
      AND (:kind IS NULL OR kind = :kind)
      AND (:error IS NULL OR instr(last_error, :error) > 0)
      AND (:since IS NULL OR updated_at >= :since)
      AND (:before IS NULL OR updated_at < :before)
      AND (created_at, id) > (coalesce((SELECT created_at FROM errand_jobs WHERE id = :after),
                                       CASE WHEN :after IS NULL THEN -9223372036854775808 END),
                              coalesce(:after, ''))
    ORDER BY created_at, id
    LIMIT :limit)
  UNION ALL
  SELECT * FROM (
    SELECT * FROM errand_jobs
    WHERE state = 'ready' AND state <> 'running' AND coalesce(:state, 'ready') = 'ready'
      AND (:queue IS NULL OR queue = :queue)
      AND (:kind IS NULL OR kind = :kind)
      AND (:error IS NULL OR instr(last_error, :error) > 0)
      AND (:since IS NULL OR updated_at >= :since)
      AND (:before IS NULL OR updated_at < :before)
      AND (created_at, id) > (coalesce((SELECT created_at FROM errand_jobs WHERE id = :after),
                                       CASE WHEN :after IS NULL THEN -9223372036854775808 END),
                              coalesce(:after, ''))
    ORDER BY created_at, id
    LIMIT :limit)
  UNION ALL
  SELECT * FROM (
    SELECT * FROM errand_jobs
    WHERE state = 'running' AND coalesce(:state, 'running') = 'running'
      AND (:queue IS NULL OR queue = :queue)
      AND (:kind IS NULL OR kind = :kind)
      AND (:error IS NULL OR instr(last_error, :error) > 0)
      AND (:since IS NULL OR updated_at >= :since)
      AND (:before IS NULL OR updated_at < :before)
      AND (created_at, id) > (coalesce((SELECT created_at FROM errand_jobs WHERE id = :after),
                                       CASE WHEN :after IS NULL THEN -9223372036854775808 END),
                              coalesce(:after, ''))
    ORDER BY created_at, id
    LIMIT :limit)
  UNION ALL
  SELECT * FROM (
    SELECT * FROM errand_jobs
    WHERE state = 'done' AND state <> 'running' AND coalesce(:state, 'done') = 'done'
      AND (:queue IS NULL OR queue = :queue)
      AND (:kind IS NULL OR kind = :kind)
      AND (:error IS NULL OR instr(last_error, :error) > 0)
      AND (:since IS NULL OR updated_at >= :since)
      AND (:before IS NULL OR updated_at < :before)
      AND (created_at, id) > (coalesce((SELECT created_at FROM errand_jobs WHERE id = :after),
                                       CASE WHEN :after IS NULL THEN -9223372036854775808 END),
                              coalesce(:after, ''))
    ORDER BY created_at, id
    LIMIT :limit)
  UNION ALL
  SELECT * FROM (
    SELECT * FROM errand_jobs
    WHERE state = 'dead' AND state <> 'running' AND coalesce(:state, 'dead') = 'dead'
      AND (:queue IS NULL OR queue = :queue)
      AND (:kind IS NULL OR kind = :kind)
      AND (:error IS NULL OR instr(last_error, :error) > 0)
      AND (:since IS NULL OR updated_at >= :since)
      AND (:before IS NULL OR updated_at < :before)
      AND (created_at, id) > (coalesce((SELECT created_at FROM errand_jobs WHERE id = :after),
                                       CASE WHEN :after IS NULL THEN -9223372036854775808 END),
                              coalesce(:after, ''))
    ORDER BY created_at, id
    LIMIT :limit)
  UNION ALL
  SELECT * FROM (
    SELECT * FROM errand_jobs
    WHERE state = 'cancelled' AND state <> 'running' AND coalesce(:state, 'cancelled') = 'cancelled'
      AND (:queue IS NULL OR queue = :queue)
      AND (:kind IS NULL OR kind = :kind)
      AND (:error IS NULL OR instr(last_error, :error) > 0)
      AND (:since IS NULL OR updated_at >= :since)
      AND (:before IS NULL OR updated_at < :before)
      AND (created_at, id) > (coalesce((SELECT created_at FROM errand_jobs WHERE id = :after),
                                       CASE WHEN :after IS NULL THEN -9223372036854775808 END),
                              coalesce(:after, ''))
    ORDER BY created_at, id
    LIMIT :limit)
)
ORDER BY created_at, id
LIMIT :limit
