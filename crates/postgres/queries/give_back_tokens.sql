-- Gives $2 unspent tokens back to bucket $1 (never beyond $3): a
-- rate-limited claim that took more tokens than it found due jobs returns
-- the rest in its own transaction (which holds the bucket's row since it
-- took them), so only claimed jobs spend tokens.
UPDATE __SCHEMA__.errand_rate_limits
SET tokens = least($3::float8, tokens + $2::int)
WHERE name = $1
