-- An operator may move a waiting job to a new due time or priority; the
-- audit log records it as a `reschedule`.
ALTER TABLE __SCHEMA__.errand_audit
    DROP CONSTRAINT errand_audit_action_check,
    ADD CONSTRAINT errand_audit_action_check
        CHECK (action IN ('replay', 'copy', 'cancel', 'purge', 'reschedule', 'pause', 'resume'));
