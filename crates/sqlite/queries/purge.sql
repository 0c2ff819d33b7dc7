-- Operator purge of every job in :ids (a JSON array of distinct ids); the
-- attempt history goes with them (ON DELETE CASCADE). The caller has
-- checked that every one is in one of :states (a JSON array of the states
-- PurgeRequest::ACCEPTS names) and written the audit entries first.
DELETE FROM errand_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN (SELECT value FROM json_each(:states))
RETURNING id
