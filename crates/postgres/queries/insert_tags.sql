-- Appended, with insert_steps.sql and the final `SELECT * FROM ins`, to
-- `WITH ins AS (insert_many.sql)` for jobs with tags or a workflow (see
-- `side_rows` in queries.rs): the tag rows of the jobs created go in by the same statement
-- as the jobs, so a job and its tags are written together in or out of a
-- transaction; the statement answers with the jobs, as insert_many.sql.
, tagged AS (
INSERT INTO __SCHEMA__.errand_job_tags (tag, created_at, job_id)
SELECT t.tag, ins.created_at, ins.id
FROM ins, jsonb_array_elements_text(ins.tags) AS t (tag)
WHERE ins.tags IS NOT NULL
)
