-- Takes up to :want tokens from bucket :name (rate :rate per second, at
-- most :burst), refilled for the time since its last use: one statement.
-- A new bucket starts full.
INSERT INTO errand_rate_limits (name, tokens, last_granted, updated_at)
VALUES (:name, :burst - min(:want, :burst), min(:want, :burst), :now)
ON CONFLICT (name) DO UPDATE SET
    last_granted = min(:want, CAST(min(:burst, tokens + max(0, :now - updated_at) / 1000.0 * :rate) AS INTEGER)),
    tokens = min(:burst, tokens + max(0, :now - updated_at) / 1000.0 * :rate)
             - min(:want, CAST(min(:burst, tokens + max(0, :now - updated_at) / 1000.0 * :rate) AS INTEGER)),
    updated_at = max(updated_at, :now)
RETURNING last_granted
