-- Fenced lease extension. $1 now, $2 id, $3 token, $4 lease in ms, $5 the
-- handler's latest progress (JSON text), or NULL to keep the last report;
-- stored with the attempt it belongs to (the job's, whatever the caller
-- said).
-- "Running" is implied by the token, not named: only a running job has one
-- (the table's CHECK). Named, it let the planner read the partial lease
-- index, whose entries of settled jobs are dead until vacuum, instead of
-- the primary key (`a_settlement_finds_its_job_by_primary_key` in src/schema_tests.rs).
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now)
UPDATE __SCHEMA__.errand_jobs j
SET lease_until = t.now + $4::bigint * interval '1 millisecond', updated_at = t.now,
    progress = coalesce(jsonb_set($5::text::jsonb, '{attempt}', to_jsonb(j.attempts))::text,
                        j.progress)
FROM t
WHERE j.id = $2::text AND j.lease_token = $3 AND j.lease_until > t.now
RETURNING j.lease_until
