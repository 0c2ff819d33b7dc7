-- The dependency edges of jobs just inserted: $1 jobs, $2 the jobs they
-- depend on, $3 each edge's position in its job's list, $4 whether it is
-- met (its dependency is already done).
INSERT INTO __SCHEMA__.errand_dependencies (job_id, depends_on, position, met)
SELECT * FROM unnest($1::text[], $2::text[], $3::int4[], $4::bool[])
