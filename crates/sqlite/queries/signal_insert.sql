-- Records a signal: delivered at :delivered_at, or kept (NULL) for a later
-- wait of the job.
INSERT INTO errand_signals (seq, job_id, name, payload, sent_at, delivered_at)
VALUES (:seq, :id, :name, :payload, :now, :delivered_at)
