-- The tag rows of jobs just inserted: :rows is a JSON array of
-- [job id, tag] pairs; :now is their creation time (the listing's order).
INSERT INTO errand_job_tags (tag, created_at, job_id)
SELECT json_extract(value, '$[1]'), :now, json_extract(value, '$[0]')
FROM json_each(:rows)
WHERE true
ON CONFLICT DO NOTHING
