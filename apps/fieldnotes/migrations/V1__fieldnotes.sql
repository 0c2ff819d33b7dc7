-- Field Notes: the application's own tables. They live in the same SQLite
-- file as Errand's `errand_*` tables, so a payment and its receipt job can
-- commit in one transaction. Times are integer milliseconds since the Unix
-- epoch (UTC), like Errand's.

-- The demo author and the simulated wallet. A negative balance is refused by
-- the schema itself, as a last line of defence behind the payment check.
CREATE TABLE authors (
    id            TEXT    NOT NULL PRIMARY KEY,
    name          TEXT    NOT NULL,
    balance_cents INTEGER NOT NULL CHECK (balance_cents >= 0)
) STRICT;

-- Documents for sale. A document is published by exactly one payment.
CREATE TABLE documents (
    id           TEXT    NOT NULL PRIMARY KEY,
    author_id    TEXT    NOT NULL REFERENCES authors (id),
    title        TEXT    NOT NULL,
    price_cents  INTEGER NOT NULL CHECK (price_cents > 0),
    published_at INTEGER,
    payment_id   TEXT UNIQUE,
    CHECK ((published_at IS NULL) = (payment_id IS NULL))
) STRICT;

-- Payments. The receipt job of a payment has the payment's id. One payment
-- per document, enforced by the unique key.
CREATE TABLE payments (
    id           TEXT    NOT NULL PRIMARY KEY,
    author_id    TEXT    NOT NULL REFERENCES authors (id),
    document_id  TEXT    NOT NULL UNIQUE REFERENCES documents (id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    created_at   INTEGER NOT NULL
) STRICT;

-- The fake receipt sink. Keyed by the job id and written with
-- INSERT OR IGNORE, so a repeated delivery of the same job is a no-op.
-- `attempt` records which attempt delivered it first.
CREATE TABLE receipts (
    job_id       TEXT    NOT NULL PRIMARY KEY,
    payment_id   TEXT    NOT NULL REFERENCES payments (id),
    document_id  TEXT    NOT NULL,
    amount_cents INTEGER NOT NULL,
    attempt      INTEGER NOT NULL CHECK (attempt >= 1),
    created_at   INTEGER NOT NULL
) STRICT;

-- Idempotency-Key → the first answer given to a POST /payments carrying it.
-- Written in the same transaction as the payment it answers.
CREATE TABLE idempotency_keys (
    key         TEXT    NOT NULL PRIMARY KEY,
    document_id TEXT    NOT NULL,
    status      INTEGER NOT NULL CHECK (status BETWEEN 200 AND 599),
    body        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
) STRICT;
