-- Reservations: the application's own tables (PostgreSQL), in the schema
-- `reservations` of the same database as Errand's schema `errand`, so a hold
-- and its expiry job commit in one transaction. Times are the server's.

CREATE TABLE reservations.units (
    id   text NOT NULL PRIMARY KEY,
    name text NOT NULL
);

-- A reservation is a hold on a unit until `hold_until` (the business
-- deadline, kept at millisecond precision so it round-trips through the job
-- payload exactly). It ends exactly once: paid, cancelled or expired; the
-- CHECKs make "both paid and expired" unrepresentable.
CREATE TABLE reservations.reservations (
    id           text        NOT NULL PRIMARY KEY,
    unit_id      text        NOT NULL REFERENCES reservations.units (id),
    guest        text        NOT NULL CHECK (length(guest) BETWEEN 1 AND 200),
    status       text        NOT NULL CHECK (status IN ('held', 'paid', 'expired', 'cancelled')),
    hold_until   timestamptz NOT NULL CHECK (hold_until = date_trunc('milliseconds', hold_until)),
    generation   integer     NOT NULL CHECK (generation >= 1),
    created_at   timestamptz NOT NULL,
    paid_at      timestamptz,
    cancelled_at timestamptz,
    expired_at   timestamptz,
    CHECK ((status = 'paid') = (paid_at IS NOT NULL)),
    CHECK ((status = 'cancelled') = (cancelled_at IS NOT NULL)),
    CHECK ((status = 'expired') = (expired_at IS NOT NULL))
);

CREATE INDEX reservations_by_status ON reservations.reservations (status, hold_until);

-- Every expiry that happened, keyed by its idempotency key (see the SQLite
-- migration for the reasoning).
CREATE TABLE reservations.expirations (
    idempotency_key text        NOT NULL PRIMARY KEY,
    reservation_id  text        NOT NULL REFERENCES reservations.reservations (id),
    job_id          text        NOT NULL,
    attempt         integer     NOT NULL CHECK (attempt >= 1),
    hold_until      timestamptz NOT NULL,
    expired_at      timestamptz NOT NULL,
    lateness_ms     bigint      NOT NULL
);

CREATE INDEX expirations_by_reservation ON reservations.expirations (reservation_id);

CREATE TABLE reservations.expiry_outcomes (
    id              bigserial   NOT NULL PRIMARY KEY,
    job_id          text        NOT NULL,
    attempt         integer     NOT NULL CHECK (attempt >= 1),
    replays         integer     NOT NULL CHECK (replays >= 0),
    reservation_id  text        NOT NULL,
    idempotency_key text        NOT NULL,
    outcome         text        NOT NULL CHECK (outcome IN ('expired', 'already-done', 'changed')),
    detail          text,
    at              timestamptz NOT NULL
);

CREATE TABLE reservations.replay_audit (
    job_id     text        NOT NULL,
    replay_no  integer     NOT NULL CHECK (replay_no >= 1),
    operator   text        NOT NULL,
    reason     text,
    old_key    text        NOT NULL,
    new_key    text,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, replay_no)
);
