-- Per-minute counts behind the dashboard's charts. Workers add what they
-- settled (finished, dead, retries by class, lateness and wait buckets)
-- per queue and minute every few seconds; a running service samples each
-- queue's depth and oldest due age once a minute. One row per queue,
-- minute and series: what this holds grows with queues and minutes, never
-- with jobs, and minutes older than two days are deleted.
CREATE TABLE errand_minutes (
    queue  TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 100
        AND queue GLOB '[A-Za-z0-9]*' AND queue NOT GLOB '*[^A-Za-z0-9_.:-]*'),
    -- Minutes since the Unix epoch.
    minute INTEGER NOT NULL,
    series TEXT    NOT NULL CHECK (length(series) BETWEEN 1 AND 40
        AND series GLOB '[a-z]*' AND series NOT GLOB '*[^a-z0-9_.]*'),
    value  INTEGER NOT NULL CHECK (value >= 0),
    PRIMARY KEY (queue, minute, series)
) WITHOUT ROWID;

-- Every queue's minutes of a window (covering: the read needs nothing
-- else), and pruning. One queue's minutes are a range of the primary key.
CREATE INDEX errand_minutes_by_minute ON errand_minutes (minute, series, value);
