-- The dependencies $1 of jobs being inserted, locked in id order and
-- marked as having dependents, with their state. Locking each row makes a
-- settlement of it either finish first (this reads its ended state and
-- the caller releases the new jobs at once) or wait for this transaction
-- (and then see the new edges). An id with no row is not stored.
WITH locked AS (
    SELECT j.id FROM __SCHEMA__.errand_jobs j
    WHERE j.id = ANY($1::text[]) ORDER BY j.id FOR UPDATE
)
UPDATE __SCHEMA__.errand_jobs j
SET has_dependents = true
FROM locked l
WHERE j.id = l.id
RETURNING j.id, j.state
