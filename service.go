package agentpay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/shopspring/decimal"

	"agentpay/cardissuer"
	"agentpay/chains"
	"agentpay/ent"
	"agentpay/identity"
	"agentpay/internal/authcache"
	"agentpay/internal/clock"
	"agentpay/internal/gate"
	"agentpay/internal/headcache"
	"agentpay/internal/headroom"
	"agentpay/internal/jobs"
	"agentpay/internal/mail"
	"agentpay/internal/statusbus"
	"agentpay/internal/store"
	"agentpay/internal/vault"
)

// Mode separates real money from test money: live keys use the main
// networks, test keys the test networks (the local devnets in dev).
type Mode string

const (
	ModeLive Mode = "live"
	ModeTest Mode = "test"
)

// Config is everything the service layer needs; cmd builds it from the
// environment.
type Config struct {
	DB     *store.DB
	Vault  *vault.Vault
	Logger *slog.Logger
	// Treasury holds the service's own wallets: fee recipient and gas payer.
	Treasury TreasuryKeys
	// Families makes and reads the keys and addresses of each chain family
	// (chains/adapters.Families); every family is required, and the EVM
	// family also checks wallet signatures (chains.MessageSigning).
	Families chains.Families

	// Live and Test are the ledgers per chain for each mode.
	Live chains.Networks
	Test chains.Networks
	// Jobs enqueues background work in a transaction (webhook deliveries...).
	Jobs jobs.Inserter
	// Observer is told what the rules did, after it committed (metrics);
	// nil: no one.
	Observer Observer
	// Payouts pays fiat_pix settlements, per mode; a mode without one
	// leaves such settlements pending until one is configured.
	Payouts map[Mode]PayoutProvider
	// Settlement tunes the settle_payment job's waits.
	Settlement SettlementOptions
	// Faucet sends test USDC; set only by `agentpay dev`.
	Faucet Faucet
	// Partners are the identity partners whose attestations
	// verify-partner accepts (partners.go); DevPartner, set only by
	// `agentpay dev`, is one more, minting attestations on request
	// (devpartner.go).
	Partners   []Partner
	DevPartner *DevPartner
	// Mailer sends the outbox's e-mail (mail.go): SMTP (internal/mail
	// NewSMTP) or, under `agentpay dev` without SMTP_URL, the catcher
	// (mail.Catcher). nil leaves mail unsent in the outbox, its jobs
	// retrying.
	Mailer mail.Sender
	// IdentityProvider verifies humans' identity (identity.go): the
	// sandbox (identity/sandbox) under `agentpay dev`; nil turns
	// verification off (starting one is 503).
	IdentityProvider identity.Provider
	// CardIssuer issues the single-use cards of card purchases (cards.go):
	// the sandbox (cardissuer/sandbox) under `agentpay dev`; nil turns
	// card purchases off (requests are 503). CardRequestTTL is how long a
	// request waits for the human (0: DefaultCardRequestTTL), CardLifetime
	// how long an issued card works (0 or more: MaxCardLifetime).
	CardIssuer     cardissuer.Issuer
	CardRequestTTL time.Duration
	CardLifetime   time.Duration
	// SpendApprovalTTL is how long an operation held by a spending policy
	// waits for a paired human (0: DefaultSpendApprovalTTL).
	SpendApprovalTTL time.Duration

	// AgentMode is the network agents' custodial wallets live on: live in
	// production, test under `agentpay dev` (the devnets).
	AgentMode Mode

	BaseURL string
	PayURL  string
	AppURL  string

	// PasskeyRPID is the WebAuthn relying party id of passkeys
	// (passkeys.go): APP_URL's host, which must be a domain name (WebAuthn
	// refuses IP addresses); empty turns passkeys off. PasskeyOrigins are
	// the origins the app's pages are served from (APP_URL's), the only
	// ones whose answers are taken; PasskeyRPName is the name
	// authenticators show (DefaultPasskeyRPName when empty).
	PasskeyRPID    string
	PasskeyOrigins []string
	PasskeyRPName  string

	// IPRateLimit is unauthenticated requests per client IP per minute and
	// RegisterRateLimit registrations per client IP per hour; 0 turns one off.
	IPRateLimit       int
	RegisterRateLimit int
	// ProbeRateLimit is readiness probes (/readyz) per client IP per minute,
	// counted by each process for itself; ConnectionsPerIP the GraphQL
	// websockets a client IP may hold open at once on one process. 0 turns
	// either off.
	ProbeRateLimit   int
	ConnectionsPerIP int

	SessionTTL         time.Duration
	WebhookRetryDelays []time.Duration
	// LatePaymentWindow is how long a session's deposit addresses are
	// still watched after it ended (deposits.go); 0 is
	// DefaultLatePaymentWindow.
	LatePaymentWindow time.Duration
	// SendMinimums raise the smallest send (and withdrawal) per chain above
	// MinSendUSD, where the gas the treasury pays for a send's two
	// transactions exceeds the fee a smaller one earns (gas.go's send
	// policy). A chain not listed takes MinSendUSD.
	SendMinimums map[chains.Name]decimal.Decimal
	// DustMinimums are the smallest deposits worth counting per chain
	// (dust.go): below its chain's, a deposit is dust, recorded but no
	// payment. A chain not listed takes DefaultDustMinimum (one cent); 0
	// makes every deposit of some value a payment.
	DustMinimums map[chains.Name]decimal.Decimal
	// GasTokenPrices value each chain's gas token in USD, to weigh the
	// dust on an address against the gas of its sweep (dust.go); a chain
	// not listed takes DefaultGasTokenPrices.
	GasTokenPrices map[chains.Name]decimal.Decimal
	// MaxOpenSessions is how many open sessions (pending or detecting,
	// before expires_at) a merchant may have at once in each mode
	// (sessions.go); SelectRateLimit how many payment method selections a
	// session takes a minute (checkoutpage.go). 0 turns either off.
	MaxOpenSessions int
	SelectRateLimit int
	// RelayIPRateLimit is how many authorizations a client IP may have the
	// treasury relay a minute (a session's x402 payment, the browser
	// wallet's), RelayMerchantRateLimit how many of one merchant's sessions
	// in one mode a minute, the facilitator's settles included (relays.go).
	// 0 turns either off.
	RelayIPRateLimit       int
	RelayMerchantRateLimit int
	// WebhookAllowPrivate lets test-mode deliveries reach addresses that are
	// not public (loopback, private, link-local...: webhook.IsPublicAddr),
	// so a developer's local receiver works; `agentpay dev` turns it on.
	// Live-mode deliveries reach public addresses only, whatever it says.
	WebhookAllowPrivate bool
	// WebhookMerchantConcurrency caps one merchant's webhook tries in flight
	// at once per mode, in each worker process; 0 is
	// DefaultWebhookMerchantConcurrency (webhooklimits.go).
	WebhookMerchantConcurrency int
	// WebhookSlowConcurrency caps the tries in flight to slow receivers, all
	// merchants together, in each worker process (the slow lane); 0 is
	// DefaultWebhookSlowConcurrency (webhookreceivers.go).
	WebhookSlowConcurrency int
	// SignInRateLimit is how many sign-in e-mails a client IP may ask for
	// an hour, SignInEmailRateLimit how many one address may receive an
	// hour (signin.go). 0 turns either off.
	SignInRateLimit      int
	SignInEmailRateLimit int
	// AgentMailDailyLimit is how many invitation and pairing-request
	// e-mails one address may receive from all agents together a UTC day
	// (agentmail.go); 0 turns it off.
	AgentMailDailyLimit int
	// Withdrawals bound human users' withdrawals (withdrawals.go); zero
	// fields are DefaultWithdrawalLimit and DefaultWithdrawalDailyLimit.
	Withdrawals WithdrawalLimits

	// Bus carries the live feeds (session statuses) to their subscribers
	// on every process; nil builds the default for DB (statusbus.New:
	// LISTEN/NOTIFY on PostgreSQL, in process on SQLite).
	Bus statusbus.Bus

	// Clock is the time every rule reads (an expiry, a signed message's
	// validity, a rate window, the daily send limit, the times recorded on
	// rows); nil is the system clock. Tests move it (clock.Stub) instead of
	// waiting or dating rows in the past.
	Clock clock.Clock

	// HeadCacheTTL is how old a chain's head may be when shown (the chains
	// query, chainHead subscriptions, /readyz): older, it is read again, at
	// most once per TTL per chain and mode whatever the number of readers
	// (internal/headcache); 0 is DefaultHeadCacheTTL.
	HeadCacheTTL time.Duration

	// AdminKeyHash is the SHA-256 of the admin key (ADMIN_KEY), which
	// admin queries must present (adminkey.go); nil turns the admin API
	// off. The key itself never reaches the service.
	AdminKeyHash []byte

	// AuthCacheTTL is how long what an agent or merchant key authenticated
	// is trusted without reading the key again (internal/authcache), and so
	// how long key regeneration, key rolls and merchant deactivation wait
	// before answering; 0 is DefaultAuthCacheTTL, a negative value reads the
	// key on every request.
	AuthCacheTTL time.Duration

	// CredentialRecheckInterval is how often a live watch (a subscription)
	// reads again the credential it was opened with when no event wakes
	// it, and so how long at most it outlives that credential
	// (livecredentials.go); 0 is DefaultCredentialRecheckInterval.
	CredentialRecheckInterval time.Duration
}

