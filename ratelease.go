package agentpay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/internal/vault"
)

// Quota leases: how agents' rate limits are counted on PostgreSQL.
//
// Writing the shared counter on every request is what an authenticated read
// costs most (one upsert per request, whatever else it reads). So an instance
// reserves hits in blocks: one statement adds up to leaseSize(limit) hits to
// the window's row of rate_limit_counters, never past the limit (the counter
// counts hits reserved by every instance), and the instance then serves that
// many requests from memory, reading only (the key and the wallets, which
// every request reads anyway). A window that is over starts a new lease.
//
// Nothing is ever served beyond what the counter granted, so no window serves
// more than its limit in total across instances. The price: hits one
// instance reserved and has not served are not available to the others, so
// an instance can refuse slightly early (at most leaseSize-1 hits per other
// instance and window, until the window ends). Limits below leaseMinLimit
// reserve one hit at a time, which is exact: T0 (10 a minute, 100 an hour)
// and every per-minute limit but T4's.
//
// A request served from the lease reads the database only when its key is
// not in the authentication cache (authcache.go). What the instance also
// remembers is which agent a key hash was last (a hint, to know which lease
// to look at before the key is read), the leases, and the counters as last
// read (for X-RateLimit-Remaining, which on several instances can be a
// little optimistic: it does not know the other instances' unserved hits).

// leaseMinLimit and leaseDivisor size the blocks: a window whose limit is
// below leaseMinLimit reserves one hit at a time; a larger one
// limit/leaseDivisor (about 3%).
const (
	leaseMinLimit = 200
	leaseDivisor  = 32
)

// leaseSize is how many hits an instance reserves at once in a window of
// limit.
func leaseSize(limit int) int64 {
	if limit < leaseMinLimit {
		return 1
	}
	return int64(max(1, limit/leaseDivisor))
}

// leaseMaxDivisor bounds a block reserved for a burst: when more requests of
// the agent are in progress on the instance than leaseSize/4, a block is
// four times their number (what they can use up while the next block is
// being reserved), but never more than limit/leaseMaxDivisor (about 12%).
// Limits below leaseMinLimit stay at one hit.
const leaseMaxDivisor = 8

// leaseWant is how many hits to reserve in a window of limit while active
// requests of the agent are in progress.
func leaseWant(limit int, active int) int64 {
	k := leaseSize(limit)
	if k == 1 {
		return 1
	}
	return min(max(k, 4*int64(active)), max(k, int64(limit/leaseMaxDivisor)))
}

// leaseWindow is an instance's lease in one window of an agent.
type leaseWindow struct {
	start int64 // the window (Unix seconds of its start)
	free  int64 // hits this instance reserved and has not served
	count int64 // the window's counter as last read: hits reserved by all
}

// agentLease is an instance's leases for one agent, in agentRateWindows
// order, reserved under tier's limits.
type agentLease struct {
	tier string
	w    [2]leaseWindow
	// reserving is closed when the reservation in flight for this agent
	// (at most one per instance) is merged; nil when none is.
	reserving chan struct{}
}

// leaseTable is an instance's leases.
type leaseTable struct {
	mu        sync.Mutex
	agents    map[uuid.UUID]*agentLease
	hints     map[string]uuid.UUID // API key hash -> the agent it last authenticated
	active    map[uuid.UUID]int    // requests in progress, by agent
	cold      map[string]bool      // key hashes being read and reserved for without a hint
	nextSweep int64
}

// maxLeaseHints bounds the hints: past it they are all forgotten (each key
// then costs one more read on its next request).
const maxLeaseHints = 1 << 16

func newLeaseTable() *leaseTable {
	return &leaseTable{agents: make(map[uuid.UUID]*agentLease), hints: make(map[string]uuid.UUID), active: make(map[uuid.UUID]int),
		cold: make(map[string]bool)}
}

// beginCold reports whether the caller is the first request of a key
// without a hint (it then calls endCold).
func (t *leaseTable) beginCold(hash string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cold[hash] {
		return false
	}
	t.cold[hash] = true
	return true
}

func (t *leaseTable) endCold(hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.cold, hash)
}

// enter counts a request of agent id in progress until leave.
func (t *leaseTable) enter(id uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active[id]++
}

