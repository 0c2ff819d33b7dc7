INSERT INTO errand_audit (job_id, action, operator, reason, at)
VALUES (:id, :action, :operator, :reason, :now)
