-- Reservations: the application's own tables (SQLite). They live in the same
-- file as Errand's `errand_*` tables, so a hold and its expiry job commit in
-- one transaction. Times are integer milliseconds since the Unix epoch (UTC),
-- like Errand's.

-- Bookable units, seeded by `reservations init`.
CREATE TABLE units (
    id   TEXT NOT NULL PRIMARY KEY,
    name TEXT NOT NULL
) STRICT;

-- A reservation is a hold on a unit until `hold_until` (the business
-- deadline). It ends exactly once: paid, cancelled or expired. The CHECKs put
-- "never both paid and expired" into the schema itself: each terminal status
-- has its own timestamp, set if and only if the row is in that status.
-- `generation` counts the deadlines the hold has had (1, then +1 per extend);
-- each deadline has its own expiry job.
CREATE TABLE reservations (
    id           TEXT    NOT NULL PRIMARY KEY,
    unit_id      TEXT    NOT NULL REFERENCES units (id),
    guest        TEXT    NOT NULL CHECK (length(guest) BETWEEN 1 AND 200),
    status       TEXT    NOT NULL CHECK (status IN ('held', 'paid', 'expired', 'cancelled')),
    hold_until   INTEGER NOT NULL,
    generation   INTEGER NOT NULL CHECK (generation >= 1),
    created_at   INTEGER NOT NULL,
    paid_at      INTEGER,
    cancelled_at INTEGER,
    expired_at   INTEGER,
    CHECK ((status = 'paid') = (paid_at IS NOT NULL)),
    CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL)),
    CHECK ((status = 'expired') = (expired_at IS NOT NULL))
) STRICT;

CREATE INDEX reservations_by_status ON reservations (status, hold_until);

-- Every expiry that happened, keyed by the idempotency key of the expiry it
-- performed: a redelivered job finds its key here and reports `already-done`.
-- `lateness_ms` = expired_at - hold_until, recorded once, in the same
-- transaction as the transition.
CREATE TABLE expirations (
    idempotency_key TEXT    NOT NULL PRIMARY KEY,
    reservation_id  TEXT    NOT NULL REFERENCES reservations (id),
    job_id          TEXT    NOT NULL,
    attempt         INTEGER NOT NULL CHECK (attempt >= 1),
    hold_until      INTEGER NOT NULL,
    expired_at      INTEGER NOT NULL,
    lateness_ms     INTEGER NOT NULL
) STRICT;

CREATE INDEX expirations_by_reservation ON expirations (reservation_id);

-- What each run of the expiry handler concluded, written in the same
-- transaction as its decision (`stats` counts these).
CREATE TABLE expiry_outcomes (
    id              INTEGER NOT NULL PRIMARY KEY,
    job_id          TEXT    NOT NULL,
    attempt         INTEGER NOT NULL CHECK (attempt >= 1),
    replays         INTEGER NOT NULL CHECK (replays >= 0),
    reservation_id  TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    outcome         TEXT    NOT NULL CHECK (outcome IN ('expired', 'already-done', 'changed')),
    detail          TEXT,
    at              INTEGER NOT NULL
) STRICT;

-- The application's audit of replays: one row per replay cycle of a job
-- (`replay_no` = the job's `replays` after the replay). `new_key` is set when
-- the operator minted a new idempotency key (`--new-key --confirm-eligible`);
-- the handler uses the newest minted key of a job, else the payload's key.
CREATE TABLE replay_audit (
    job_id     TEXT    NOT NULL,
    replay_no  INTEGER NOT NULL CHECK (replay_no >= 1),
    operator   TEXT    NOT NULL,
    reason     TEXT,
    old_key    TEXT    NOT NULL,
    new_key    TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, replay_no)
) STRICT;
