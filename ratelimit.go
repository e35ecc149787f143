package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"agentpay/ent"
	"agentpay/internal/store"
)

// Rate limits (spec section 8, design.md section 3).
//
// Agents are limited per agent (the key's owner, so a regenerated key keeps
// its counters) per minute and per hour by trust tier; unauthenticated
// endpoints per client IP: Config.IPRateLimit requests a minute and
// Config.RegisterRateLimit registrations an hour, 0 turning either off.
//
// Windows are fixed and aligned to the clock (a minute window starts at
// :00 of the minute, an hour window at :00:00), so every API instance agrees
// on them without talking to the others. A request is counted, then refused
// if a window is over its limit, with one refinement: a window only counts the
// requests every shorter window let through. So an agent that hammers past its
// minute limit is refused for the rest of that minute only; its refused calls
// do not use up its hour.
//
// On PostgreSQL the counters are rows of rate_limit_counters, shared by every
// API instance, and a request costs one statement (one round trip: the
// statement is prepared per connection). Rows of finished windows are deleted
// by each instance about once a minute, in the background. On SQLite (one
// process by design) the counters live in memory.

// RateKind is what a client-IP limit counts.
type RateKind string

const (
	// RateRequest is any unauthenticated request: Config.IPRateLimit per
	// minute.
	RateRequest RateKind = "request"
	// RateRegistration is a registration attempt (agent or merchant):
	// Config.RegisterRateLimit per hour.
	RateRegistration RateKind = "registration"
)

// RateDecision is the outcome of a rate limit check, with the figures of the
// tightest window for the X-RateLimit-* headers: when refused, the window
// that refuses the longest; when allowed, the one with the fewest requests
// left. Limit is 0 when no limit applies (nothing to show).
type RateDecision struct {
	Allowed bool
	// Limit is the window's request allowance, Remaining what is left of it.
	Limit, Remaining int
	// Reset is when the window ends and its count starts again.
	Reset time.Time
	// RetryAfter is how long a refused client should wait: until Reset.
	RetryAfter time.Duration
	// Window names the window: "minute" or "hour".
	Window string
}

// RateLimitError is the error of a refused request; it is ErrRateLimited
// (errors.Is) and carries the decision, for the GraphQL layer.
type RateLimitError struct {
	Decision RateDecision
	// what is counted ("requests", "registrations"); whose qualifies it
	// (" for tier T0", " from this address").
	what, whose string
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%s: %d %s per %s%s, retry after %d s", ErrRateLimited, e.Decision.Limit,
		e.what, e.Decision.Window, e.whose, retryAfterSeconds(e.Decision.RetryAfter))
}

// Is makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// retryAfterSeconds rounds a wait up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// AllowAgent counts one request of an authenticated agent against its tier's
// per-minute and per-hour limits. A refused request returns the decision and
// a *RateLimitError (ErrRateLimited).
func (s *Service) AllowAgent(ctx context.Context, a *ent.Agent) (RateDecision, error) {
	if a == nil {
		return RateDecision{}, errors.New("rate limit: no agent")
	}
	if s.rateLimiter().leases != nil {
		_, dec, err := s.leasedAllow(ctx, "", a)
		return dec, err
	}
	windows := agentRateWindows(string(a.Tier))
	return s.rateLimiter().allow(ctx, agentRateScope(a.ID.String()), windows[:], "requests", agentRateWhose(string(a.Tier)))
}

// agentRateWindows are the windows of a tier's request limits.
func agentRateWindows(tier string) [2]rateWindow {
	limits := LimitsFor(tier)
	return [...]rateWindow{
		{name: "minute", seconds: 60, limit: limits.PerMinute},
		{name: "hour", seconds: 3600, limit: limits.PerHour},
	}
}

// agentRateScope is the counter key prefix of an agent (its id, so a
// regenerated key keeps the counters).
func agentRateScope(agentID string) string { return "agent:" + agentID }

