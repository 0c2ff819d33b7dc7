-- Fenced acknowledgment of many jobs in one statement: each row still
-- requires running, its own token and an unexpired lease. :leases is a JSON
-- array of [id, token] pairs with distinct ids. (`+state` keeps the
-- planner from scanning every running job through an index on state.)
UPDATE errand_jobs
SET state            = 'done',
    lease_token      = NULL,
    lease_until      = NULL,
    last_error       = NULL,
    last_error_class = NULL,
    finished_at      = :now,
    updated_at       = :now
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token
      FROM json_each(:leases)) AS i
WHERE errand_jobs.id = i.id
  AND +errand_jobs.state = 'running'
  AND errand_jobs.lease_token = i.token
  AND errand_jobs.lease_until > :lease_now
RETURNING id, has_dependents
