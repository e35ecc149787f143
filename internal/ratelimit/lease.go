package ratelimit

import (
	"sync"
	"time"
)

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
// the subject are in progress on the instance than leaseSize/4, a block is
// four times their number (what they can use up while the next block is
// being reserved), but never more than limit/leaseMaxDivisor (about 12%).
// Limits below leaseMinLimit stay at one hit.
const leaseMaxDivisor = 8

// leaseWant is how many hits to reserve in a window of limit while active
// requests of the subject are in progress (0 for a scheme without
// Bursts).
func leaseWant(limit int, active int) int64 {
	k := leaseSize(limit)
	if k == 1 {
		return 1
	}
	return min(max(k, 4*int64(active)), max(k, int64(limit/leaseMaxDivisor)))
}

// leaseWindow is an instance's lease in one window of a subject.
type leaseWindow struct {
	start int64 // the window (Unix seconds of its start)
	free  int64 // hits this instance reserved and has not served
	count int64 // the window's counter as last read: hits reserved by all
}

// lease is an instance's leases for one subject, in its windows' order,
// reserved under class's limits.
type lease struct {
	class string
	w     [maxWindows]leaseWindow
	// reserving is closed when the reservation in flight for this subject
	// (at most one per instance) is merged; nil when none is.
	reserving chan struct{}
}

// leaseTable is an instance's leases of one Limit.
type leaseTable[K comparable] struct {
	windows *windowSet

	mu        sync.Mutex
	leases    map[K]*lease
	hints     map[string]K // credential hint -> the subject it last was
	active    map[K]int    // requests in progress, by subject (Bursts only)
	cold      map[string]bool
	nextSweep int64
}

// maxLeaseHints bounds the hints: past it they are all forgotten (each
// credential then costs one more read on its next request).
const maxLeaseHints = 1 << 16

func newLeaseTable[K comparable](windows *windowSet) *leaseTable[K] {
	return &leaseTable[K]{windows: windows, leases: make(map[K]*lease), hints: make(map[string]K),
		active: make(map[K]int), cold: make(map[string]bool)}
}

// beginCold reports whether the caller is the first request of a
// credential without a hint (it then calls endCold).
func (t *leaseTable[K]) beginCold(hint string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cold[hint] {
		return false
	}
	t.cold[hint] = true
	return true
}

func (t *leaseTable[K]) endCold(hint string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.cold, hint)
}

// enter counts a request of subject id in progress until leave.
func (t *leaseTable[K]) enter(id K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.active[id]++
}

func (t *leaseTable[K]) leave(id K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[id]--; t.active[id] <= 0 {
		delete(t.active, id)
	}
}

func (t *leaseTable[K]) hint(hint string) (K, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.hints[hint]
	return id, ok
}

func (t *leaseTable[K]) setHint(hint string, id K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.hints) >= maxLeaseHints {
		clear(t.hints)
	}
	t.hints[hint] = id
}

func (t *leaseTable[K]) forgetHint(hint string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.hints, hint)
}

// lease returns subject id's lease at sec (t.mu held), its windows moved to
// the current ones. Without a known class it keeps the lease's and returns
// nil when there is no lease; another class than the lease's starts a new
// lease (the old one's hits are given up: they stay counted, which only
// refuses early).
func (t *leaseTable[K]) lease(id K, class string, classKnown bool, sec int64) *lease {
	t.sweep(sec)
	l := t.leases[id]
	if l == nil && !classKnown {
		return nil
	}
	if l == nil {
		l = &lease{class: class}
		t.leases[id] = l
	} else if classKnown && l.class != class {
		l.class, l.w = class, [maxWindows]leaseWindow{}
	}
	for i, w := range t.windows.of(l.class) {
		if start := w.startAt(sec); l.w[i].start != start {
			l.w[i] = leaseWindow{start: start}
		}
	}
	return l
}

// sweep drops, at most once per cleanupEvery, the leases whose windows are
// all over and the hints of subjects without a lease.
func (t *leaseTable[K]) sweep(sec int64) {
	if sec < t.nextSweep {
		return
	}
	t.nextSweep = sec + cleanupEvery
	for id, l := range t.leases {
		if l.reserving == nil && l.over(t.windows.of(l.class), sec) {
			delete(t.leases, id)
		}
	}
	for h, id := range t.hints {
		if _, ok := t.leases[id]; !ok {
			delete(t.hints, h)
		}
	}
}

// over reports whether every window of the lease has ended by sec.
func (l *lease) over(windows []Window, sec int64) bool {
	for i, w := range windows {
		if l.w[i].start+w.Seconds > sec {
			return false
		}
	}
	return true
}

