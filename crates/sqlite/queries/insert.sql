-- Inserts a job unless one with the same id exists (then nothing changes).
-- (A job with tags, dependencies or a batch goes through insert_many.sql.)
INSERT INTO errand_jobs
    (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
     max_lease_expiries, give_up_at, available_at, created_at, updated_at,
     key_name, key_limit, key_ordered, deadline, traceparent, workflow, meta, unique_key)
VALUES
    (:id, :queue, :kind, 'ready', :payload, :priority, 0, :max_attempts, 0,
     :max_lease_expiries, :give_up_at, :available_at, :now, :now,
     :key_name, :key_limit, :key_ordered, :deadline, :traceparent, :workflow, :meta, :unique_key)
ON CONFLICT (id) DO NOTHING
RETURNING *
