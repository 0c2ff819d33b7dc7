-- One audit entry per job in :ids (a JSON array), in the array's order.
-- :copies, for a copy, is a JSON array of the new ids beside them (else
-- NULL).
INSERT INTO errand_audit (job_id, queue, action, operator, reason, at, copy_id)
SELECT j.id, j.queue, :action, :operator, :reason, :now, json_extract(:copies, '$[' || i.key || ']')
FROM json_each(:ids) AS i JOIN errand_jobs AS j ON j.id = i.value
ORDER BY i.key
