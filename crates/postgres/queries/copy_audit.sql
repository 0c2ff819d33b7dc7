-- A copy's audit entries: one per original in $2, naming the new job at
-- the same place in $3. $1 now, $4 operator, $5 reason.
INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at, copy_id)
SELECT j.id, j.queue, 'copy', $4, $5, coalesce($1::timestamptz, now()), c.copy_id
FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS c(job_id, copy_id, n)
JOIN __SCHEMA__.errand_jobs j ON j.id = c.job_id
ORDER BY c.n
