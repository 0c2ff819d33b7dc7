-- A job may carry a business deadline (lateness is measured against it
-- when it succeeds) and the W3C trace context of the request that enqueued
-- it (handed to every attempt's handler).
ALTER TABLE errand_jobs ADD COLUMN deadline INTEGER;
ALTER TABLE errand_jobs ADD COLUMN traceparent TEXT
    CHECK (traceparent IS NULL OR (length(traceparent) = 55
        AND traceparent GLOB '00-[0-9a-f]*-[0-9a-f]*-[0-9a-f][0-9a-f]'));
