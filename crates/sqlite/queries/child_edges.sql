-- Children added at run time (:children, a JSON array in order) join the
-- dependencies of the step's waiting dependents (:dependents, a JSON
-- array): an unmet edge from each dependent to each child, placed after
-- the dependencies it already has. (child_counts.sql raises their counts.)
WITH tops AS MATERIALIZED (
    SELECT d.value AS id,
           (SELECT max(e.position) FROM errand_dependencies e WHERE e.job_id = d.value) AS top
    FROM json_each(:dependents) d
)
INSERT INTO errand_dependencies (job_id, depends_on, position, met)
SELECT t.id, c.value, t.top + c.key + 1, 0
FROM tops t, json_each(:children) c
