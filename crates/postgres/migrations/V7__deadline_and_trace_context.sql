-- A job may carry a business deadline (lateness is measured against it
-- when it succeeds) and the W3C trace context of the request that enqueued
-- it (handed to every attempt's handler).
ALTER TABLE __SCHEMA__.errand_jobs
    ADD COLUMN deadline timestamptz,
    ADD COLUMN traceparent text
        CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
