-- Periodic schedules stored in the database: every running service reads
-- them and enqueues one job per tick (`cron:NAME:TICK`), so adding one
-- needs no deploy. Each change is audited, which needs two more things of
-- the audit log: the schedule actions, and a column naming the schedule.
-- Every row reads back as a schedule: the names follow the library's rule
-- (1-100 letters, digits and -_.: starting with a letter or digit), the
-- payload is JSON (kept as the text given), the misfire policy one the
-- library knows.
CREATE TABLE __SCHEMA__.errand_schedules (
    name          text        NOT NULL PRIMARY KEY
        CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'),
    cron          text        NOT NULL CHECK (length(cron) BETWEEN 1 AND 200),
    kind          text        NOT NULL CHECK (kind ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'),
    queue         text        NOT NULL CHECK (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'),
    payload       text        NOT NULL CHECK (payload::jsonb IS NOT NULL),
    max_attempts  integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    misfire       text        NOT NULL CHECK (CASE
        WHEN misfire ~ '^backfill:[1-9][0-9]{0,3}$' THEN substr(misfire, 10)::integer <= 1000
        ELSE misfire IN ('skip', 'once') END),
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    -- Ticks before this are never enqueued: when the schedule was added,
    -- replaced or last resumed.
    active_since  timestamptz NOT NULL,
    paused_at     timestamptz,
    paused_by     text,
    paused_reason text,
    CHECK ((paused_at IS NULL) = (paused_by IS NULL)),
    CHECK (paused_at IS NOT NULL OR paused_reason IS NULL)
);

ALTER TABLE __SCHEMA__.errand_audit
    ADD COLUMN schedule text,
    DROP CONSTRAINT errand_audit_action_check,
    ADD CONSTRAINT errand_audit_action_check
        CHECK (action IN ('replay', 'copy', 'cancel', 'purge', 'reschedule', 'pause', 'resume',
                          'schedule_add', 'schedule_replace', 'schedule_remove',
                          'schedule_pause', 'schedule_resume')),
    -- Job actions name their job; queue and schedule actions name no job.
    DROP CONSTRAINT errand_audit_target,
    ADD CONSTRAINT errand_audit_target
        CHECK ((job_id IS NULL) = (action IN ('pause', 'resume') OR action LIKE 'schedule\_%')),
    -- A schedule's action, and only one, names its schedule.
    ADD CONSTRAINT errand_audit_schedule
        CHECK ((schedule IS NOT NULL) = (action LIKE 'schedule\_%'));

-- A schedule's history.
CREATE INDEX errand_audit_schedule ON __SCHEMA__.errand_audit (schedule, seq)
    WHERE schedule IS NOT NULL;