func (t *leaseTable) leave(id uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[id]--; t.active[id] <= 0 {
		delete(t.active, id)
	}
}

func (t *leaseTable) hint(hash string) (uuid.UUID, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.hints[hash]
	return id, ok
}

func (t *leaseTable) setHint(hash string, id uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.hints) >= maxLeaseHints {
		clear(t.hints)
	}
	t.hints[hash] = id
}

func (t *leaseTable) forgetHint(hash string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.hints, hash)
}

// lease returns the agent's lease at sec (t.mu held), its windows moved to
// the current ones. tier "" keeps the lease's tier and returns nil when
// there is no lease; another tier than the lease's starts a new lease (the
// old one's hits are given up: they stay counted, which only refuses
// early).
func (t *leaseTable) lease(id uuid.UUID, tier string, sec int64) *agentLease {
	t.sweep(sec)
	l := t.agents[id]
	if l == nil && tier == "" {
		return nil
	}
	if l == nil {
		l = &agentLease{tier: tier}
		t.agents[id] = l
	} else if tier != "" && l.tier != tier {
		l.tier, l.w = tier, [2]leaseWindow{}
	}
	for i, w := range agentRateWindows(l.tier) {
		if start := sec - sec%w.seconds; l.w[i].start != start {
			l.w[i] = leaseWindow{start: start}
		}
	}
	return l
}

// sweep drops, at most once per rateCleanupEvery, the leases whose windows
// are all over and the hints of agents without a lease.
func (t *leaseTable) sweep(sec int64) {
	if sec < t.nextSweep {
		return
	}
	t.nextSweep = sec + rateCleanupEvery
	for id, l := range t.agents {
		if l.reserving == nil && l.w[0].start+60 <= sec && l.w[1].start+3600 <= sec {
			delete(t.agents, id)
		}
	}
	for h, id := range t.hints {
		if _, ok := t.agents[id]; !ok {
			delete(t.hints, h)
		}
	}
}

// leaseStep is what to do next with a request.
type leaseStep struct {
	// cold: the instance has no lease for the agent and does not know its
	// tier: authenticate first.
	cold bool
	// decided: dec and err are the answer. taken: the request took a hit of
	// each window (undo gives them back).
	decided, taken bool
	dec            RateDecision
	err            error
	tier           string
	starts         [2]int64
	// wait: another request is reserving for this agent; try again when it
	// is closed.
	wait <-chan struct{}
	// Otherwise this request reserves want[i] hits in window i (0: none)
	// and must call merge or abort. A decided step may want hits too: a
	// reservation ahead of need (prefetchLease).
	want [2]int64
}

// step decides a request of agent id from its lease at now if it can: a hit
// of each window to take, or a window known full. tier "" uses the lease's.
func (t *leaseTable) step(id uuid.UUID, tier string, now time.Time) leaseStep {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lease(id, tier, now.Unix())
	if l == nil {
		return leaseStep{cold: true}
	}
	return l.step(now, t.active[id])
}

