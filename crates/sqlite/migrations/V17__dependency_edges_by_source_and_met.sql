-- The index a settlement reads a job's dependents through holds whether
-- each edge is met, so a release (release.sql) reads the unmet edges out
-- of each job that ended as one range of this index and never visits the
-- edge table itself. Readers that want every edge of a dependency
-- (listing its dependents, marking a pruned job's edges met) read the
-- `depends_on` prefix as before. Marking an edge met now moves its entry
-- here too; only failures and pruning do that.
DROP INDEX errand_dependencies_of;
CREATE INDEX errand_dependencies_of ON errand_dependencies (depends_on, met, job_id);
