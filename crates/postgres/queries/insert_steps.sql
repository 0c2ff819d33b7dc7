-- Appended, with the final `SELECT * FROM ins`, to `WITH ins AS (…)`
-- around insert.sql or insert_many.sql for jobs enqueued as workflow steps
-- (see `side_rows` in queries.rs): each new step's row in errand_workflow_steps is written
-- by the same statement as the job. Only jobs the insert created are in
-- `ins`, so a step that already existed gets no second row.
, stepped AS (
INSERT INTO __SCHEMA__.errand_workflow_steps (workflow, created_at, job_id)
SELECT ins.workflow, ins.created_at, ins.id
FROM ins
WHERE ins.workflow IS NOT NULL
)
