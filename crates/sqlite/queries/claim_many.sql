-- Claims many due jobs without a concurrency key in one statement (keyed
-- and expired-lease candidates take claim.sql, one at a time). The
-- conditions are claim.sql's for such a job; each claimed job gets its own
-- fresh 128-bit token from SQLite's randomness (ChaCha20, seeded by the
-- operating system), as LeaseToken::generate would make it. :ids is a JSON
-- array of the candidates' rowids (read by the candidate scan in this same
-- write transaction), so each row is one search of the table's B-tree.
-- (`+state` keeps the planner from answering the IN list by scanning every
-- ready job through an index on state.)
UPDATE errand_jobs
SET state              = 'running',
    attempts           = attempts + 1,
    lease_token        = lower(hex(randomblob(16))),
    lease_until        = :lease_until,
    attempt_started_at = :now,
    updated_at         = :now
WHERE rowid IN (SELECT value FROM json_each(:ids))
  AND key_name IS NULL
  AND +state = 'ready'
  AND available_at <= :now
  AND attempts < max_attempts
RETURNING *
