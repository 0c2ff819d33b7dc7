-- The signals sent to job $1, oldest first, with their payloads' sizes.
SELECT s.seq, s.name, s.sent_at, s.delivered_at,
       coalesce(octet_length(s.payload::text), 0)::bigint AS payload_bytes
FROM __SCHEMA__.errand_signals s
WHERE s.job_id = $1::text
ORDER BY s.seq
