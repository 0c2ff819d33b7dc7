-- Gives :n unspent tokens back to bucket :name (never beyond :burst): a
-- rate-limited claim that took more tokens than it found due jobs returns
-- the rest in its own transaction, so only claimed jobs spend tokens.
UPDATE errand_rate_limits SET tokens = min(:burst, tokens + :n) WHERE name = :name
