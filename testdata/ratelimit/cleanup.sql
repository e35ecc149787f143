DELETE FROM rate_limit_counters WHERE expires_at <= $1
