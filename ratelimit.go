package agentpay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/google/uuid"

	"agentpay/ent"
	"agentpay/ent/agent"
	"agentpay/internal/ratelimit"
)

// Rate limits (spec section 8, design.md section 3): who is limited, by how
// much, and what a refusal says. How requests are counted (fixed windows,
// the counters, quota leases on PostgreSQL) is internal/ratelimit's; its
// doc.go has the design.
//
// Agents are limited per agent (the key's owner, so a regenerated key keeps
// its counters) per minute and per hour by trust tier; unauthenticated
// endpoints per client IP: Config.IPRateLimit requests a minute and
// Config.RegisterRateLimit registrations an hour, 0 turning either off.
//
// What a process serves of its own is limited per process: readiness probes
// (Config.ProbeRateLimit a minute per client IP, since /readyz answers for
// the process that serves it, and an orchestrator probes each process on
// its own), and long-lived connections (Config.ConnectionsPerIP GraphQL
// websockets open at once per client IP, each holding this process's
// memory and its subscriptions' work).

// RateKind is what a client-IP limit counts.
type RateKind string

const (
	// RateRequest is any unauthenticated request: Config.IPRateLimit per
	// minute.
	RateRequest RateKind = "request"
	// RateRegistration is a registration attempt (agent or merchant):
	// Config.RegisterRateLimit per hour.
	RateRegistration RateKind = "registration"
	// RateProbe is a readiness probe (/readyz): Config.ProbeRateLimit per
	// minute, counted by each process for itself.
	RateProbe RateKind = "probe"
	// RateSignIn is a request for a sign-in e-mail: Config.SignInRateLimit
	// per hour.
	RateSignIn RateKind = "signin"
	// RatePasskeySignIn is a passkey sign-in begun (human_passkeys.go):
	// Config.SignInRateLimit per hour too, counted on its own.
	RatePasskeySignIn RateKind = "passkey_signin"
)

// RateDecision is the outcome of a rate limit check, with the figures of the
// tightest window for the X-RateLimit-* headers.
type RateDecision = ratelimit.Decision

// RateLimitError is the error of a refused request; it is ErrRateLimited
// (errors.Is) and carries the decision, for the GraphQL layer.
type RateLimitError struct {
	Decision RateDecision
	// what is counted ("requests", "registrations"); whose qualifies it
	// (" for tier T0", " from this address").
	what, whose string
	// limit, when set, says what limit refused instead (a cap on what is
	// held at once rather than a rate).
	limit string
}

func (e *RateLimitError) Error() string {
	if e.limit != "" {
		return fmt.Sprintf("%s: %s, retry after %d s", ErrRateLimited, e.limit, e.Decision.RetryAfterSeconds())
	}
	return fmt.Sprintf("%s: %d %s per %s%s, retry after %d s", ErrRateLimited, e.Decision.Limit,
		e.what, e.Decision.Window, e.whose, e.Decision.RetryAfterSeconds())
}

// Is makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// rateRefusal is the error of a check: its own, or a *RateLimitError when
// the decision refuses.
func rateRefusal(dec RateDecision, err error, what, whose string) error {
	if err == nil && !dec.Allowed {
		return &RateLimitError{Decision: dec, what: what, whose: whose}
	}
	return err
}

// rateLimits are a service's limits, counted by internal/ratelimit.
type rateLimits struct {
	agents *ratelimit.Limit[uuid.UUID]
	ips    map[RateKind]*ratelimit.Limit[string]
	// connections are the client IPs' open long-lived connections in this
	// process; nil: no limit.
	connections *ratelimit.Slots[string]
	// selects counts each checkout session's payment method selections.
	selects *ratelimit.Limit[uuid.UUID]
	// redeliveries are webhook redeliveries' (webhook_limits.go).
	redeliveries redeliveryLimits
	// relays count the authorizations the treasury relays (checkout_relays.go).
	relays relayLimits
	// signInEmails counts the sign-in e-mails each address receives, by
	// the address's SHA-256 (the counters never hold an address).
	signInEmails *ratelimit.Limit[string]
	// invitations counts each merchant's member invitations
	// (MemberInvitationsPerDay).
	invitations *ratelimit.Limit[uuid.UUID]
	// agentMail counts the invitation and pairing e-mails each address
	// receives from agents a day (Config.AgentMailDailyLimit), by the
	// address's SHA-256.
	agentMail *ratelimit.Limit[string]
	// merchantEmails counts each merchant's contact e-mail confirmations
	// (MerchantEmailConfirmationsPerDay).
	merchantEmails *ratelimit.Limit[uuid.UUID]
}

