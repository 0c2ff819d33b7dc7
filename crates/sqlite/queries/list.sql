-- Jobs matching the filters, oldest first — by creation time, and jobs
-- created at the same instant in the order they were stored (rowid) — one
-- page after the job :after (keyset pagination).
--
-- The members (list_member.sql, joined with UNION ALL by reads.rs where
-- the placeholder below stands) are two per state but running: the rest
-- of the cursor's instant (created_at equal, rowid above the cursor's) and
-- the later instants. Each is a range scan of errand_jobs_state (state, created_at,
-- then rowid as every index's last key column) that stops after :limit
-- entries, so a page costs about :limit index entries per member instead
-- of a scan and sort of the whole table (1,000,000 rows: ~1 ms instead of
-- ~300 ms; docs/dashboard.md). SQLite seeks an index on `created_at = ?
-- AND rowid > ?` and on `created_at > ?`, not on the row value
-- `(created_at, rowid) > (?, ?)`, hence two members rather than one.
-- Running jobs are not in that index (it is partial, `state <> 'running'`,
-- which each other member repeats so that SQLite uses it); their one
-- member reads errand_jobs_leases, which holds only them, and sorts them:
-- at most the workers' slots. A member whose state is not :state is skipped by its
-- constant condition. Without :after the cursor starts below every row;
-- an :after that names no job leaves the cursor empty and the page empty
-- (the caller then reports the vanished cursor). The members return
-- places; each job is read once, by rowid, for the page.
WITH cursor (created_at, seq) AS (
  SELECT created_at, rowid FROM errand_jobs WHERE id = :after
  UNION ALL
  SELECT -9223372036854775808, -9223372036854775808 WHERE :after IS NULL
)
SELECT j.* FROM (
  $members
) AS m CROSS JOIN errand_jobs AS j ON j.rowid = m.seq
ORDER BY m.created_at, m.seq
LIMIT :limit
