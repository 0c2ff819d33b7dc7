-- Children added at run time by step $4 ($3, in order): each is marked as
-- added by the step, and they join the dependencies of the step's waiting
-- dependents ($2, locked by lock_step_dependents.sql; maybe none), at $1
-- (NULL: the server's clock): an unmet edge from each dependent to each
-- child, placed after the dependencies it already has, and its count of
-- unmet dependencies up by as many. With dependents, the children are
-- marked as having some, so their settlements release them. Returns how
-- many dependents now wait for the children.
WITH
t AS (SELECT coalesce($1::timestamptz, now()) AS now),
edges AS (
    INSERT INTO __SCHEMA__.errand_dependencies (job_id, depends_on, position, met)
    SELECT d.id, c.id, top.position + c.ord::integer, false
    FROM unnest($2::text[]) AS d (id)
    CROSS JOIN LATERAL (
        SELECT max(e.position) AS position FROM __SCHEMA__.errand_dependencies e
        WHERE e.job_id = d.id
    ) top
    CROSS JOIN unnest($3::text[]) WITH ORDINALITY AS c (id, ord)
),
counted AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET waiting_on = j.waiting_on + cardinality($3::text[]), updated_at = t.now
    FROM t
    WHERE j.id = ANY ($2::text[]) AND j.state = 'blocked'
    RETURNING j.id
),
marked AS (
    UPDATE __SCHEMA__.errand_jobs j
    SET added_by = $4::text,
        has_dependents = j.has_dependents OR cardinality($2::text[]) > 0
    WHERE j.id = ANY ($3::text[])
)
SELECT count(*) FROM counted
