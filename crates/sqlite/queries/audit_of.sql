-- A job's audit entries: those about it, and the copy that made it.
SELECT seq, at, action, operator, reason, job_id, copy_id FROM errand_audit WHERE job_id = :id
UNION ALL
SELECT seq, at, action, operator, reason, job_id, copy_id FROM errand_audit WHERE copy_id = :id
ORDER BY seq
