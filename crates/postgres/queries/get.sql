SELECT * FROM __SCHEMA__.errand_jobs WHERE id = $1::text
