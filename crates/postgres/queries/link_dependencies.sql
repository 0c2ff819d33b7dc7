-- The dependency edges of jobs just inserted: $1 jobs, $2 the jobs they
-- depend on, $3 each edge's position in its job's list.
INSERT INTO __SCHEMA__.errand_dependencies (job_id, depends_on, position)
SELECT * FROM unnest($1::text[], $2::text[], $3::int4[])
