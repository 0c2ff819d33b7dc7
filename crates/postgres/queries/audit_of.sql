SELECT at, action, operator, reason FROM __SCHEMA__.errand_audit WHERE job_id = $1 ORDER BY seq
