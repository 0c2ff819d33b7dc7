INSERT INTO errand_audit (job_id, queue, action, operator, reason, at)
VALUES (:id, :queue, :action, :operator, :reason, :now)
