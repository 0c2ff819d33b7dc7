-- The metadata rows of jobs just inserted: :rows is a JSON array of
-- [job id, key, value] triples; :now is their creation time (the order
-- of a search by metadata).
INSERT INTO errand_job_meta (key, value, created_at, job_id)
SELECT json_extract(value, '$[1]'), json_extract(value, '$[2]'), :now, json_extract(value, '$[0]')
FROM json_each(:rows)
WHERE true
ON CONFLICT DO NOTHING
