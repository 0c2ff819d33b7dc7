-- The operator's surface: paused queues, a wider audit log, workers'
-- reports, and an index for the statistics' recent window.

-- A queue listed here is paused: claims take nothing from it (see
-- candidates_*.sql) until an operator resumes it.
CREATE TABLE errand_paused_queues (
    queue     TEXT    NOT NULL PRIMARY KEY,
    operator  TEXT    NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason    TEXT,
    paused_at INTEGER NOT NULL
) STRICT;

-- The audit log now records purges (the job is gone, its entries stay) and
-- a queue's pause and resume (no job). SQLite cannot change a CHECK, so the
-- table is rebuilt; its entries keep their sequence numbers.
CREATE TABLE errand_audit_v4 (
    seq      INTEGER PRIMARY KEY,
    job_id   TEXT,
    queue    TEXT,
    action   TEXT    NOT NULL
        CHECK (action IN ('replay', 'cancel', 'purge', 'pause', 'resume')),
    operator TEXT    NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason   TEXT,
    at       INTEGER NOT NULL,
    -- Job actions name their job; queue actions name their queue and no job.
    CHECK ((job_id IS NULL) = (action IN ('pause', 'resume'))),
    CHECK (action NOT IN ('pause', 'resume') OR queue IS NOT NULL),
    -- A purge cannot be undone: it says why.
    CHECK (action <> 'purge' OR length(reason) > 0)
) STRICT;

INSERT INTO errand_audit_v4 (seq, job_id, queue, action, operator, reason, at)
SELECT a.seq, a.job_id, (SELECT j.queue FROM errand_jobs j WHERE j.id = a.job_id),
       a.action, a.operator, a.reason, a.at
FROM errand_audit a;

DROP TABLE errand_audit;
ALTER TABLE errand_audit_v4 RENAME TO errand_audit;
CREATE INDEX errand_audit_job ON errand_audit (job_id, seq);
CREATE INDEX errand_audit_queue ON errand_audit (queue, seq);

-- Each worker process reports itself every few seconds: its last completed
-- claim cycle and its cumulative counters (JSON), summed by /metrics.
CREATE TABLE errand_workers (
    id            TEXT    NOT NULL PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 200),
    host          TEXT    NOT NULL,
    pid           INTEGER NOT NULL,
    queues        TEXT    NOT NULL CHECK (json_valid(queues)),
    started_at    INTEGER NOT NULL,
    last_cycle_at INTEGER NOT NULL,
    metrics       TEXT    NOT NULL CHECK (json_valid(metrics))
) STRICT;

-- Attempts that ended recently, for retries and dead letters by class.
CREATE INDEX errand_attempts_finished ON errand_attempts (finished_at)
    WHERE finished_at IS NOT NULL;
