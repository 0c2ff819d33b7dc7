-- Stays: a reservation occupies its unit for the nights from `stay_from` up
-- to, not including, `stay_to` (dates, UTC). A `held` or `paid` reservation
-- occupies its nights; an `expired` or `cancelled` one does not. A hold
-- whose deadline passed stays `held`, and occupies its nights, until its
-- expiry job expires it.
--
-- Existing reservations get the stay a hold meant before stays existed:
-- the night of the day they were made (UTC). `reservations init` refuses to
-- migrate a database in which two held or paid reservations of one unit
-- were made on the same day (a double booking to resolve first).
--
-- The exclusion constraint needs btree_gist (for `unit_id WITH =` in a GiST
-- index), shipped with PostgreSQL's contrib modules.
CREATE EXTENSION IF NOT EXISTS btree_gist;

ALTER TABLE reservations.reservations
    ADD COLUMN stay_from date,
    ADD COLUMN stay_to date;

UPDATE reservations.reservations
SET stay_from = (created_at AT TIME ZONE 'UTC')::date,
    stay_to = (created_at AT TIME ZONE 'UTC')::date + 1;

-- No two held or paid reservations of one unit share a night, whoever
-- writes the row: the backstop of the application's own check, and what
-- decides between two concurrent holds (the second waits for the first to
-- commit, then fails with SQLSTATE 23P01).
ALTER TABLE reservations.reservations
    ALTER COLUMN stay_from SET NOT NULL,
    ALTER COLUMN stay_to SET NOT NULL,
    ADD CONSTRAINT reservations_stay_nights CHECK (stay_to > stay_from),
    ADD CONSTRAINT reservations_no_overlap
        EXCLUDE USING gist (unit_id WITH =, daterange(stay_from, stay_to) WITH &&)
        WHERE (status IN ('held', 'paid'));

-- `stats --check --max-lateness` reads the expiries of a recent window.
CREATE INDEX expirations_by_time ON reservations.expirations (expired_at);
