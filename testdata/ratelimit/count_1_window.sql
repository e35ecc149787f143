WITH w0 AS (INSERT INTO rate_limit_counters (key, window_start, count, expires_at) SELECT $1::text, $2::bigint, 1, $3::bigint ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_counters.count + 1 RETURNING count),
async AS (SELECT set_config('synchronous_commit', 'off', true))
SELECT COALESCE((SELECT count FROM w0), (SELECT count FROM rate_limit_counters WHERE key = $1::text AND window_start = $2::bigint), 0) FROM async
