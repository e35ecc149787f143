WITH c AS (SELECT count FROM rate_limit_counters WHERE key = $1::text AND window_start = $2::bigint FOR UPDATE),
i AS (INSERT INTO rate_limit_counters (key, window_start, count, expires_at) SELECT $1::text, $2::bigint, COALESCE(c.count + LEAST($4::bigint, GREATEST($5::bigint - c.count, 0)), LEAST($4::bigint, $5::bigint)), $3::bigint FROM (SELECT 1) one LEFT JOIN c ON true ON CONFLICT (key, window_start) DO UPDATE SET count = excluded.count WHERE EXISTS (SELECT 1 FROM c) AND excluded.count > rate_limit_counters.count RETURNING count),
async AS (SELECT set_config('synchronous_commit', 'off', true))
SELECT (SELECT count FROM c), (SELECT count FROM i), (SELECT count FROM rate_limit_counters WHERE key = $1::text AND window_start = $2::bigint) FROM async