func agentRateWhose(tier string) string { return " for tier " + tier }

// pgAgentRateCountable reports whether every tier limits both windows, as
// pgLeaseSQL assumes (a window without a limit is not counted at all).
func pgAgentRateCountable() bool {
	for _, t := range Tiers {
		if l := LimitsFor(t); l.PerMinute <= 0 || l.PerHour <= 0 {
			return false
		}
	}
	return true
}

// AllowIP counts one unauthenticated request of kind from a client IP.
// IPv6 clients are counted per /64, the block one host usually holds.
func (s *Service) AllowIP(ctx context.Context, ip string, kind RateKind) (RateDecision, error) {
	var (
		w    rateWindow
		what string
	)
	switch kind {
	case RateRequest:
		w, what = rateWindow{name: "minute", seconds: 60, limit: s.cfg.IPRateLimit}, "requests"
	case RateRegistration:
		w, what = rateWindow{name: "hour", seconds: 3600, limit: s.cfg.RegisterRateLimit, suffix: "register"}, "registrations"
	default:
		return RateDecision{}, fmt.Errorf("rate limit: unknown kind %q", kind)
	}
	if w.limit <= 0 {
		return RateDecision{Allowed: true}, nil
	}
	l := s.rateLimiter()
	if l.scopes != nil {
		return l.allowLeased(ctx, "ip:"+ipScope(ip), w, what, " from this address")
	}
	windows := [...]rateWindow{w}
	return l.allow(ctx, "ip:"+ipScope(ip), windows[:], what, " from this address")
}

// ipScope is the counter key of a client address: the address itself for
// IPv4 (and IPv4-mapped IPv6), its /64 for IPv6.
func ipScope(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		// Not an IP (a unix socket peer...): count the string as given.
		if len(ip) > 100 {
			ip = ip[:100]
		}
		return ip
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is4() {
		return addr.String()
	}
	p, _ := addr.Prefix(64)
	return p.String()
}

// rateWindow is one fixed window of a limit. limit <= 0 means none.
type rateWindow struct {
	name    string // "minute", "hour": shown in decisions
	suffix  string // counter key suffix; name when empty
	seconds int64
	limit   int
}

// rateHit is one window's counter for one request.
type rateHit struct {
	key          string
	start, until int64 // the window, Unix seconds
	limit        int
}

// rateStore counts requests.
type rateStore interface {
	// hit counts one request in hits[0], then in each next window only while
	// every previous one is within its limit. It returns every window's
	// count (for a window not counted, its current count) and how many
	// windows were counted.
	hit(ctx context.Context, now int64, hits []rateHit) (counts []int64, counted int, err error)
}

// rateLimiter holds the clock and the counter store of one Service, and on
// PostgreSQL the instance's leases of agents' limits (see ratelease.go).
type rateLimiter struct {
	now    func() time.Time
	store  rateStore
	leases *leaseTable
	// scopes leases the per-IP limits on PostgreSQL (scopelease.go).
	scopes *scopeLeases
}

func newRateLimiter(db *store.DB, logger *slog.Logger) *rateLimiter {
	l := &rateLimiter{now: time.Now}
	if db.IsPostgres() {
		l.store = &pgRateStore{db: db, logger: logger}
		l.scopes = newScopeLeases()
		if pgAgentRateCountable() {
			l.leases = newLeaseTable()
		}
	} else {
		l.store = newMemRateStore()
	}
	return l
}

func (s *Service) rateLimiter() *rateLimiter { return s.limiter }

// setRateClock replaces the limiter's clock (tests).
func (s *Service) setRateClock(now func() time.Time) { s.rateLimiter().now = now }

