-- An audit entry: $1 now, $2 job id (NULL for a queue's or a schedule's
-- action), $3 queue, $4 action, $5 operator, $6 reason, $7 the new job of a
-- copy (else NULL), $8 the schedule of a schedule's action (else NULL).
INSERT INTO __SCHEMA__.errand_audit (job_id, queue, action, operator, reason, at, copy_id, schedule)
VALUES ($2, $3, $4::text, $5, $6, coalesce($1::timestamptz, now()), $7, $8)
