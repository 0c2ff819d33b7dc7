-- The oldest signal named :name kept for job :id, if any.
SELECT min(seq) FROM errand_signals
WHERE job_id = :id AND name = :name AND delivered_at IS NULL
