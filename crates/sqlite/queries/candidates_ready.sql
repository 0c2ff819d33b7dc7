-- Due ready jobs in every queue that is neither paused nor capped
-- (capped queues are read on their own: candidates_ready_of.sql), highest
-- priority first, then oldest due.
-- Read until the claim has enough: keyed jobs are admitted in Rust (see
-- key_running.sql and key_next.sql), so a saturated key's backlog is
-- passed over without a statement per row.
SELECT id, queue, key_name, key_limit, key_ordered, rowid FROM errand_jobs INDEXED BY errand_jobs_due
WHERE state = 'ready'
  AND available_at <= :now
  AND queue NOT IN (SELECT queue FROM errand_paused_queues)
  AND queue NOT IN (SELECT queue FROM errand_queue_limits)
ORDER BY priority DESC, available_at, id
