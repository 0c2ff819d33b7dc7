SELECT * FROM __SCHEMA__.errand_jobs WHERE id = ANY ($1::text[])
