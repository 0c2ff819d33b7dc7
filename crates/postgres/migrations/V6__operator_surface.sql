-- The operator's surface: paused queues, a wider audit log, workers'
-- reports, and an index for the statistics' recent window.

-- A queue listed here is paused: claims take nothing from it (claim.sql)
-- until an operator resumes it.
CREATE TABLE __SCHEMA__.errand_paused_queues (
    queue     text        NOT NULL PRIMARY KEY,
    operator  text        NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason    text,
    paused_at timestamptz NOT NULL
);

-- The audit log now records purges (the job is gone, its entries stay) and
-- a queue's pause and resume (no job).
ALTER TABLE __SCHEMA__.errand_audit
    ADD COLUMN queue text,
    ALTER COLUMN job_id DROP NOT NULL,
    DROP CONSTRAINT errand_audit_action_check,
    ADD CONSTRAINT errand_audit_action_check
        CHECK (action IN ('replay', 'cancel', 'purge', 'pause', 'resume')),
    -- Job actions name their job; queue actions name their queue and no job.
    ADD CONSTRAINT errand_audit_target CHECK ((job_id IS NULL) = (action IN ('pause', 'resume'))),
    ADD CONSTRAINT errand_audit_queue_action CHECK (action NOT IN ('pause', 'resume') OR queue IS NOT NULL),
    -- A purge cannot be undone: it says why.
    ADD CONSTRAINT errand_audit_purge_reason CHECK (action <> 'purge' OR length(reason) > 0);

UPDATE __SCHEMA__.errand_audit a SET queue = j.queue
FROM __SCHEMA__.errand_jobs j WHERE j.id = a.job_id;

CREATE INDEX errand_audit_queue ON __SCHEMA__.errand_audit (queue, seq);

-- Each worker process reports itself every few seconds: its last completed
-- claim cycle and its cumulative counters, summed by /metrics.
CREATE TABLE __SCHEMA__.errand_workers (
    id            text        NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    host          text        NOT NULL,
    pid           bigint      NOT NULL,
    queues        jsonb       NOT NULL,
    started_at    timestamptz NOT NULL,
    last_cycle_at timestamptz NOT NULL,
    metrics       jsonb       NOT NULL
);

-- Attempts that ended recently, for retries and dead letters by class.
CREATE INDEX errand_attempts_finished ON __SCHEMA__.errand_attempts (finished_at)
    WHERE finished_at IS NOT NULL;