func (l *rateLimiter) allow(ctx context.Context, scope string, windows []rateWindow, what, whose string) (RateDecision, error) {
	now := l.now()
	sec := now.Unix()
	var buf [2]rateHit
	hits := buf[:0]
	active := make([]rateWindow, 0, len(windows))
	for _, w := range windows {
		if w.limit <= 0 {
			continue
		}
		suffix := w.suffix
		if suffix == "" {
			suffix = w.name
		}
		start := sec - sec%w.seconds
		hits = append(hits, rateHit{key: scope + ":" + suffix, start: start, until: start + w.seconds, limit: w.limit})
		active = append(active, w)
	}
	if len(hits) == 0 {
		return RateDecision{Allowed: true}, nil
	}
	counts, counted, err := l.store.hit(ctx, sec, hits)
	if err != nil {
		return RateDecision{}, fmt.Errorf("rate limit: %w", err)
	}
	dec := decide(now, active, hits, counts, counted)
	if !dec.Allowed {
		return dec, &RateLimitError{Decision: dec, what: what, whose: whose}
	}
	return dec, nil
}

// decide turns the counts into a decision. A counted window blocks when its
// count passed the limit; a window not counted (a shorter one refused first)
// blocks when it is full, since the next request would pass it.
func decide(now time.Time, windows []rateWindow, hits []rateHit, counts []int64, counted int) RateDecision {
	dec := RateDecision{Allowed: true, Remaining: -1}
	for i, w := range windows {
		limit, count := int64(w.limit), counts[i]
		reset := time.Unix(hits[i].until, 0).UTC()
		blocks := count > limit || (i >= counted && count >= limit)
		if blocks {
			if dec.Allowed || reset.After(dec.Reset) {
				dec = RateDecision{Limit: w.limit, Reset: reset, RetryAfter: reset.Sub(now), Window: w.name}
			}
			continue
		}
		remaining := int(max(limit-count, 0))
		// On a tie the later window wins: it is the one that binds longer.
		if dec.Allowed && (dec.Remaining < 0 || remaining <= dec.Remaining) {
			dec = RateDecision{Allowed: true, Limit: w.limit, Remaining: remaining, Reset: reset, Window: w.name}
		}
	}
	return dec
}

// pgRateStore counts in rate_limit_counters, shared by every instance.
type pgRateStore struct {
	db     *store.DB
	logger *slog.Logger

	mu    sync.Mutex
	stmts [2]*sql.Stmt // by number of windows - 1

	nextCleanup atomic.Int64 // Unix seconds; 0 = not yet scheduled
}

// rateCleanupEvery is how often each instance deletes finished windows.
const rateCleanupEvery = 60

// pgRateSQL builds the statement counting n windows: one upsert per window,
// each after the first running only if the previous window counted the
// request within its limit, then every window's count (the stored one for a
// window not counted). Arguments: key, window start, window end of each
// window, then the limits of all windows but the last.
func pgRateSQL(n int) string {
	var b strings.Builder
	b.WriteString("WITH ")
	for i := range n {
		p := 3*i + 1
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "w%d AS (INSERT INTO rate_limit_counters (key, window_start, count, expires_at) "+
			"SELECT $%d::text, $%d::bigint, 1, $%d::bigint", i, p, p+1, p+2)
		if i > 0 {
			fmt.Fprintf(&b, " FROM w%d WHERE w%d.count <= $%d::bigint", i-1, i-1, 3*n+i)
		}
		b.WriteString(" ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_counters.count + 1 RETURNING count)")
	}
	// Counters need no durability: losing the last moment of counts to a
	// database crash is harmless, so this statement's own transaction
	// commits without waiting for the WAL flush (is_local: the setting ends
	// with the statement; the limiter never runs inside a transaction).
	b.WriteString(", async AS (SELECT set_config('synchronous_commit', 'off', true))")
	b.WriteString(" SELECT ")
	for i := range n {
		p := 3*i + 1
		if i > 0 {
			b.WriteString(", ")
		}
		// The table subquery reads the snapshot from before this statement:
		// right for a window the statement did not count.
		fmt.Fprintf(&b, "COALESCE((SELECT count FROM w%d), "+
			"(SELECT count FROM rate_limit_counters WHERE key = $%d::text AND window_start = $%d::bigint), 0)", i, p, p+1)
	}
	b.WriteString(" FROM async")
	return b.String()
}

