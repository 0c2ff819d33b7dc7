-- A copy's first step: locks the originals in $1 (distinct ids) in id
-- order, so a replay or purge of one waits for the copy, and counts those
-- still in a state a copy accepts ($2, CopyRequest::ACCEPTS); the copy
-- goes ahead only when all are.
SELECT count(*) FILTER (WHERE state = ANY ($2::text[])) AS qualify
FROM (SELECT j.state FROM __SCHEMA__.errand_jobs j
      WHERE j.id = ANY($1::text[]) ORDER BY j.id FOR UPDATE) locked
