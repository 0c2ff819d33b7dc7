-- The index a settlement reads a job's dependents through holds whether
-- each edge is met, so releasing the dependents of acknowledged jobs
-- (release.sql) reads the unmet edges out of each job as one range of this
-- index and never visits the edge table itself. Readers that want every
-- edge of a dependency (listing its dependents, marking edges met) read
-- the `depends_on` prefix as before.
DROP INDEX errand_dependencies_of;
CREATE INDEX errand_dependencies_of ON errand_dependencies (depends_on, met, job_id);