func (p *pgRateStore) stmt(ctx context.Context, n int) (*sql.Stmt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.stmts[n-1]; st != nil {
		return st, nil
	}
	st, err := p.db.SQL.PrepareContext(ctx, pgRateSQL(n))
	if err != nil {
		return nil, err
	}
	p.stmts[n-1] = st
	return st, nil
}

func (p *pgRateStore) hit(ctx context.Context, now int64, hits []rateHit) ([]int64, int, error) {
	n := len(hits)
	if n < 1 || n > len(p.stmts) {
		return nil, 0, fmt.Errorf("counting %d windows", n)
	}
	st, err := p.stmt(ctx, n)
	if err != nil {
		return nil, 0, err
	}
	args := make([]any, 0, 4*n)
	for _, h := range hits {
		args = append(args, h.key, h.start, h.until)
	}
	for _, h := range hits[:n-1] {
		args = append(args, h.limit)
	}
	counts := make([]int64, n)
	dest := make([]any, n)
	for i := range counts {
		dest[i] = &counts[i]
	}
	if err := st.QueryRowContext(ctx, args...).Scan(dest...); err != nil {
		return nil, 0, err
	}
	// The statement's rule, replayed: a window counted the request when
	// every previous one did and was within its limit.
	counted := 1
	for counted < n && counts[counted-1] <= int64(hits[counted-1].limit) {
		counted++
	}
	p.maybeCleanup(now)
	return counts, counted, nil
}

// maybeCleanup deletes finished windows in the background, at most once per
// rateCleanupEvery on this instance.
func (p *pgRateStore) maybeCleanup(now int64) {
	next := p.nextCleanup.Load()
	if next == 0 {
		p.nextCleanup.CompareAndSwap(0, now+rateCleanupEvery)
		return
	}
	if now < next || !p.nextCleanup.CompareAndSwap(next, now+rateCleanupEvery) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := p.cleanup(ctx, now); err != nil {
			p.logger.WarnContext(ctx, "rate limit cleanup", "err", err)
		}
	}()
}

// pgRateCleanupSQL deletes the counters of windows ended by $1.
const pgRateCleanupSQL = "DELETE FROM rate_limit_counters WHERE expires_at <= $1"

// cleanup deletes the counters of windows ended by now.
func (p *pgRateStore) cleanup(ctx context.Context, now int64) (int64, error) {
	res, err := p.db.SQL.ExecContext(ctx, pgRateCleanupSQL, now)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// memRateStore counts in memory: SQLite deployments are one process.
type memRateStore struct {
	mu        sync.Mutex
	windows   map[string]memWindow
	nextSweep int64
}

type memWindow struct {
	start, until, count int64
}

func newMemRateStore() *memRateStore {
	return &memRateStore{windows: make(map[string]memWindow)}
}

func (m *memRateStore) hit(_ context.Context, now int64, hits []rateHit) ([]int64, int, error) {
	counts := make([]int64, len(hits))
	counted := 0
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweep(now)
	for i, h := range hits {
		w := m.windows[h.key]
		if w.start != h.start {
			w = memWindow{start: h.start, until: h.until}
		}
		if i == counted && (i == 0 || counts[i-1] <= int64(hits[i-1].limit)) {
			w.count++
			m.windows[h.key] = w
			counted++
		}
		counts[i] = w.count
	}
	return counts, counted, nil
}

// sweep drops finished windows, at most once per rateCleanupEvery.
func (m *memRateStore) sweep(now int64) {
	if now < m.nextSweep {
		return
	}
	m.nextSweep = now + rateCleanupEvery
	for k, w := range m.windows {
		if w.until <= now {
			delete(m.windows, k)
		}
	}
}
