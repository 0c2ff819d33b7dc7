-- The signal that ended job :id's latest wait (its signal_seq), with its
-- payload.
SELECT s.name, s.payload, s.sent_at
FROM errand_jobs j
JOIN errand_signals s ON s.seq = j.signal_seq AND s.job_id = j.id
WHERE j.id = :id
