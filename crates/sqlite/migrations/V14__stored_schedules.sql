-- Periodic schedules stored in the database: every running service reads
-- them and enqueues one job per tick (`cron:NAME:TICK`), so adding one
-- needs no deploy. Each change is audited, which needs two more things of
-- the audit log: the schedule actions, and a column naming the schedule.
-- Every row reads back as a schedule: the names follow the library's rule
-- (1-100 letters, digits and -_.: starting with a letter or digit), the
-- payload is JSON, the misfire policy one the library knows.
CREATE TABLE errand_schedules (
    name          TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 100
        AND name GLOB '[A-Za-z0-9]*' AND name NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    cron          TEXT    NOT NULL CHECK (length(cron) BETWEEN 1 AND 200),
    kind          TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 100
        AND kind GLOB '[A-Za-z0-9]*' AND kind NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    queue         TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 100
        AND queue GLOB '[A-Za-z0-9]*' AND queue NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    payload       TEXT    NOT NULL CHECK (json_valid(payload)),
    max_attempts  INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    misfire       TEXT    NOT NULL CHECK (misfire IN ('skip', 'once')
        OR (misfire GLOB 'backfill:[1-9]*' AND misfire NOT GLOB 'backfill:*[^0-9]*'
            AND length(misfire) <= 13 AND CAST(substr(misfire, 10) AS INTEGER) <= 1000)),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    -- Ticks before this are never enqueued: when the schedule was added,
    -- replaced or last resumed.
    active_since  INTEGER NOT NULL,
    paused_at     INTEGER,
    paused_by     TEXT,
    paused_reason TEXT,
    CHECK ((paused_at IS NULL) = (paused_by IS NULL)),
    CHECK (paused_at IS NOT NULL OR paused_reason IS NULL)
) STRICT;

-- SQLite cannot change a CHECK, so the audit table is rebuilt; its entries
-- keep their sequence numbers.
CREATE TABLE errand_audit_v14 (
    seq      INTEGER PRIMARY KEY,
    job_id   TEXT,
    queue    TEXT,
    action   TEXT    NOT NULL
        CHECK (action IN ('replay', 'copy', 'cancel', 'purge', 'reschedule', 'pause', 'resume',
                          'schedule_add', 'schedule_replace', 'schedule_remove',
                          'schedule_pause', 'schedule_resume')),
    operator TEXT    NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason   TEXT,
    at       INTEGER NOT NULL,
    -- For a copy: the new job (the original is job_id).
    copy_id  TEXT,
    -- For a schedule's action: the schedule.
    schedule TEXT,
    -- Job actions name their job; queue and schedule actions name no job.
    CHECK ((job_id IS NULL) = (action IN ('pause', 'resume') OR action GLOB 'schedule_*')),
    CHECK (action NOT IN ('pause', 'resume') OR queue IS NOT NULL),
    -- A schedule's action, and only one, names its schedule.
    CHECK ((schedule IS NOT NULL) = (action GLOB 'schedule_*')),
    -- A purge cannot be undone: it says why.
    CHECK (action <> 'purge' OR length(reason) > 0),
    -- A copy, and only a copy, names the new job, which is another job.
    CHECK ((copy_id IS NOT NULL) = (action = 'copy')),
    CHECK (copy_id IS NULL OR copy_id <> job_id)
) STRICT;

INSERT INTO errand_audit_v14 (seq, job_id, queue, action, operator, reason, at, copy_id)
SELECT seq, job_id, queue, action, operator, reason, at, copy_id FROM errand_audit;

DROP TABLE errand_audit;
ALTER TABLE errand_audit_v14 RENAME TO errand_audit;
CREATE INDEX errand_audit_job ON errand_audit (job_id, seq);
CREATE INDEX errand_audit_queue ON errand_audit (queue, seq);
-- A copy's own history finds the entry that made it.
CREATE INDEX errand_audit_copy ON errand_audit (copy_id, seq) WHERE copy_id IS NOT NULL;
-- A schedule's history.
CREATE INDEX errand_audit_schedule ON errand_audit (schedule, seq) WHERE schedule IS NOT NULL;