// newRateLimits counts on one limiter shared by every instance (and one of
// this process's own for the per-process kinds), whose windows follow the
// service's clock.
func newRateLimits(cfg Config, logger *slog.Logger) rateLimits {
	limiter := ratelimit.New(cfg.DB, logger, cfg.Clock)
	local := ratelimit.NewLocal(logger, cfg.Clock)
	l := rateLimits{agents: ratelimit.NewLimit[uuid.UUID](limiter, agentRateScheme, &agentKeySource),
		ips: make(map[RateKind]*ratelimit.Limit[string], len(ipRates)), redeliveries: newRedeliveryLimits(limiter)}
	for kind, r := range ipRates {
		lim := limiter
		if r.perProcess {
			lim = local
		}
		l.ips[kind] = ratelimit.NewLimit[string](lim, ipRateScheme(kind, cfg), nil)
	}
	if cfg.ConnectionsPerIP > 0 {
		l.connections = ratelimit.NewSlots[string](cfg.ConnectionsPerIP)
	}
	l.selects = ratelimit.NewLimit[uuid.UUID](limiter, selectRateScheme(cfg), nil)
	l.invitations = ratelimit.NewLimit[uuid.UUID](limiter, memberInvitationScheme, nil)
	l.agentMail = ratelimit.NewLimit[string](limiter, agentMailScheme(cfg), nil)
	l.merchantEmails = ratelimit.NewLimit[uuid.UUID](limiter, merchantEmailScheme, nil)
	l.relays = newRelayLimits(cfg, limiter)
	w := ratelimit.Window{Name: "hour", Key: "signin", Seconds: 3600, Limit: cfg.SignInEmailRateLimit}
	l.signInEmails = ratelimit.NewLimit[string](limiter, ratelimit.Scheme{
		Name: "email", IDType: "text", Windows: func(string) []ratelimit.Window { return []ratelimit.Window{w} },
	}, nil)
	return l
}

// selectRateScheme limits each checkout session's payment method
// selections to Config.SelectRateLimit a minute, counted across instances.
func selectRateScheme(cfg Config) ratelimit.Scheme {
	w := ratelimit.Window{Name: "minute", Key: "select", Seconds: 60, Limit: cfg.SelectRateLimit}
	return ratelimit.Scheme{Name: "session", IDType: "uuid", Windows: func(string) []ratelimit.Window { return []ratelimit.Window{w} }}
}

// allowSelect counts one payment method selection of a session. A
// selection locks the session's row, may issue a deposit address and
// publishes the session's status to every subscriber, and the page needs
// one or a few (a reload answers the same address); so a session takes
// Config.SelectRateLimit a minute, refused with a *RateLimitError beyond.
func (s *Service) allowSelect(ctx context.Context, sessionID uuid.UUID) error {
	if s.cfg.SelectRateLimit <= 0 {
		return nil
	}
	dec, err := s.rates.selects.Allow(ctx, ratelimit.Subject[uuid.UUID]{ID: sessionID})
	return rateRefusal(dec, err, "payment method selections", " for this session")
}

// AllowAgent counts one request of an authenticated agent against its tier's
// per-minute and per-hour limits. A refused request returns the decision and
// a *RateLimitError (ErrRateLimited).
func (s *Service) AllowAgent(ctx context.Context, a *ent.Agent) (RateDecision, error) {
	if a == nil {
		return RateDecision{}, errors.New("rate limit: no agent")
	}
	dec, err := s.rates.agents.Allow(ctx, agentRateSubject(a))
	return dec, agentRateRefusal(dec, err, string(a.Tier))
}