// leaseStep is what to do next with a request.
type leaseStep struct {
	// cold: the instance has no lease for the subject and does not know its
	// class: authenticate first.
	cold bool
	// decided: dec is the answer. taken: the request took a hit of each
	// window (undo gives them back).
	decided, taken bool
	dec            Decision
	class          string
	starts         [maxWindows]int64
	// wait: another request is reserving for this subject; try again when
	// it is closed.
	wait <-chan struct{}
	// Otherwise this request reserves want[i] hits in window i (0: none)
	// and must call merge or abort. A decided step may want hits too: a
	// reservation ahead of need (Limit.prefetch).
	want [maxWindows]int64
}

// wants reports whether the step asks for a reservation.
func (s *leaseStep) wants() bool { return s.want != [maxWindows]int64{} }

// step decides a request of subject id from its lease at now if it can: a
// hit of each window to take, or a window known full. Without a known
// class it uses the lease's.
func (t *leaseTable[K]) step(id K, class string, classKnown bool, now time.Time) leaseStep {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lease(id, class, classKnown, now.Unix())
	if l == nil {
		return leaseStep{cold: true}
	}
	return l.step(now, t.windows.of(l.class), t.active[id])
}

// step: see leaseTable.step (t.mu held); active requests of the subject
// are in progress.
func (l *lease) step(now time.Time, windows []Window, active int) leaseStep {
	n := len(windows)
	s := leaseStep{class: l.class}
	allFree, full := true, -1
	for i := range n {
		s.starts[i] = l.w[i].start
		if l.w[i].free == 0 {
			allFree = false
			if full < 0 && l.w[i].count >= int64(windows[i].Limit) {
				full = i
			}
		}
	}
	served := func(i int) int64 { return max(l.w[i].count-l.w[i].free, 0) }
	var counts [maxWindows]int64
	var counted int
	switch {
	case allFree:
		for i := range n {
			l.w[i].free--
			counts[i] = served(i)
		}
		s.taken, counted = true, n
		// Running low (half a block, or twice the requests in progress, but
		// no more than the largest block, so that an instance never holds
		// more than two of them): reserve the next block now, in the
		// background, so that the next requests need not wait for it. Only
		// blocks larger than one hit: one-hit windows stay exact.
		if l.reserving == nil {
			for i, w := range windows {
				k := leaseSize(w.Limit)
				low := min(max(k/2, 2*int64(active)), leaseWant(w.Limit, 1<<20))
				if k > 1 && l.w[i].count < int64(w.Limit) && l.w[i].free <= low {
					s.want[i] = leaseWant(w.Limit, active)
				}
			}
			if s.wants() {
				l.reserving = make(chan struct{})
			}
		}
	case full >= 0:
		// As when counting: a request an earlier window refuses does not
		// count in the later ones, which refuse too if they are full.
		for i := range n {
			counts[i] = served(i)
		}
		counts[full], counted = int64(windows[full].Limit)+1, full+1
	case l.reserving != nil:
		s.wait = l.reserving
		return s
	default:
		for i, w := range windows {
			if l.w[i].free == 0 {
				s.want[i] = leaseWant(w.Limit, active)
			}
		}
		l.reserving = make(chan struct{})
		return s
	}
	s.decided = true
	s.dec = decide(now, windows, s.starts[:n], counts[:n], counted)
	return s
}

// undo gives back the hits a step took (its request was not served after
// all).
func (t *leaseTable[K]) undo(id K, s leaseStep) {
	if !s.taken {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.leases[id]; l != nil && l.class == s.class {
		for i := range t.windows.of(l.class) {
			if l.w[i].start == s.starts[i] {
				l.w[i].free++
			}
		}
	}
}

// merge adds what a reservation (made for the windows in starts) got to
// subject id's lease under class (read with the reservation), ends the
// reservation when it was the lease's (owned: begun by step), then steps
// again at now.
func (t *leaseTable[K]) merge(id K, class string, starts [maxWindows]int64, res leaseCounts, owned bool, now time.Time) leaseStep {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.add(id, class, starts, res, owned, now)
	return l.step(now, t.windows.of(l.class), t.active[id])
}

// add adds a reservation's hits to the lease and ends the reservation if
// owned (t.mu held).
func (t *leaseTable[K]) add(id K, class string, starts [maxWindows]int64, res leaseCounts, owned bool, now time.Time) *lease {
	l := t.lease(id, class, true, now.Unix())
	for i := range t.windows.of(l.class) {
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
func (t *leaseTable[K]) abort(id K) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l := t.leases[id]; l != nil {
		l.endReservation()
	}
}

func (l *lease) endReservation() {
	if l.reserving != nil {
		close(l.reserving)
		l.reserving = nil
	}
}
