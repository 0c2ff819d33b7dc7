-- Whether some wait has timed out by :now (expire_waits.sql's look, on a
-- reader, so that a look that finds nothing takes no turn of the writer).
SELECT 1 FROM errand_jobs
WHERE state = 'waiting' AND await_until IS NOT NULL AND await_until <= :now
LIMIT 1
