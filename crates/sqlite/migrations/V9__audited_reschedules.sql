-- An operator may move a waiting job to a new due time or priority; the
-- audit log records it as a `reschedule`. SQLite cannot change a CHECK, so
-- the table is rebuilt; its entries keep their sequence numbers.
CREATE TABLE errand_audit_v9 (
    seq      INTEGER PRIMARY KEY,
    job_id   TEXT,
    queue    TEXT,
    action   TEXT    NOT NULL
        CHECK (action IN ('replay', 'copy', 'cancel', 'purge', 'reschedule', 'pause', 'resume')),
    operator TEXT    NOT NULL CHECK (length(operator) BETWEEN 1 AND 200),
    reason   TEXT,
    at       INTEGER NOT NULL,
    -- For a copy: the new job (the original is job_id).
    copy_id  TEXT,
    -- Job actions name their job; queue actions name their queue and no job.
    CHECK ((job_id IS NULL) = (action IN ('pause', 'resume'))),
    CHECK (action NOT IN ('pause', 'resume') OR queue IS NOT NULL),
    -- A purge cannot be undone: it says why.
    CHECK (action <> 'purge' OR length(reason) > 0),
    -- A copy, and only a copy, names the new job, which is another job.
    CHECK ((copy_id IS NOT NULL) = (action = 'copy')),
    CHECK (copy_id IS NULL OR copy_id <> job_id)
) STRICT;

INSERT INTO errand_audit_v9 (seq, job_id, queue, action, operator, reason, at, copy_id)
SELECT seq, job_id, queue, action, operator, reason, at, copy_id FROM errand_audit;

DROP TABLE errand_audit;
ALTER TABLE errand_audit_v9 RENAME TO errand_audit;
CREATE INDEX errand_audit_job ON errand_audit (job_id, seq);
CREATE INDEX errand_audit_queue ON errand_audit (queue, seq);
-- A copy's own history finds the entry that made it.
CREATE INDEX errand_audit_copy ON errand_audit (copy_id, seq) WHERE copy_id IS NOT NULL;
