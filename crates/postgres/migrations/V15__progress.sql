-- The latest progress a handler reported (JSON text: percent, message,
-- attempt), carried by its lease renewals.
ALTER TABLE __SCHEMA__.errand_jobs ADD COLUMN progress text;
