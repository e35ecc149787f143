WITH a AS (SELECT $1::text AS id),
c0 AS (SELECT r.count FROM rate_limit_counters r, a WHERE $4::bigint > 0 AND r.key = 'ip:' || a.id::text || ':minute' AND r.window_start = $2::bigint FOR UPDATE OF r),
i0 AS (INSERT INTO rate_limit_counters (key, window_start, count, expires_at) SELECT 'ip:' || a.id::text || ':minute', $2::bigint, COALESCE(c.count + LEAST($4::bigint, GREATEST(($5::bigint) - c.count, 0)), LEAST($4::bigint, $5::bigint)), $3::bigint FROM a LEFT JOIN c0 c ON true WHERE $4::bigint > 0 ON CONFLICT (key, window_start) DO UPDATE SET count = excluded.count WHERE EXISTS (SELECT 1 FROM c0) AND excluded.count > rate_limit_counters.count RETURNING count),
async AS (SELECT set_config('synchronous_commit', 'off', true))
SELECT (SELECT count FROM c0), (SELECT count FROM i0), (SELECT count FROM rate_limit_counters WHERE key = 'ip:' || a.id::text || ':minute' AND window_start = $2::bigint) FROM a CROSS JOIN async