// Service is the service layer.
type Service struct {
	cfg      Config
	logger   *slog.Logger
	watchers *watcherCache
	rates    rateLimits
	bus      statusbus.Bus
	// agentAuth and merchantAuth cache what keys authenticated
	// (internal/authcache).
	agentAuth    *authcache.Cache[*ent.Agent]
	merchantAuth *authcache.Cache[*MerchantAuth]
	// liveWebhooks and testWebhooks send webhook deliveries, each keeping
	// its idle connections per receiver (newWebhookClient).
	liveWebhooks, testWebhooks *http.Client
	// heads are the chains' heads as this process last learnt them.
	heads *headcache.Cache[headKey]
	// openSessionGrants is the open-sessions headroom this process counted
	// (checkOpenSessions).
	openSessionGrants *headroom.Cache[openSessionsKey]
	// webhookGates hold this process's tries in flight by merchant and mode
	// (webhooklimits.go).
	webhookGates *gate.Gates[webhookGateKey]
	// webhookReceivers is what this process knows of receivers, and its
	// slow lane (webhookreceivers.go).
	webhookReceivers *webhookReceivers
	// passkeys is the WebAuthn relying party; nil when passkeys are off.
	passkeys *webauthn.WebAuthn
	// partners verify partner attestations by partner name (partners.go).
	partners map[string]*partnerVerifier
}

