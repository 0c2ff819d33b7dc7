-- `replay --new-key` copies a dead or cancelled job under a new id; the
-- audit log records it as a `copy` of the original naming the new job.
ALTER TABLE __SCHEMA__.errand_audit
    ADD COLUMN copy_id text,
    DROP CONSTRAINT errand_audit_action_check,
    ADD CONSTRAINT errand_audit_action_check
        CHECK (action IN ('replay', 'copy', 'cancel', 'purge', 'pause', 'resume')),
    -- A copy, and only a copy, names the new job, which is another job.
    ADD CONSTRAINT errand_audit_copy CHECK ((copy_id IS NOT NULL) = (action = 'copy')),
    ADD CONSTRAINT errand_audit_copy_other CHECK (copy_id IS NULL OR copy_id <> job_id);

-- A copy's own history finds the entry that made it.
CREATE INDEX errand_audit_copy ON __SCHEMA__.errand_audit (copy_id, seq)
    WHERE copy_id IS NOT NULL;
