-- The stored jobs among :ids (a JSON array), in no particular order.
SELECT * FROM errand_jobs WHERE id IN (SELECT value FROM json_each(:ids))