// NewService checks the configuration and builds the service layer.
func NewService(cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("agentpay: Config.DB is required")
	}
	if cfg.Vault == nil {
		return nil, errors.New("agentpay: Config.Vault is required")
	}
	for _, chain := range chains.All {
		if cfg.Families[chain.Family()] == nil {
			return nil, fmt.Errorf("agentpay: Config.Families has no %s family", chain.Family())
		}
	}
	if _, ok := cfg.Families[chains.FamilyEVM].(chains.MessageSigning); !ok {
		return nil, errors.New("agentpay: the evm family's Wallets must check wallet signatures (chains.MessageSigning)")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.AgentMode == "" {
		cfg.AgentMode = ModeLive
	}
	bus := cfg.Bus
	if bus == nil {
		bus = statusbus.New(cfg.DB, logger)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System
	}
	if cfg.AuthCacheTTL == 0 {
		cfg.AuthCacheTTL = DefaultAuthCacheTTL
	}
	if cfg.CredentialRecheckInterval <= 0 {
		cfg.CredentialRecheckInterval = DefaultCredentialRecheckInterval
	}
	if cfg.HeadCacheTTL <= 0 {
		cfg.HeadCacheTTL = DefaultHeadCacheTTL
	}
	passkeys, err := newRelyingParty(cfg)
	if err != nil {
		return nil, err
	}
	partners, err := newPartners(cfg)
	if err != nil {
		return nil, err
	}
	agents, merchants := newAgentAuthCache(cfg.AuthCacheTTL, cfg.Clock), newMerchantAuthCache(cfg.AuthCacheTTL, cfg.Clock)
	cfg.DB.OnChange(agents.Listener(agentChangeOf))
	cfg.DB.OnChange(merchants.Listener(merchantChangeOf))
	s := &Service{cfg: cfg, logger: logger, watchers: newWatcherCache(), rates: newRateLimits(cfg, logger), bus: bus,
		agentAuth: agents, merchantAuth: merchants,
		heads:             headcache.New[headKey](cfg.HeadCacheTTL, cfg.Clock),
		openSessionGrants: headroom.New[openSessionsKey](headroom.Config{}),
		webhookGates:      newWebhookGates(cfg), passkeys: passkeys, partners: partners}
	s.webhookReceivers = newWebhookReceivers(cfg, s.now)
	s.liveWebhooks, s.testWebhooks = s.newWebhookClient(ModeLive), s.newWebhookClient(ModeTest)
	return s, nil
}

