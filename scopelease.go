package agentpay

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// Quota leases of one-window limits (per client IP) on PostgreSQL: the
// scheme of ratelease.go for agents, with one window and a fixed limit.
//
// Counting every unauthenticated request in rate_limit_counters made each
// checkout page poll an upsert of its IP's row, several times the cost of
// the poll itself. An instance now reserves hits in blocks of
// leaseSize(limit) (18 of IP_RATE_LIMIT's default 600 a minute) and serves
// that many from memory. As for agents, nothing is served beyond what the
// counter granted, so an address never gets more than its limit in a window
// across instances; another instance can refuse it slightly early (by what
// this one holds unserved). Limits below leaseMinLimit reserve one hit at a
// time and stay exact: REGISTER_RATE_LIMIT's 20 registrations an hour. A
// request the limiter refuses is not counted.

// scopeLeases is an instance's leases of one-window limits, by counter key.
type scopeLeases struct {
	mu        sync.Mutex
	leases    map[string]*scopeLease
	nextSweep int64
}

// scopeLease is the lease of one counter in one window.
type scopeLease struct {
	start int64 // the window (Unix seconds of its start)
	free  int64 // hits reserved and not served
	count int64 // the counter as last read: hits reserved by all instances
	// reserving is closed when the reservation in flight (at most one per
	// instance and counter) is merged; nil when none is.
	reserving chan struct{}
}

func newScopeLeases() *scopeLeases {
	return &scopeLeases{leases: make(map[string]*scopeLease)}
}

// lease returns the counter's lease for the window starting at start
// (t.mu held).
func (t *scopeLeases) lease(key string, start, sec int64) *scopeLease {
	if sec >= t.nextSweep {
		t.nextSweep = sec + rateCleanupEvery
		for k, l := range t.leases {
			if l.reserving == nil && l.start < start {
				delete(t.leases, k)
			}
		}
	}
	l := t.leases[key]
	if l == nil || l.start != start {
		// A lease of an earlier window is given up; its reservation in
		// flight, if any, still ends it (its waiters then look again).
		l = &scopeLease{start: start}
		t.leases[key] = l
	}
	return l
}

// merge adds a reservation's answer to l and ends the reservation.
func (t *scopeLeases) merge(l *scopeLease, granted, seen int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l.free += granted
	l.count = max(l.count, seen)
	if l.reserving != nil {
		close(l.reserving)
		l.reserving = nil
	}
}

// allowLeased decides one request of scope in window w (limit > 0) from
// this instance's lease, reserving more of the shared counter when it has
// none left.
func (l *rateLimiter) allowLeased(ctx context.Context, scope string, w rateWindow, what, whose string) (RateDecision, error) {
	t := l.scopes
	suffix := w.suffix
	if suffix == "" {
		suffix = w.name
	}
	key := scope + ":" + suffix
	limit := int64(w.limit)
	k := leaseSize(w.limit)
	for reservations := 0; ; {
		now := l.now()
		sec := now.Unix()
		start := sec - sec%w.seconds
		hit := rateHit{key: key, start: start, until: start + w.seconds, limit: w.limit}
		decision := func(count int64) (RateDecision, error) {
			dec := decide(now, []rateWindow{w}, []rateHit{hit}, []int64{count}, 1)
			if !dec.Allowed {
				return dec, &RateLimitError{Decision: dec, what: what, whose: whose}
			}
			return dec, nil
		}

		t.mu.Lock()
		ls := t.lease(key, start, sec)
		switch {
		case ls.free > 0:
			ls.free--
			served := max(ls.count-ls.free, 0)
			// Half a block left: reserve the next one in the background, so
			// that the next requests need not wait for it.
			prefetch := k > 1 && ls.reserving == nil && ls.count < limit && ls.free <= k/2
			if prefetch {
				ls.reserving = make(chan struct{})
			}
			t.mu.Unlock()
			if prefetch {
				go l.prefetchScope(ls, hit, k)
			}
			if p, ok := l.store.(*pgRateStore); ok {
				p.maybeCleanup(sec)
			}
			return decision(served)
		case ls.count >= limit:
			t.mu.Unlock()
			return decision(limit + 1)
		case ls.reserving != nil:
			wait := ls.reserving
			t.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return RateDecision{}, ctx.Err()
			}
			continue
		}
		ls.reserving = make(chan struct{})
		t.mu.Unlock()
		if reservations++; reservations > maxLeaseReservations {
			t.merge(ls, 0, 0)
			return RateDecision{}, errLeaseContention
		}
		granted, seen, err := l.reserveScope(ctx, hit, k)
		t.merge(ls, granted, seen)
		if err != nil {
			return RateDecision{}, fmt.Errorf("rate limit: reserving: %w", err)
		}
	}
}

