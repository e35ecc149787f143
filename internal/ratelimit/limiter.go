package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"agentpay/internal/clock"
	"agentpay/internal/store"
)

// Limiter holds what every Limit of one service shares: the clock and the
// counters (rate_limit_counters on PostgreSQL, memory on SQLite).
type Limiter struct {
	clock    clock.Clock
	counters counterStore
	// pg is the counter store on PostgreSQL, which leases reserve from; nil
	// on SQLite.
	pg     *pgCounters
	logger *slog.Logger
}

// New returns the limiter of a service on db, whose windows follow clk (the
// service's clock).
func New(db *store.DB, logger *slog.Logger, clk clock.Clock) *Limiter {
	l := &Limiter{clock: clk, logger: logger}
	if db.IsPostgres() {
		l.pg = &pgCounters{db: db, logger: logger}
		l.counters = l.pg
	} else {
		l.counters = newMemCounters()
	}
	return l
}

// count counts one request of scope in each window that has a limit (no
// leases).
func (l *Limiter) count(ctx context.Context, scope string, windows []Window) (Decision, error) {
	now := l.clock.Now()
	sec := now.Unix()
	var (
		hitBuf    [maxWindows]counterHit
		activeBuf [maxWindows]Window
		startBuf  [maxWindows]int64
	)
	hits, active, starts := hitBuf[:0], activeBuf[:0], startBuf[:0]
	for _, w := range windows {
		if w.Limit <= 0 {
			continue
		}
		start := w.startAt(sec)
		hits = append(hits, counterHit{key: scope + ":" + w.key(), start: start, until: start + w.Seconds, limit: w.Limit})
		active = append(active, w)
		starts = append(starts, start)
	}
	if len(hits) == 0 {
		return Decision{Allowed: true}, nil
	}
	counts, counted, err := l.counters.hit(ctx, sec, hits)
	if err != nil {
		return Decision{}, fmt.Errorf("rate limit: %w", err)
	}
	return decide(now, active, starts, counts, counted), nil
}

// maybeCleanup starts the counters' cleanup when it is due.
func (l *Limiter) maybeCleanup(sec int64) {
	if l.pg != nil {
		l.pg.maybeCleanup(sec)
	}
}

// maxWindows bounds the windows of a scheme: the statements count at most
// two.
const maxWindows = 2

// Scheme says what one kind of subject (agents, client IPs) is limited by.
type Scheme struct {
	// Name starts the subjects' counter keys: "<Name>:<id>:<window key>".
	Name string
	// IDType is the SQL type of a subject's id ("uuid", "text").
	IDType string
	// Classes are the classes a subject can be in, each with its own limits
	// (agents' trust tiers); none when every subject has the same limits.
	Classes []string
	// ClassColumn names a subject's class in the statements: the column a
	// Source's subject row has it in.
	ClassColumn string
	// Windows returns the windows of a class: the same windows (names,
	// keys, lengths, order) for every class, each class with its own
	// limits. A class not in Classes has the windows of class "".
	Windows func(class string) []Window
	// Bursts grows the blocks an instance reserves for a subject with the
	// subject's requests in progress on it (see doc.go); without, blocks
	// stay at their size.
	Bursts bool
}

// Subject is whom a request counts against: an id, and the class whose
// limits apply.
type Subject[K comparable] struct {
	ID    K
	Class string
}

// windowSet is a scheme's windows by class.
type windowSet struct {
	classes map[string][]Window
	others  []Window // of a class not in classes
}

func (s *windowSet) of(class string) []Window {
	if w, ok := s.classes[class]; ok {
		return w
	}
	return s.others
}