// now is the time by the service's clock (Config.Clock), which every rule
// reads.
func (s *Service) now() time.Time { return s.cfg.Clock.Now() }

// wallets is the key and address machinery of chain's family.
func (s *Service) wallets(chain chains.Name) chains.Wallets {
	return s.cfg.Families[chain.Family()]
}

// networks returns the ledgers of a mode.
func (s *Service) networks(mode Mode) chains.Networks {
	if mode == ModeLive {
		return s.cfg.Live
	}
	return s.cfg.Test
}

// ledger returns the ledger of a chain in a mode, or a validation error
// naming the chain when it is not configured, so a missing RPC is refused up
// front rather than failing later.
func (s *Service) ledger(mode Mode, chain chains.Name) (chains.Ledger, error) {
	if !chain.Valid() {
		_, err := chains.ParseName(string(chain))
		return nil, Invalid("chain", "%s", err)
	}
	n, ok := s.networks(mode)[chain]
	if !ok {
		return nil, Invalid("chain", "%s is not available in %s mode", chain, mode)
	}
	return n.Ledger, nil
}

// agentLedger returns the ledger agents' wallets use on a chain.
func (s *Service) agentLedger(chain chains.Name) (chains.Ledger, error) {
	return s.ledger(s.cfg.AgentMode, chain)
}

// ChainStatus is a configured chain as seen right now.
type ChainStatus struct {
	Chain   chains.Name
	Mode    Mode
	Token   string
	Head    uint64
	Healthy bool
	Error   string
}

// Chain heads: what the service shows of its chains (the GraphQL chains
// query and chainHead subscriptions, /readyz) comes from this process's
// head cache (internal/headcache), never straight from a node: anyone may
// ask, as often as they like. The deposit scans this process runs feed it
// at no extra call; a head older than Config.HeadCacheTTL is read again,
// once per chain and mode however many ask. So a process costs each node at
// most one head read per TTL for its readers (none where its own scans keep
// the heads fresh, as in `agentpay dev`); a `serve` process, whose scans run
// in a worker process, reads them on demand within that bound.

// DefaultHeadCacheTTL is Config.HeadCacheTTL's default: about a block on
// the faster chains, so a chainHead subscriber misses little.
const DefaultHeadCacheTTL = time.Second

// headKey names a chain's head in the cache.
type headKey struct {
	mode  Mode
	chain chains.Name
}

