-- The dependency edges of jobs just inserted: :edges is a JSON array of
-- [job, dependency, position, met] (met: the dependency is already done).
INSERT INTO errand_dependencies (job_id, depends_on, position, met)
SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3 FROM json_each(:edges)
