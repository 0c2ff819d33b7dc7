-- Operator reschedule of every job in :ids (a JSON array of distinct ids):
-- a new due time and/or priority (NULL keeps the job's own). The caller
-- has checked that every one is in one of :states (a JSON array of the
-- states RescheduleRequest::ACCEPTS names).
UPDATE errand_jobs
SET available_at = coalesce(:available_at, available_at),
    priority     = coalesce(:priority, priority),
    updated_at   = :now
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN (SELECT value FROM json_each(:states))
RETURNING *
