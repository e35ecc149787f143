package ratelimit

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"agentpay/internal/store"
)

// counterHit is one window's counter for one request.
type counterHit struct {
	key          string
	start, until int64 // the window, Unix seconds
	limit        int
}

// counterStore counts requests.
type counterStore interface {
	// hit counts one request in hits[0], then in each next window only while
	// every previous one is within its limit. It returns every window's
	// count (for a window not counted, its current count) and how many
	// windows were counted.
	hit(ctx context.Context, now int64, hits []counterHit) (counts []int64, counted int, err error)
}

// cleanupEvery is how often each instance deletes finished windows (and
// forgets its leases of them).
const cleanupEvery = 60

// pgCounters count in rate_limit_counters, shared by every instance.
type pgCounters struct {
	db     *store.DB
	logger *slog.Logger

	mu    sync.Mutex
	stmts [maxWindows]*sql.Stmt // by number of windows - 1

	nextCleanup atomic.Int64 // Unix seconds; 0 = not yet scheduled
}

// countSQL builds the statement counting n windows: one upsert per window,
// each after the first running only if the previous window counted the
// request within its limit, then every window's count (the stored one for a
// window not counted). Arguments: key, window start, window end of each
// window, then the limits of all windows but the last.
func countSQL(n int) string {
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
	b.WriteString(", " + asyncCTE)
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

// asyncCTE turns synchronous_commit off for the statement's own transaction
// (see countSQL).
const asyncCTE = "async AS (SELECT set_config('synchronous_commit', 'off', true))"

// cleanupSQL deletes the counters of windows ended by $1.
const cleanupSQL = "DELETE FROM rate_limit_counters WHERE expires_at <= $1"

func (p *pgCounters) stmt(ctx context.Context, n int) (*sql.Stmt, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.stmts[n-1]; st != nil {
		return st, nil
	}
	st, err := p.db.SQL.PrepareContext(ctx, countSQL(n))
	if err != nil {
		return nil, err
	}
	p.stmts[n-1] = st
	return st, nil
}

func (p *pgCounters) hit(ctx context.Context, now int64, hits []counterHit) ([]int64, int, error) {
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
// cleanupEvery on this instance.
func (p *pgCounters) maybeCleanup(now int64) {
	next := p.nextCleanup.Load()
	if next == 0 {
		p.nextCleanup.CompareAndSwap(0, now+cleanupEvery)
		return
	}
	if now < next || !p.nextCleanup.CompareAndSwap(next, now+cleanupEvery) {
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

// cleanup deletes the counters of windows ended by now.
func (p *pgCounters) cleanup(ctx context.Context, now int64) (int64, error) {
	res, err := p.db.SQL.ExecContext(ctx, cleanupSQL, now)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// memCounters count in memory: SQLite deployments are one process.
type memCounters struct {
	mu        sync.Mutex
	windows   map[string]memWindow
	nextSweep int64
}

type memWindow struct {
	start, until, count int64
}

func newMemCounters() *memCounters {
	return &memCounters{windows: make(map[string]memWindow)}
}

func (m *memCounters) hit(_ context.Context, now int64, hits []counterHit) ([]int64, int, error) {
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

// sweep drops finished windows, at most once per cleanupEvery.
func (m *memCounters) sweep(now int64) {
	if now < m.nextSweep {
		return
	}
	m.nextSweep = now + cleanupEvery
	for k, w := range m.windows {
		if w.until <= now {
			delete(m.windows, k)
		}
	}
}
