-- A job's audit entries: those about it, and the copy that made it.
SELECT seq, at, action, operator, reason, job_id, copy_id FROM __SCHEMA__.errand_audit WHERE job_id = $1::text
UNION ALL
SELECT seq, at, action, operator, reason, job_id, copy_id FROM __SCHEMA__.errand_audit WHERE copy_id = $1::text
ORDER BY seq
