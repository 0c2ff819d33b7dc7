-- Stays: a reservation occupies its unit for the nights from `stay_from` up
-- to, not including, `stay_to` (ISO dates, UTC). A `held` or `paid`
-- reservation occupies its nights; an `expired` or `cancelled` one does not.
-- A hold whose deadline passed stays `held`, and occupies its nights, until
-- its expiry job expires it.
--
-- Existing reservations get the stay a hold meant before stays existed:
-- the night of the day they were made (UTC). `reservations init` refuses to
-- migrate a database in which two held or paid reservations of one unit
-- were made on the same day (a double booking to resolve first).
ALTER TABLE reservations ADD COLUMN stay_from TEXT NOT NULL DEFAULT '1970-01-01'
    CHECK (stay_from = date(stay_from, '+0 days'));
ALTER TABLE reservations ADD COLUMN stay_to TEXT NOT NULL DEFAULT '1970-01-02'
    CHECK (stay_to = date(stay_to, '+0 days') AND stay_to > stay_from);

UPDATE reservations
SET stay_from = date(created_at / 1000, 'unixepoch'),
    stay_to = date(created_at / 1000, 'unixepoch', '+1 day');

CREATE INDEX reservations_by_unit_stay ON reservations (unit_id, stay_from);

-- The backstop of the application's own check (made inside the same
-- BEGIN IMMEDIATE transaction as the write): no two held or paid
-- reservations of one unit share a night, whoever writes the row.
CREATE TRIGGER reservations_no_overlap_insert
BEFORE INSERT ON reservations
WHEN NEW.status IN ('held', 'paid')
BEGIN
    SELECT RAISE(ABORT, 'the stay overlaps a live hold or a paid booking of the same unit')
    WHERE EXISTS (
        SELECT 1 FROM reservations r
        WHERE r.unit_id = NEW.unit_id
          AND r.status IN ('held', 'paid')
          AND r.stay_from < NEW.stay_to
          AND NEW.stay_from < r.stay_to
    );
END;

CREATE TRIGGER reservations_no_overlap_update
BEFORE UPDATE OF unit_id, status, stay_from, stay_to ON reservations
WHEN NEW.status IN ('held', 'paid')
BEGIN
    SELECT RAISE(ABORT, 'the stay overlaps a live hold or a paid booking of the same unit')
    WHERE EXISTS (
        SELECT 1 FROM reservations r
        WHERE r.unit_id = NEW.unit_id
          AND r.id <> OLD.id
          AND r.status IN ('held', 'paid')
          AND r.stay_from < NEW.stay_to
          AND NEW.stay_from < r.stay_to
    );
END;

-- `stats --check --max-lateness` reads the expiries of a recent window.
CREATE INDEX expirations_by_time ON expirations (expired_at);
