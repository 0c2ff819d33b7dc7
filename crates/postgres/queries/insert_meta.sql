, described AS (
INSERT INTO __SCHEMA__.errand_job_meta (key, value, created_at, job_id)
SELECT m.key, m.value, ins.created_at, ins.id
FROM ins, jsonb_each_text(ins.meta) AS m (key, value)
WHERE ins.meta IS NOT NULL
)