// step: see leaseTable.step (t.mu held); active requests of the agent are
// in progress.
func (l *agentLease) step(now time.Time, active int) leaseStep {
	windows := agentRateWindows(l.tier)
	m, h := &l.w[0], &l.w[1]
	full := func(w *leaseWindow, i int) bool { return w.free == 0 && w.count >= int64(windows[i].limit) }
	s := leaseStep{tier: l.tier, starts: [2]int64{m.start, h.start}}
	var counts [2]int64
	var counted int
	switch {
	case m.free > 0 && h.free > 0:
		m.free--
		h.free--
		s.taken = true
		counts, counted = [2]int64{max(m.count-m.free, 0), max(h.count-h.free, 0)}, 2
		// Running low (half a block, or twice the requests in progress, but
		// no more than the largest block, so that an instance never holds
		// more than two of them): reserve the next block now, in the
		// background, so that the next requests need not wait for it. Only
		// blocks larger than one hit: one-hit windows stay exact.
		if l.reserving == nil {
			for i, w := range []*leaseWindow{m, h} {
				limit := windows[i].limit
				k := leaseSize(limit)
				low := min(max(k/2, 2*int64(active)), leaseWant(limit, 1<<20))
				if k > 1 && w.count < int64(limit) && w.free <= low {
					s.want[i] = leaseWant(limit, active)
				}
			}
			if s.want != [2]int64{} {
				l.reserving = make(chan struct{})
			}
		}
	case full(m, 0):
		// As when counting: a request the minute refuses does not count in
		// the hour, which refuses too if it is full.
		counts, counted = [2]int64{int64(windows[0].limit) + 1, max(h.count-h.free, 0)}, 1
	case full(h, 1):
		counts, counted = [2]int64{max(m.count-m.free, 0), int64(windows[1].limit) + 1}, 2
	case l.reserving != nil:
		s.wait = l.reserving
		return s
	default:
		for i, w := range []*leaseWindow{m, h} {
			if w.free == 0 {
				s.want[i] = leaseWant(windows[i].limit, active)
			}
		}
		l.reserving = make(chan struct{})
		return s
	}
	s.decided = true
	hits := [2]rateHit{
		{start: m.start, until: m.start + windows[0].seconds},
		{start: h.start, until: h.start + windows[1].seconds},
	}
	s.dec = decide(now, windows[:], hits[:], counts[:], counted)
	if !s.dec.Allowed {
		s.err = &RateLimitError{Decision: s.dec, what: "requests", whose: agentRateWhose(l.tier)}
	}
	return s
}

