SELECT * FROM errand_jobs WHERE id = :id
