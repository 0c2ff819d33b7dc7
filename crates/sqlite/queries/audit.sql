INSERT INTO errand_audit (job_id, queue, action, operator, reason, at, copy_id, schedule)
VALUES (:id, :queue, :action, :operator, :reason, :now, :copy, :schedule)
