SELECT at, action, operator, reason FROM errand_audit WHERE job_id = :id ORDER BY seq
