package ratelimit

import (
	"context"
	"errors"
	"time"
)

// maxLeaseReservations bounds the reservations one request makes (each
// one's hits can be taken by concurrent requests, or a first insert of a
// window lost to another instance's); past it the request fails.
const maxLeaseReservations = 8

var errLeaseContention = errors.New("rate limit: no hit reserved after repeated attempts")

// prefetchTimeout bounds a reservation made in the background.
const prefetchTimeout = 10 * time.Second

// request is one request decided with leases: of a known subject (sub,
// known), or of credential c until it is read.
type request[K comparable] struct {
	l    *Limit[K]
	c    Credential[K]
	hint string
	// sub is the request's subject once known: given, or read from c (once
	// per request).
	sub   Subject[K]
	known bool
	// entered is the subject whose requests in progress count this one
	// (Bursts).
	entered    K
	hasEntered bool
}

// enter counts the request in progress for subject id, instead of the
// subject it was counted for.
func (r *request[K]) enter(id K) {
	if !r.l.scheme.Bursts || (r.hasEntered && r.entered == id) {
		return
	}
	r.leave()
	r.l.leases.enter(id)
	r.entered, r.hasEntered = id, true
}

func (r *request[K]) leave() {
	if r.hasEntered {
		r.l.leases.leave(r.entered)
		r.hasEntered = false
	}
}

// authenticate reads the credential (unless the subject is known already)
// and reports whether the subject is id (when it has one to compare with).
func (r *request[K]) authenticate(ctx context.Context, id K, hasID bool) (bool, error) {
	if r.known {
		return hasID && r.sub.ID == id, nil
	}
	t := r.l.leases
	sub, err := r.c.Authenticate(ctx)
	if err != nil {
		if errors.Is(err, r.c.Unknown()) {
			t.forgetHint(r.hint)
		}
		return false, err
	}
	r.sub, r.known = sub, true
	if !hasID || sub.ID != id {
		t.setHint(r.hint, sub.ID)
		return false, nil
	}
	return true, nil
}

// run decides the request: from this instance's lease when it can, else
// reserving more of the shared counters (see doc.go). It returns the
// request's subject.
func (r *request[K]) run(ctx context.Context) (Subject[K], Decision, error) {
	l, t := r.l, r.l.leases
	defer r.leave()
	for reservations := 0; ; {
		now := l.lim.clock.Now()
		var (
			id    K
			hasID bool
		)
		if r.known {
			id, hasID = r.sub.ID, true
		} else {
			id, hasID = t.hint(r.hint)
		}
		if hasID {
			r.enter(id)
		} else {
			// A credential this instance has not seen lately: read it and
			// reserve one hit of each window, in one statement. Other
			// requests of the credential meanwhile only read it, then go
			// on with its subject's lease (one of them reserving a block
			// for all), rather than each writing the same counter.
			if !t.beginCold(r.hint) {
				if _, err := r.authenticate(ctx, id, false); err != nil {
					return Subject[K]{}, Decision{}, err
				}
				continue
			}
			sec := now.Unix()
			var st leaseStep
			for i, w := range l.windows.of("") {
				st.starts[i], st.want[i] = w.startAt(sec), 1
			}
			sub, res, err := l.reserveByCredential(ctx, r.c, st)
			if err == nil {
				t.setHint(r.hint, sub.ID)
			}
			t.endCold(r.hint)
			if err != nil {
				return Subject[K]{}, Decision{}, err
			}
			r.sub, r.known = sub, true
			r.enter(sub.ID)
			if st = t.merge(sub.ID, sub.Class, st.starts, res, false, now); st.decided {
				l.decided(sub, st, now)
				return sub, st.dec, nil
			}
			if st.wants() {
				t.abort(sub.ID) // the step above began a reservation: loop to make it
			}
			continue
		}
		st := t.step(id, r.sub.Class, r.known, now)
		switch {
		case st.cold:
			if _, err := r.authenticate(ctx, id, true); err != nil {
				return Subject[K]{}, Decision{}, err
			}
			continue
		case st.decided:
			same, err := r.authenticate(ctx, id, true)
			if err != nil || !same || r.sub.Class != st.class {
				t.undo(id, st)
				if st.wants() {
					t.abort(id)
				}
				if err != nil {
					return Subject[K]{}, Decision{}, err
				}
				continue // decide again with the subject as read
			}
			l.decided(r.sub, st, now)
			return r.sub, st.dec, nil
		case st.wait != nil:
			// Read the credential while the other request reserves.
			if _, err := r.authenticate(ctx, id, true); err != nil {
				return Subject[K]{}, Decision{}, err
			}
			select {
			case <-st.wait:
			case <-ctx.Done():
				return Subject[K]{}, Decision{}, ctx.Err()
			}
			continue
		}
		// This request reserves.
		if reservations++; reservations > maxLeaseReservations {
			t.abort(id)
			return Subject[K]{}, Decision{}, errLeaseContention
		}
		var (
			res leaseCounts
			err error
		)
		if r.known {
			res, err = l.reserve(ctx, r.sub, st)
		} else {
			// Hinted but not read yet: read it with the reservation.
			var sub Subject[K]
			sub, res, err = l.reserveByCredential(ctx, r.c, st)
			if err == nil {
				r.sub, r.known = sub, true
			}
		}
		if err != nil {
			t.abort(id)
			if r.c != nil && errors.Is(err, r.c.Unknown()) {
				t.forgetHint(r.hint)
			}
			return Subject[K]{}, Decision{}, err
		}
		if r.sub.ID != id {
			t.abort(id)
			t.setHint(r.hint, r.sub.ID)
			continue
		}
		if st = t.merge(id, r.sub.Class, st.starts, res, true, now); st.decided {
			l.decided(r.sub, st, now)
			return r.sub, st.dec, nil
		}
		if st.wants() {
			t.abort(id) // the step above began a reservation: loop to make it
		}
	}
}

// decided ends a request decided by a step: it starts the reservation ahead
// of need the step asked for, and the counters' cleanup when due.
func (l *Limit[K]) decided(sub Subject[K], st leaseStep, now time.Time) {
	if st.wants() {
		l.prefetch(sub, st, now)
	}
	l.lim.maybeCleanup(now.Unix())
}

// prefetch makes the reservation st asks for in the background. Its hits
// join the lease when it answers; meanwhile requests are served from what
// is left, or wait for it when nothing is.
func (l *Limit[K]) prefetch(sub Subject[K], st leaseStep, now time.Time) {
	t := l.leases
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), prefetchTimeout)
		defer cancel()
		res, err := l.reserve(ctx, sub, st)
		if err != nil {
			t.abort(sub.ID)
			l.lim.logger.WarnContext(ctx, "rate limit: reserving ahead", "limit", l.scheme.Name, "subject", idString(sub.ID), "err", err)
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.add(sub.ID, sub.Class, st.starts, res, true, now)
	}()
}