// agentRateScheme limits each agent by its id (so a regenerated key keeps
// the counters) in the windows of its tier; an agent's burst of concurrent
// requests gets larger blocks of its limits.
var agentRateScheme = ratelimit.Scheme{
	Name: "agent", IDType: "uuid", Classes: Tiers, ClassColumn: agent.FieldTier,
	Windows: agentRateWindows, Bursts: true,
}

// agentRateWindows are the windows of a tier's request limits.
func agentRateWindows(tier string) []ratelimit.Window {
	limits := LimitsFor(tier)
	return []ratelimit.Window{
		{Name: "minute", Seconds: 60, Limit: limits.PerMinute},
		{Name: "hour", Seconds: 3600, Limit: limits.PerHour},
	}
}

func agentRateSubject(a *ent.Agent) ratelimit.Subject[uuid.UUID] {
	return ratelimit.Subject[uuid.UUID]{ID: a.ID, Class: string(a.Tier)}
}

func agentRateRefusal(dec RateDecision, err error, tier string) error {
	return rateRefusal(dec, err, "requests", " for tier "+tier)
}

// ipRates are the per-client-IP limits: each kind's window, its limit in
// the configuration, what it counts, and whether each process counts its
// own.
var ipRates = map[RateKind]struct {
	window     ratelimit.Window
	limit      func(Config) int
	what       string
	perProcess bool
}{
	RateRequest: {ratelimit.Window{Name: "minute", Seconds: 60},
		func(c Config) int { return c.IPRateLimit }, "requests", false},
	RateRegistration: {ratelimit.Window{Name: "hour", Key: "register", Seconds: 3600},
		func(c Config) int { return c.RegisterRateLimit }, "registrations", false},
	RateProbe: {ratelimit.Window{Name: "minute", Key: "probe", Seconds: 60},
		func(c Config) int { return c.ProbeRateLimit }, "readiness probes", true},
	RateSignIn: {ratelimit.Window{Name: "hour", Key: "signin", Seconds: 3600},
		func(c Config) int { return c.SignInRateLimit }, "sign-in e-mails", false},
	RatePasskeySignIn: {ratelimit.Window{Name: "hour", Key: "passkey", Seconds: 3600},
		func(c Config) int { return c.SignInRateLimit }, "passkey sign-ins", false},
}

// ipRateScheme limits each client address (ipScope) in kind's window, by
// the configured limit.
func ipRateScheme(kind RateKind, cfg Config) ratelimit.Scheme {
	w := ipRates[kind].window
	w.Limit = ipRates[kind].limit(cfg)
	return ratelimit.Scheme{Name: "ip", IDType: "text", Windows: func(string) []ratelimit.Window { return []ratelimit.Window{w} }}
}

// AllowIP counts one unauthenticated request of kind from a client IP.
// IPv6 clients are counted per /64, the block one host usually holds.
func (s *Service) AllowIP(ctx context.Context, ip string, kind RateKind) (RateDecision, error) {
	l, ok := s.rates.ips[kind]
	switch {
	case !ok:
		return RateDecision{}, fmt.Errorf("rate limit: unknown kind %q", kind)
	case ipRates[kind].limit(s.cfg) <= 0:
		return RateDecision{Allowed: true}, nil // turned off
	}
	dec, err := l.Allow(ctx, ratelimit.Subject[string]{ID: ipScope(ip)})
	return dec, rateRefusal(dec, err, ipRates[kind].what, " from this address")
}

// OpenConnection takes one of the client IP's long-lived connections
// (GraphQL websockets) in this process, Config.ConnectionsPerIP at once;
// release gives it back when the connection ends. Over the limit it takes
// nothing and answers ErrRateLimited. IPv6 clients count per /64, as for
// the request limits.
func (s *Service) OpenConnection(ip string) (release func(), err error) {
	if s.rates.connections == nil {
		return func() {}, nil
	}
	release, ok := s.rates.connections.Acquire(ipScope(ip))
	if !ok {
		return release, fmt.Errorf("%w: %d open connections from this address, the most this server takes at once",
			ErrRateLimited, s.cfg.ConnectionsPerIP)
	}
	return release, nil
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