// undo gives back the hits a step took (its request was not served after
// all).
func (t *leaseTable) undo(id uuid.UUID, s leaseStep) {
	if !s.taken {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.agents[id]; l != nil && l.tier == s.tier {
		for i := range l.w {
			if l.w[i].start == s.starts[i] {
				l.w[i].free++
			}
		}
	}
}

// leaseCounts is what a reservation statement answers for each window: the
// counter locked before reserving (NULL when it did not lock: nothing
// wanted, the minute refused the hour's reservation, or no row yet), the
// counter after reserving (NULL when nothing was reserved) and the counter
// in the statement's snapshot (NULL when no row).
type leaseCounts [2]struct{ locked, after, seen sql.NullInt64 }

// merge adds what a reservation (made for the windows in starts) got to
// agent id's lease under tier (read with the reservation), ends the
// reservation when it was the lease's (owned: begun by step), then steps
// again at now.
func (t *leaseTable) merge(id uuid.UUID, tier string, starts [2]int64, res leaseCounts, owned bool, now time.Time) leaseStep {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.add(id, tier, starts, res, owned, now).step(now, t.active[id])
}

// add adds a reservation's hits to the lease and ends the reservation if
// owned (t.mu held).
func (t *leaseTable) add(id uuid.UUID, tier string, starts [2]int64, res leaseCounts, owned bool, now time.Time) *agentLease {
	l := t.lease(id, tier, now.Unix())
	for i := range l.w {
		r := res[i]
		var granted, seen int64
		switch {
		case r.locked.Valid && r.after.Valid:
			granted, seen = r.after.Int64-r.locked.Int64, r.after.Int64
		case r.after.Valid: // the row was created with the grant
			granted, seen = r.after.Int64, r.after.Int64
		case r.locked.Valid: // full: nothing granted
			seen = r.locked.Int64
		}
		// A reservation of a window that has since ended (the clock moved
		// on during the statement) is given up: it only refuses early.
		if l.w[i].start != starts[i] {
			continue
		}
		l.w[i].free += granted
		l.w[i].count = max(l.w[i].count, seen, r.seen.Int64)
	}
	if owned {
		l.endReservation()
	}
	return l
}

// abort ends a reservation that got nothing.
func (t *leaseTable) abort(id uuid.UUID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.agents[id]; l != nil {
		l.endReservation()
	}
}

func (l *agentLease) endReservation() {
	if l.reserving != nil {
		close(l.reserving)
		l.reserving = nil
	}
}

// maxLeaseReservations bounds the reservations one request makes (each
// one's hits can be taken by concurrent requests, or a first insert of a
// window lost to another instance's); past it the request fails.
const maxLeaseReservations = 8

var errLeaseContention = errors.New("rate limit: no hit reserved after repeated attempts")

// leasedAllow decides a request on PostgreSQL with leases: of the agent
// whose API key is apiKey (authenticating it) when a is nil, else of a
// (already authenticated). It returns the agent.
func (s *Service) leasedAllow(ctx context.Context, apiKey string, a *ent.Agent) (*ent.Agent, RateDecision, error) {
	l := s.rateLimiter()
	t := l.leases
	var hash []byte
	if a == nil {
		hash = vault.HashSecret(apiKey)
	}
	hint := string(hash)
	// authenticate reads the key (once per request) and checks it is the
	// hinted agent's.
	authenticate := func(id uuid.UUID) (bool, error) {
		if a != nil {
			return a.ID == id, nil
		}
		got, err := s.Authenticate(ctx, apiKey)
		if err != nil {
			if errors.Is(err, ErrUnauthorized) {
				t.forgetHint(hint)
			}
			return false, err
		}
		a = got
		if a.ID != id {
			t.setHint(hint, a.ID)
			return false, nil
		}
		return true, nil
	}
	var entered uuid.UUID
	defer func() {
		if entered != uuid.Nil {
			t.leave(entered)
		}
	}()
	for reservations := 0; ; {
		now := l.now()
		var (
			id   uuid.UUID
			tier string
		)
		if a != nil {
			id, tier = a.ID, string(a.Tier)
		} else if h, ok := t.hint(hint); ok {
			id = h
		}
		if id != uuid.Nil && id != entered {
			if entered != uuid.Nil {
				t.leave(entered)
			}
			t.enter(id)
			entered = id
		}
		if id == uuid.Nil {
			// A key this instance has not seen lately: read it and reserve
			// one hit of each window, in one statement. Other requests of
			// the key meanwhile only read it, then go on with its agent's
			// lease (one of them reserving a block for all), rather than
			// each writing the same counter.
			if !t.beginCold(hint) {
				if _, err := authenticate(uuid.Nil); err != nil {
					return nil, RateDecision{}, err
				}
				continue
			}
			windows := agentRateWindows(TierT0)
			sec := now.Unix()
			st := leaseStep{tier: TierT0, want: [2]int64{1, 1}}
			for i, w := range windows {
				st.starts[i] = sec - sec%w.seconds
			}
			res, got, err := s.reserveLease(ctx, hash, nil, uuid.Nil, st)
			if err == nil && got != nil {
				t.setHint(hint, got.ID)
			}
			t.endCold(hint)
			if err != nil {
				return nil, RateDecision{}, err
			}
			if got == nil {
				return nil, RateDecision{}, ErrUnauthorized
			}
			a = got
			t.enter(a.ID)
			entered = a.ID
			if st = t.merge(a.ID, string(a.Tier), st.starts, res, false, now); st.decided {
				s.leaseDecided(a, st, now)
				return a, st.dec, st.err
			}
			if st.want != [2]int64{} {
				t.abort(a.ID) // the step above began a reservation: loop to make it
			}
			continue
		}
		st := t.step(id, tier, now)
		switch {
		case st.cold:
			if _, err := authenticate(id); err != nil {
				return nil, RateDecision{}, err
			}
			continue
		case st.decided:
			same, err := authenticate(id)
			if err != nil || !same || string(a.Tier) != st.tier {
				t.undo(id, st)
				if st.want != [2]int64{} {
					t.abort(id)
				}
				if err != nil {
					return nil, RateDecision{}, err
				}
				continue // decide again with the agent as read
			}
			s.leaseDecided(a, st, now)
			return a, st.dec, st.err
		case st.wait != nil:
			// Read the key while the other request reserves.
			if _, err := authenticate(id); err != nil {
				return nil, RateDecision{}, err
			}
			select {
			case <-st.wait:
			case <-ctx.Done():
				return nil, RateDecision{}, ctx.Err()
			}
			continue
		}
		// This request reserves.
		if reservations++; reservations > maxLeaseReservations {
			t.abort(id)
			return nil, RateDecision{}, errLeaseContention
		}
		res, got, err := s.reserveLease(ctx, hash, a, id, st)
		if err != nil || got == nil {
			t.abort(id)
			if err == nil {
				t.forgetHint(hint)
				err = ErrUnauthorized
			}
			return nil, RateDecision{}, err
		}
		if a == nil {
			a = got
			if a.ID != id {
				t.abort(id)
				t.setHint(hint, a.ID)
				continue
			}
		}
		if st = t.merge(id, string(a.Tier), st.starts, res, true, now); st.decided {
			s.leaseDecided(a, st, now)
			return a, st.dec, st.err
		}
		if st.want != [2]int64{} {
			t.abort(id) // the step above began a reservation: loop to make it
		}
	}
}

// leaseDecided ends a request decided by step: it starts the reservation ahead
// of need the step asked for, and the counters' cleanup when due.
func (s *Service) leaseDecided(a *ent.Agent, st leaseStep, now time.Time) {
	l := s.rateLimiter()
	if st.want != [2]int64{} {
		s.prefetchLease(a, st, now)
	}
	if p, ok := l.store.(*pgRateStore); ok {
		p.maybeCleanup(now.Unix())
	}
}

// prefetchLeaseTimeout bounds a reservation made in the background.
const prefetchLeaseTimeout = 10 * time.Second

// prefetchLease makes the reservation st asks for in the background. Its
// hits join the lease when it answers; meanwhile requests are served from
// what is left, or wait for it when nothing is.
func (s *Service) prefetchLease(a *ent.Agent, st leaseStep, now time.Time) {
	t := s.rateLimiter().leases
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), prefetchLeaseTimeout)
		defer cancel()
		res, _, err := s.reserveLease(ctx, nil, a, a.ID, st)
		if err != nil {
			t.abort(a.ID)
			s.logger.WarnContext(ctx, "rate limit: reserving ahead", "agent", a.ID, "err", err)
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.add(a.ID, string(a.Tier), st.starts, res, true, now)
	}()
}

