// Package ratelimit counts requests against fixed-window limits: the
// windows and decisions, the counters (in memory on SQLite, shared through
// PostgreSQL otherwise) and the quota-lease engine that keeps PostgreSQL's
// counters off the hot path. It knows no rule: which subject has which
// limit (agents by trust tier, client IPs by configuration), what counts
// and what a refusal says belong to the root package agentpay, which
// describes each kind of subject with a Scheme.
//
// # Windows
//
// Windows are fixed and aligned to the clock (a minute window starts at :00
// of the minute, an hour window at :00:00), so every API instance agrees on
// them without talking to the others. A request is counted, then refused if
// a window is over its limit, with one refinement: a window only counts the
// requests every shorter window let through. So a subject that hammers past
// its minute limit is refused for the rest of that minute only; its refused
// calls do not use up its hour. A Decision carries the figures of the
// tightest window (the X-RateLimit-* headers): when refused, the window
// that refuses the longest; when allowed, the one with the fewest requests
// left.
//
// # Counters
//
// On SQLite (one process by design) the counters live in memory. On
// PostgreSQL they are rows of rate_limit_counters, shared by every API
// instance; rows of finished windows are deleted by each instance about
// once a minute, in the background. Every statement turns
// synchronous_commit off for its own transaction: losing the last moment
// of counts to a database crash is harmless.
//
// # Quota leases (PostgreSQL)
//
// Writing the shared counter on every request would be what an
// authenticated read costs most (an upsert per request, whatever else it
// reads), and it made each checkout page poll several times as expensive as
// the poll itself. So an instance reserves hits in blocks: one statement
// adds up to a block of hits to the window's row, never past the limit (a
// row counts the hits reserved by every instance), and the instance then
// serves that many requests from memory, reading nothing more (an agent's
// request still reads its key, through the authentication cache). A window
// that is over starts a new lease; so does a subject whose class changed
// (an agent's tier: the old lease's hits are given up).
//
// A reservation locks the row, caps the grant at what the limit leaves and
// returns both counts, so the instance knows exactly what it got. A later
// window is reserved only when the earlier one granted something, so a
// request the minute refuses uses up nothing of the hour.
//
// Block sizes: one hit for limits under 200, which so stay exact across
// instances (with the agents' tiers: T0's 10 a minute and 100 an hour and
// every per-minute limit but T4's; the 11th T0 request of a minute is
// refused whichever instance answers; also the default 20 registrations an
// hour per IP); else limit/32 (T4: 9 a minute, 312 an hour; T1 to T3 hours:
// 15, 31, 93; 18 of the default 600 requests a minute per IP). With
// Scheme.Bursts (agents), while more requests of one subject are in
// progress on an instance, blocks grow to 4 per request in progress, at
// most limit/8 (T4: 37 a minute); client IPs keep fixed blocks. The next
// block is reserved in the background when a lease runs low (half a block,
// or twice the requests in progress), and at most one reservation per
// subject is in flight per instance: other requests wait for it.
//
// The trade-off: nothing is served beyond what was granted, so no window
// ever serves more than its limit in total across instances. But hits one
// instance reserved and has not served are not available to the others
// until the window ends: another instance can refuse slightly early, by at
// most what the others hold: nothing for one-hit windows; for T4, per
// other instance, about 13 of a minute and 470 of an hour with a few
// requests at a time, and never more than two of the largest blocks (74 of
// a minute, 2,500 of an hour) under a burst of concurrent requests.
// X-RateLimit-Remaining is exact on one instance; with several it can be a
// little optimistic (it counts other instances' unserved hits as
// available).
//
// # Credentials: one round trip
//
// An agent's request names its subject by an API key (a Credential), not
// by id. The instance remembers which subject a credential last was (a
// hint), to know which lease to look at before the key is read; the key is
// still read once per request (through the caller's cache), and a request
// whose key turns out to be another subject's, or of another class, is
// decided again. A credential the instance has not seen lately is read and
// reserved for in one statement (Source: the subject's row joined into the
// reservation); one whose lease must grow before the key was read, too. So
// an authenticated request costs one round trip at most.
package ratelimit
