package ratelimit

import "time"

// Window is one fixed window of a limit, aligned to the clock: a window of
// Seconds starts whenever the Unix time is a multiple of Seconds.
type Window struct {
	// Name names the window in decisions: "minute", "hour".
	Name string
	// Key ends the window's counter key; Name when empty.
	Key     string
	Seconds int64
	// Limit is how many requests a window allows; <= 0 is no limit.
	Limit int
}

func (w Window) key() string {
	if w.Key != "" {
		return w.Key
	}
	return w.Name
}

// startAt is the start of the window holding Unix second sec.
func (w Window) startAt(sec int64) int64 { return sec - sec%w.Seconds }

// Decision is the outcome of a rate limit check, with the figures of the
// tightest window for the X-RateLimit-* headers: when refused, the window
// that refuses the longest; when allowed, the one with the fewest requests
// left. Limit is 0 when no limit applies (nothing to show).
type Decision struct {
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

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up and at least
// 1: what Retry-After and the refusal's message say.
func (d Decision) RetryAfterSeconds() int64 {
	s := int64((d.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}

// decide turns the counts of windows (each starting at starts[i]) into a
// decision; the first counted windows counted the request. A counted window
// blocks when its count passed the limit; a window not counted (a shorter
// one refused first) blocks when it is full, since the next request would
// pass it.
func decide(now time.Time, windows []Window, starts, counts []int64, counted int) Decision {
	dec := Decision{Allowed: true, Remaining: -1}
	for i, w := range windows {
		limit, count := int64(w.Limit), counts[i]
		reset := time.Unix(starts[i]+w.Seconds, 0).UTC()
		blocks := count > limit || (i >= counted && count >= limit)
		if blocks {
			if dec.Allowed || reset.After(dec.Reset) {
				dec = Decision{Limit: w.Limit, Reset: reset, RetryAfter: reset.Sub(now), Window: w.Name}
			}
			continue
		}
		remaining := int(max(limit-count, 0))
		// On a tie the later window wins: it is the one that binds longer.
		if dec.Allowed && (dec.Remaining < 0 || remaining <= dec.Remaining) {
			dec = Decision{Allowed: true, Limit: w.Limit, Remaining: remaining, Reset: reset, Window: w.Name}
		}
	}
	return dec
}