// prefetchScope reserves want more hits of ls's counter in the background.
func (l *rateLimiter) prefetchScope(ls *scopeLease, hit rateHit, want int64) {
	ctx, cancel := context.WithTimeout(context.Background(), prefetchLeaseTimeout)
	defer cancel()
	granted, seen, err := l.reserveScope(ctx, hit, want)
	l.scopes.merge(ls, granted, seen)
	if err != nil {
		if p, ok := l.store.(*pgRateStore); ok {
			p.logger.WarnContext(ctx, "rate limit: reserving ahead", "key", hit.key, "err", err)
		}
	}
}

// scopeLeaseSQL reserves up to $4 hits of counter $1 in the window starting
// at $2 (ending at $3), never past the limit $5, as pgLeaseSQL does for one
// window: the row is locked, then written with the grant; a row created by
// another instance meanwhile grants nothing (the caller reserves again). It
// answers the count locked (NULL: no row), the count written (NULL: nothing
// written) and the count in the statement's snapshot.
const scopeLeaseSQL = `WITH c AS (SELECT count FROM rate_limit_counters WHERE key = $1::text AND window_start = $2::bigint FOR UPDATE),
i AS (INSERT INTO rate_limit_counters (key, window_start, count, expires_at)
	SELECT $1::text, $2::bigint, COALESCE(c.count + LEAST($4::bigint, GREATEST($5::bigint - c.count, 0)), LEAST($4::bigint, $5::bigint)), $3::bigint
	FROM (SELECT 1) one LEFT JOIN c ON true
	ON CONFLICT (key, window_start) DO UPDATE SET count = excluded.count
	WHERE EXISTS (SELECT 1 FROM c) AND excluded.count > rate_limit_counters.count
	RETURNING count),
async AS (SELECT set_config('synchronous_commit', 'off', true))
SELECT (SELECT count FROM c), (SELECT count FROM i),
	(SELECT count FROM rate_limit_counters WHERE key = $1::text AND window_start = $2::bigint)
FROM async`

// reserveScope runs scopeLeaseSQL and returns the hits granted and the
// counter as seen.
func (l *rateLimiter) reserveScope(ctx context.Context, hit rateHit, want int64) (granted, seen int64, err error) {
	p, ok := l.store.(*pgRateStore)
	if !ok {
		return 0, 0, fmt.Errorf("leases need the PostgreSQL counters")
	}
	rows, err := p.db.QueryCached(ctx, scopeLeaseSQL, hit.key, hit.start, hit.until, want, int64(hit.limit))
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	var locked, after, snap sql.NullInt64
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return 0, 0, err
		}
		return 0, 0, sql.ErrNoRows
	}
	if err := rows.Scan(&locked, &after, &snap); err != nil {
		return 0, 0, err
	}
	switch {
	case locked.Valid && after.Valid:
		granted, seen = after.Int64-locked.Int64, after.Int64
	case after.Valid: // the row was created with the grant
		granted, seen = after.Int64, after.Int64
	case locked.Valid: // full: nothing granted
		seen = locked.Int64
	}
	return granted, max(seen, snap.Int64), rows.Err()
}