// compile checks s and returns its windows by class. A scheme is written by
// the service, so a malformed one is a programming error: it panics.
func (s Scheme) compile() *windowSet {
	fail := func(format string, args ...any) {
		panic(fmt.Sprintf("ratelimit: scheme %q: ", s.Name) + fmt.Sprintf(format, args...))
	}
	if s.Name == "" || strings.ContainsAny(s.Name, "':") || s.Windows == nil {
		fail("needs a name without quotes or colons, and windows")
	}
	ws := &windowSet{classes: make(map[string][]Window, len(s.Classes)), others: s.Windows("")}
	if n := len(ws.others); n < 1 || n > maxWindows {
		fail("has %d windows, not 1 to %d", n, maxWindows)
	}
	for _, w := range ws.others {
		if w.Seconds <= 0 || strings.ContainsAny(w.key(), "'") {
			fail("window %q: needs a length and a key without quotes", w.Name)
		}
	}
	for _, c := range s.Classes {
		if strings.ContainsAny(c, "'") {
			fail("class %q has a quote", c)
		}
		w := s.Windows(c)
		if len(w) != len(ws.others) {
			fail("class %q has %d windows, not %d", c, len(w), len(ws.others))
		}
		for i := range w {
			if o := ws.others[i]; w[i].Name != o.Name || w[i].key() != o.key() || w[i].Seconds != o.Seconds {
				fail("class %q: window %d is %q, not %q", c, i, w[i].Name, o.Name)
			}
		}
		ws.classes[c] = w
	}
	return ws
}

// leasable reports whether every window of every class has a limit, as the
// reservation statements assume (a window without a limit is not counted at
// all).
func (s *windowSet) leasable() bool {
	limited := func(windows []Window) bool {
		for _, w := range windows {
			if w.Limit <= 0 {
				return false
			}
		}
		return true
	}
	for _, windows := range s.classes {
		if !limited(windows) {
			return false
		}
	}
	return limited(s.others)
}

// Limit counts the requests of one scheme's subjects: with quota leases on
// PostgreSQL, with the limiter's counters on SQLite (or for a scheme with a
// window without a limit).
type Limit[K comparable] struct {
	lim     *Limiter
	scheme  Scheme
	windows *windowSet
	// leases are this instance's leases; nil: counted by lim's counters.
	leases *leaseTable[K]
	stmts  Statements
}

// NewLimit returns the limit of scheme. src, when not nil, is how a subject
// is read by credential, for AllowCredential's single round trip.
func NewLimit[K comparable](lim *Limiter, scheme Scheme, src *Source) *Limit[K] {
	l := &Limit[K]{lim: lim, scheme: scheme, windows: scheme.compile()}
	if lim.pg != nil && l.windows.leasable() {
		l.leases = newLeaseTable[K](l.windows)
		l.stmts = scheme.statements(l.windows, src)
	}
	return l
}

// Allow counts one request of sub. A refused request is a decision that is
// not Allowed, with no error; an error is the limiter's failure.
func (l *Limit[K]) Allow(ctx context.Context, sub Subject[K]) (Decision, error) {
	if l.leases == nil {
		return l.lim.count(ctx, l.scheme.Name+":"+idString(sub.ID), l.windows.of(sub.Class))
	}
	r := request[K]{l: l, sub: sub, known: true}
	_, dec, err := r.run(ctx)
	return dec, err
}

// AllowCredential authenticates c and counts one request of its subject, as
// Allow does. On PostgreSQL a request costs one round trip: the
// credential's read, or, when this instance must reserve more of the
// subject's limit, the read and the reservation in one statement.
func (l *Limit[K]) AllowCredential(ctx context.Context, c Credential[K]) (Subject[K], Decision, error) {
	if l.leases == nil {
		sub, err := c.Authenticate(ctx)
		if err != nil {
			return sub, Decision{}, err
		}
		dec, err := l.Allow(ctx, sub)
		return sub, dec, err
	}
	r := request[K]{l: l, c: c, hint: c.Hint()}
	return r.run(ctx)
}

// idString is a subject id in a counter key.
func idString[K comparable](id K) string {
	switch v := any(id).(type) {
	case string:
		return v
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(id)
}