// reserveLease runs the reservation st asks for: with the key's
// authentication (one statement) when a is nil, else for a. It returns the
// agent, nil when the key is unknown.
func (s *Service) reserveLease(ctx context.Context, hash []byte, a *ent.Agent, id uuid.UUID, st leaseStep) (leaseCounts, *ent.Agent, error) {
	var res leaseCounts
	windows := agentRateWindows(st.tier)
	args := []any{nil, st.starts[0], st.starts[0] + windows[0].seconds, st.starts[1], st.starts[1] + windows[1].seconds, st.want[0], st.want[1]}
	var (
		rows *sql.Rows
		err  error
	)
	byKey := a == nil
	var read authRead
	if byKey {
		args[0] = hash
		read = s.agentAuth.begin()
		rows, err = s.cfg.DB.QueryCached(ctx, leaseByKeyPostgres, args...)
	} else {
		args[0] = id
		rows, err = s.cfg.DB.QueryCached(ctx, leaseByIDPostgres, append(args, string(a.Tier))...)
	}
	if err != nil {
		return res, nil, fmt.Errorf("rate limit: reserving: %w", err)
	}
	var ints []sql.NullInt64
	if a == nil {
		a, ints, err = scanAuthRows(rows, 6)
	} else {
		ints, err = scanLeaseRow(rows)
	}
	if err != nil {
		return res, nil, fmt.Errorf("rate limit: reserving: %w", err)
	}
	if a == nil {
		return res, nil, nil
	}
	if byKey {
		s.agentAuth.put(read, string(hash), a)
	}
	for i := range res {
		res[i].locked, res[i].after, res[i].seen = ints[3*i], ints[3*i+1], ints[3*i+2]
	}
	return res, a, nil
}

// scanLeaseRow reads the one row of leaseByIDPostgres and closes rows.
func scanLeaseRow(rows *sql.Rows) ([]sql.NullInt64, error) {
	defer rows.Close()
	ints := make([]sql.NullInt64, 6)
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, sql.ErrNoRows
	}
	if err := rows.Scan(&ints[0], &ints[1], &ints[2], &ints[3], &ints[4], &ints[5]); err != nil {
		return nil, err
	}
	return ints, rows.Err()
}

var (
	leaseByKeyPostgres = pgLeaseSQL(true, authAgentColumns, authWalletColumns)
	leaseByIDPostgres  = pgLeaseSQL(false, nil, nil)
)

