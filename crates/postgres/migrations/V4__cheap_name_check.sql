-- The name check of V2, rewritten so it costs next to nothing.
--
-- PostgreSQL evaluates every CHECK constraint of a row on every UPDATE,
-- whichever columns changed, and its regex engine turns a bounded
-- repetition such as {0,99} into that many copies of the pattern's states:
-- the V2 form took about 25 microseconds a row, on every claim and every
-- acknowledgment, most of the CPU of a burn-down. An unbounded pattern
-- plus a length bound accepts exactly the same names (the patterns admit
-- only ASCII, so characters are bytes) and is as cheap as the other checks.
ALTER TABLE __SCHEMA__.errand_jobs DROP CONSTRAINT errand_jobs_names;

ALTER TABLE __SCHEMA__.errand_jobs
    ADD CONSTRAINT errand_jobs_names CHECK (
        length(queue) <= 100 AND queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
        AND length(kind) <= 100 AND kind ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
        AND length(id) <= 200 AND id ~ '^[A-Za-z0-9_.:@/+=-]+$'
    );
