-- d1: today's schema, but done jobs leave the listing index.
DROP INDEX d1.errand_jobs_state;
CREATE INDEX errand_jobs_state ON d1.errand_jobs (state, created_at, id) WHERE state NOT IN ('running', 'done');
