-- The state of each stored job among :ids (a JSON array): the
-- dependencies of jobs being inserted. An id with no row is not stored.
SELECT id, state FROM errand_jobs WHERE id IN (SELECT value FROM json_each(:ids))