// chainStatus is a chain's status as the head cache has it.
func (s *Service) chainStatus(ctx context.Context, mode Mode, l chains.Ledger) ChainStatus {
	st := ChainStatus{Chain: l.Chain(), Mode: mode, Token: l.Token()}
	h := s.heads.Get(ctx, headKey{mode, l.Chain()}, func(ctx context.Context) (uint64, error) {
		n, err := l.Head(ctx)
		if err != nil {
			s.logger.WarnContext(ctx, "chain head", "chain", l.Chain(), "mode", mode, "err", err)
		}
		return n, err
	})
	if h.Err != nil {
		st.Error = "unreachable"
		return st
	}
	st.Head, st.Healthy = h.Number, true
	return st
}

// ChainStatuses reports every configured chain, from the head cache; heads
// to read again are read concurrently, so one slow RPC does not add up with
// the others.
func (s *Service) ChainStatuses(ctx context.Context) []ChainStatus {
	type probe struct {
		mode   Mode
		ledger chains.Ledger
	}
	var probes []probe
	for _, mode := range []Mode{ModeLive, ModeTest} {
		for _, n := range s.networks(mode) {
			probes = append(probes, probe{mode, n.Ledger})
		}
	}
	out := make([]ChainStatus, len(probes))
	done := make(chan struct{}, len(probes))
	for i, p := range probes {
		go func() {
			defer func() { done <- struct{}{} }()
			out[i] = s.chainStatus(ctx, p.mode, p.ledger)
		}()
	}
	for range probes {
		<-done
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Mode != out[j].Mode {
			return out[i].Mode < out[j].Mode
		}
		return chainOrder(out[i].Chain) < chainOrder(out[j].Chain)
	})
	return out
}

func chainOrder(n chains.Name) int {
	for i, c := range chains.All {
		if c == n {
			return i
		}
	}
	return len(chains.All)
}

// Ready reports whether the database and every configured chain answer
// (the chains as the head cache has them).
func (s *Service) Ready(ctx context.Context) error {
	if err := s.cfg.DB.Ping(ctx); err != nil {
		s.logger.WarnContext(ctx, "database ping", "err", err)
		return fmt.Errorf("%w: database unreachable", ErrUnavailable)
	}
	for _, st := range s.ChainStatuses(ctx) {
		if !st.Healthy {
			return fmt.Errorf("%w: %s (%s) unreachable", ErrUnavailable, st.Chain, st.Mode)
		}
	}
	return nil
}

// ChainStatus reports one configured chain, from the head cache.
func (s *Service) ChainStatus(ctx context.Context, mode Mode, chain chains.Name) (ChainStatus, error) {
	l, err := s.ledger(mode, chain)
	if err != nil {
		return ChainStatus{}, err
	}
	return s.chainStatus(ctx, mode, l), nil
}

// WatchChainHead sends the chain's status now and each time its head
// advances (or its health changes), until ctx ends. It looks every `every`,
// in the head cache: subscribers add no calls to the chain's node.
func (s *Service) WatchChainHead(ctx context.Context, mode Mode, chain chains.Name, every time.Duration) (<-chan ChainStatus, error) {
	first, err := s.ChainStatus(ctx, mode, chain)
	if err != nil {
		return nil, err
	}
	out := make(chan ChainStatus, 1)
	out <- first
	go func() {
		defer close(out)
		last := first
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st, err := s.ChainStatus(ctx, mode, chain)
			if err != nil || (st.Head == last.Head && st.Healthy == last.Healthy) {
				continue
			}
			last = st
			select {
			case out <- st:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// ParseMode turns an API value into a Mode.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeLive, ModeTest:
		return Mode(s), nil
	}
	return "", Invalid("mode", "must be live or test")
}

// ScannedChain is a chain the worker scans for deposits.
type ScannedChain struct {
	Mode  Mode
	Chain chains.Name
}

// ScannedChains lists every configured chain that has a deposit watcher.
func (s *Service) ScannedChains() []ScannedChain {
	var out []ScannedChain
	for _, mode := range []Mode{ModeLive, ModeTest} {
		for _, name := range chains.All {
			if n, ok := s.networks(mode)[name]; ok && n.NewWatcher != nil {
				out = append(out, ScannedChain{Mode: mode, Chain: name})
			}
		}
	}
	return out
}
