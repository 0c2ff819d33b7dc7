-- Per-minute counts behind the dashboard's charts. Workers add what they
-- settled (finished, dead, retries by class, lateness and wait buckets)
-- per queue and minute every few seconds; a running service samples each
-- queue's depth and oldest due age once a minute. One row per queue,
-- minute and series: what this holds grows with queues and minutes, never
-- with jobs, and minutes older than two days are deleted.
CREATE TABLE __SCHEMA__.errand_minutes (
    queue  __SCHEMA__.errand_name NOT NULL,
    -- Minutes since the Unix epoch.
    minute bigint NOT NULL,
    series text   COLLATE "C" NOT NULL CHECK (series ~ '^[a-z][a-z0-9_.]{0,39}$'),
    value  bigint NOT NULL CHECK (value >= 0),
    PRIMARY KEY (queue, minute, series)
);

-- Every queue's minutes of a window (covering, for index-only scans), and
-- pruning. One queue's minutes are a range of the primary key.
CREATE INDEX errand_minutes_by_minute ON __SCHEMA__.errand_minutes (minute, series)
    INCLUDE (value);
