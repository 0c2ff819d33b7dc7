-- Takes up to $3 tokens from bucket $2 (rate $4 per second, at most $5),
-- refilled for the time since its last use: one statement; concurrent
-- takers serialize on the bucket's row. A new bucket starts full.
WITH t AS (SELECT coalesce($1::timestamptz, now()) AS now)
INSERT INTO __SCHEMA__.errand_rate_limits AS b (name, tokens, last_granted, updated_at)
SELECT $2, $5::float8 - least($3::int, $5::float8::int), least($3::int, $5::float8::int), t.now FROM t
ON CONFLICT (name) DO UPDATE SET
    last_granted = least($3::int, floor(least($5::float8, b.tokens
        + greatest(0, extract(epoch FROM (excluded.updated_at - b.updated_at))) * $4::float8))::int),
    tokens = least($5::float8, b.tokens
        + greatest(0, extract(epoch FROM (excluded.updated_at - b.updated_at))) * $4::float8)
        - least($3::int, floor(least($5::float8, b.tokens
        + greatest(0, extract(epoch FROM (excluded.updated_at - b.updated_at))) * $4::float8))::int),
    updated_at = greatest(b.updated_at, excluded.updated_at)
RETURNING last_granted
