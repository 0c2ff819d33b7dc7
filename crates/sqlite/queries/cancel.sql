-- Operator cancel of every job in :ids (a JSON array of distinct ids). The
-- caller has checked, in the same transaction, that every one is in one of
-- :states (a JSON array of the states CancelRequest::ACCEPTS names), and
-- has closed the running ones' attempts (cancel_attempts.sql).
UPDATE errand_jobs
SET state            = 'cancelled',
    lease_token      = NULL,
    lease_until      = NULL,
    await_signal     = NULL,
    await_until      = NULL,
    on_await_timeout = NULL,
    last_error_class = 'cancelled',
    last_error       = 'cancelled by ' || :operator,
    finished_at      = :now,
    updated_at       = :now
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN (SELECT value FROM json_each(:states))
RETURNING *
