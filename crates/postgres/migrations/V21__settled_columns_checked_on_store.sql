-- Rules on columns no settlement changes are checked when a value is
-- stored, not at every row version.
--
-- A table CHECK is parsed again at every statement that writes the table
-- and evaluated for every row version it writes, so each claim,
-- acknowledgment and release paid for the rules of a job's batch,
-- workflow, unique key, concurrency key, attempt budgets, dependency
-- policy, tags and metadata, although none of them changes after the
-- insert (a sampling profile of a drain put the table's CHECK constraints
-- at 9-11% of the server's CPU). As in V10 for ids and names, these rules
-- move into domains, whose check runs only when a value is stored into
-- the column. The rules themselves are unchanged; the rules that tie
-- several columns together stay on the table. Changing the columns'
-- types rewrites errand_jobs once.

CREATE DOMAIN __SCHEMA__.errand_label AS text COLLATE "C"
    CHECK (length(VALUE) BETWEEN 1 AND 200);
CREATE DOMAIN __SCHEMA__.errand_unique_key AS text COLLATE "C"
    CHECK (length(VALUE) BETWEEN 1 AND 300);
CREATE DOMAIN __SCHEMA__.errand_key_limit AS integer
    CHECK (VALUE BETWEEN 1 AND 10000);
CREATE DOMAIN __SCHEMA__.errand_budget AS integer
    CHECK (VALUE BETWEEN 1 AND 1000);
CREATE DOMAIN __SCHEMA__.errand_dependency_policy AS text
    CHECK (VALUE IN ('wait', 'cancel', 'run'));
CREATE DOMAIN __SCHEMA__.errand_json_array AS jsonb
    CHECK (jsonb_typeof(VALUE) = 'array');
CREATE DOMAIN __SCHEMA__.errand_json_object AS jsonb
    CHECK (jsonb_typeof(VALUE) = 'object');

ALTER TABLE __SCHEMA__.errand_jobs
    DROP CONSTRAINT errand_jobs_batch_check,
    DROP CONSTRAINT errand_jobs_workflow_check,
    DROP CONSTRAINT errand_jobs_key_name_check,
    DROP CONSTRAINT errand_jobs_unique_key_check,
    DROP CONSTRAINT errand_jobs_key_limit_check,
    DROP CONSTRAINT errand_jobs_max_attempts_check,
    DROP CONSTRAINT errand_jobs_max_lease_expiries_check,
    DROP CONSTRAINT errand_jobs_on_dependency_failure_check,
    DROP CONSTRAINT errand_jobs_tags_check,
    DROP CONSTRAINT errand_jobs_meta_check,
    ALTER COLUMN batch TYPE __SCHEMA__.errand_label,
    ALTER COLUMN workflow TYPE __SCHEMA__.errand_label,
    ALTER COLUMN key_name TYPE __SCHEMA__.errand_label,
    ALTER COLUMN unique_key TYPE __SCHEMA__.errand_unique_key,
    ALTER COLUMN key_limit TYPE __SCHEMA__.errand_key_limit,
    ALTER COLUMN max_attempts TYPE __SCHEMA__.errand_budget,
    ALTER COLUMN max_lease_expiries TYPE __SCHEMA__.errand_budget,
    ALTER COLUMN on_dependency_failure TYPE __SCHEMA__.errand_dependency_policy,
    ALTER COLUMN tags TYPE __SCHEMA__.errand_json_array,
    ALTER COLUMN meta TYPE __SCHEMA__.errand_json_object;
