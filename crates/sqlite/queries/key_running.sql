-- How many jobs of one key are running (expired leases included: they
-- hold their slot until reclaimed or swept).
SELECT count(*) FROM errand_jobs INDEXED BY errand_jobs_keys
WHERE queue = :queue AND key_name = :key AND state = 'running'
