-- The signal that ended job $1's latest wait (its signal_seq), with its
-- payload.
SELECT s.name, s.payload, s.sent_at
FROM __SCHEMA__.errand_jobs j
JOIN __SCHEMA__.errand_signals s ON s.job_id = j.id AND s.seq = j.signal_seq
WHERE j.id = $1::text
