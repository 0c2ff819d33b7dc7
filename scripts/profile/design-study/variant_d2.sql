-- d2: today's schema without the lease index.
DROP INDEX d2.errand_jobs_leases;
