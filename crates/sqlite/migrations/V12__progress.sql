-- The latest progress a handler reported (JSON text: percent, message,
-- attempt), carried by its lease renewals.
ALTER TABLE errand_jobs ADD COLUMN progress TEXT;