// pgLeaseSQL builds the statement reserving hits for an agent, in one round
// trip. byKey: the agent is the one whose api_key_hash is $1 (agentCols of
// agents) and the statement answers one row per wallet (walletCols of
// wallets, NULL when it has none), as the authentication does; otherwise $1
// is the agent's id, $8 its tier, and the answer one row. No agent, no row
// and nothing reserved.
//
// $2, $3: the minute window's start and end; $4, $5: the hour's; $6, $7: the
// hits wanted in each (0: none). Each row ends with leaseCounts (locked,
// after, seen) for the minute, then the hour. Keys as pgRateSQL counts them
// ('agent:<id>:minute' and ':hour').
//
// A window's reservation locks its row (SELECT FOR UPDATE: in READ
// COMMITTED, the latest version), then writes locked + the grant, the grant
// being what is wanted but no more than the limit (of the agent's tier)
// leaves, and reports both counts: so the instance knows exactly what it got.
// When there is no row yet the insert creates it with the grant; if another
// instance created it meanwhile, the conflict updates nothing (its count was
// not read under the lock) and the caller reserves again. The hour is
// reserved only when the minute granted something or was not wanted, so a
// request the minute refuses uses up nothing of the hour; the minute's row
// is always locked first, as pgRateSQL does, so the statements cannot
// deadlock.
func pgLeaseSQL(byKey bool, agentCols, walletCols []string) string {
	var b strings.Builder
	if byKey {
		b.WriteString("WITH a AS (SELECT ")
		b.WriteString(strings.Join(agentCols, ", "))
		b.WriteString(" FROM agents WHERE api_key_hash = $1)")
	} else {
		b.WriteString("WITH a AS (SELECT $1::uuid AS id, $8::text AS tier)")
	}
	windows := agentRateWindows(TierT0)
	var out []string
	for i, w := range windows {
		start, end, want := 2*i+2, 2*i+3, i+6
		key := fmt.Sprintf("'agent:' || a.id::text || ':%s'", w.name)
		var limit strings.Builder
		limit.WriteString("CASE a.tier")
		for _, t := range Tiers {
			fmt.Fprintf(&limit, " WHEN '%s' THEN %d", t, agentRateWindows(t)[i].limit)
		}
		fmt.Fprintf(&limit, " ELSE %d END", agentRateWindows("")[i].limit)
		cond := fmt.Sprintf("$%d::bigint > 0", want)
		if i > 0 {
			cond += " AND ($6::bigint = 0 OR EXISTS (SELECT 1 FROM i0))"
		}
		fmt.Fprintf(&b, ", c%d AS (SELECT r.count FROM rate_limit_counters r, a WHERE %s"+
			" AND r.key = %s AND r.window_start = $%d::bigint FOR UPDATE OF r)", i, cond, key, start)
		fmt.Fprintf(&b, ", i%d AS (INSERT INTO rate_limit_counters (key, window_start, count, expires_at)"+
			" SELECT %s, $%d::bigint, COALESCE(c.count + LEAST($%d::bigint, GREATEST((%s) - c.count, 0)),"+
			" LEAST($%d::bigint, %s)), $%d::bigint FROM a LEFT JOIN c%d c ON true WHERE %s"+
			" ON CONFLICT (key, window_start) DO UPDATE SET count = excluded.count"+
			" WHERE EXISTS (SELECT 1 FROM c%d) AND excluded.count > rate_limit_counters.count RETURNING count)",
			i, key, start, want, limit.String(), want, limit.String(), end, i, cond, i)
		out = append(out, fmt.Sprintf("(SELECT count FROM c%d)", i), fmt.Sprintf("(SELECT count FROM i%d)", i),
			fmt.Sprintf("(SELECT count FROM rate_limit_counters WHERE key = %s AND window_start = $%d::bigint)", key, start))
	}
	// As in pgRateSQL: the counters need no durability.
	b.WriteString(", async AS (SELECT set_config('synchronous_commit', 'off', true)) SELECT ")
	for _, c := range agentCols {
		b.WriteString("a." + c + ", ")
	}
	for _, c := range walletCols {
		b.WriteString("w." + c + ", ")
	}
	b.WriteString(strings.Join(out, ", "))
	b.WriteString(" FROM a CROSS JOIN async")
	if byKey {
		b.WriteString(" LEFT JOIN wallets w ON w.agent_id = a.id")
	}
	return b.String()
}
