package agentpay

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-webauthn/webauthn/webauthn"
	"github.com/google/uuid"
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
	"agentpay/internal/idempotency"
	"agentpay/internal/jobs"
	"agentpay/internal/keylock"
	"agentpay/internal/mail"
	"agentpay/internal/statusbus"
	"agentpay/internal/store"
	"agentpay/internal/vault"
	"agentpay/payout"
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
	Payouts map[Mode]payout.Provider
	// Settlement tunes the settle_payment job's waits.
	Settlement SettlementOptions
	// Faucet sends test USDC; set only by `agentpay dev`.
	Faucet Faucet
	// Partners are the identity partners whose attestations
	// verify-partner accepts (agent_partners.go); DevPartner, set only by
	// `agentpay dev`, is one more, minting attestations on request
	// (agent_devpartner.go, identity/devpartner).
	Partners   []Partner
	DevPartner DevPartner
	// Mailer sends the outbox's e-mail (mail.go): SMTP (internal/mail
	// NewSMTP) or, under `agentpay dev` without SMTP_URL, the catcher
	// (mail.Catcher). nil leaves mail unsent in the outbox, its jobs
	// retrying.
	Mailer mail.Sender
	// IdentityProvider verifies humans' identity (human_identity.go): the
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
	// InternalSettlement settles an agent's payment of one of our
	// merchants' sessions on the internal ledger (settle_internal.go)
	// instead of on chain; off: every payment goes on chain.
	InternalSettlement bool

	// AfterBroadcast, nil in production, is called right after the service
	// broadcast a payment it is answering ("relay": a payer's signed
	// authorization; "send": an agent's transfer) and before it records or
	// answers anything: the process tests make it kill the process there,
	// the one moment a crash leaves money moving that no answer reported
	// (cmd/agentpay's CRASH_AFTER_BROADCAST, refused where live money is).
	AfterBroadcast func(what string)

	BaseURL string
	PayURL  string
	AppURL  string

	// PasskeyRPID is the WebAuthn relying party id of passkeys
	// (human_passkeys.go): APP_URL's host, which must be a domain name (WebAuthn
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
	// still watched after it ended (checkout_deposits.go); 0 is
	// DefaultLatePaymentWindow.
	LatePaymentWindow time.Duration
	// WebhookRetention is how long webhook events (with their deliveries,
	// tries and feed lines) and ACP order events are kept once done
	// (webhook_retention.go); 0 is DefaultWebhookRetention.
	WebhookRetention time.Duration
	// SendMinimums raise the smallest send (and withdrawal) per chain above
	// MinSendUSD, where the gas the treasury pays for a send's two
	// transactions exceeds the fee a smaller one earns (treasury_gas.go's send
	// policy). A chain not listed takes MinSendUSD.
	SendMinimums map[chains.Name]decimal.Decimal
	// DustMinimums are the smallest deposits worth counting per chain
	// (checkout_dust.go): below its chain's, a deposit is dust, recorded but no
	// payment. A chain not listed takes DefaultDustMinimum (one cent); 0
	// makes every deposit of some value a payment.
	DustMinimums map[chains.Name]decimal.Decimal
	// GasTokenPrices value each chain's gas token in USD, to weigh the
	// dust on an address against the gas of its sweep (checkout_dust.go); a chain
	// not listed takes DefaultGasTokenPrices.
	GasTokenPrices map[chains.Name]decimal.Decimal
	// MaxOpenSessions is how many open sessions (pending or detecting,
	// before expires_at) a merchant may have at once in each mode
	// (checkout_sessions.go); SelectRateLimit how many payment method selections a
	// session takes a minute (checkout_page.go). 0 turns either off.
	MaxOpenSessions int
	SelectRateLimit int
	// RelayIPRateLimit is how many authorizations a client IP may have the
	// treasury relay a minute (a session's x402 payment, the browser
	// wallet's), RelayMerchantRateLimit how many of one merchant's sessions
	// in one mode a minute, the facilitator's settles included (checkout_relays.go).
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
	// DefaultWebhookMerchantConcurrency (webhook_limits.go).
	WebhookMerchantConcurrency int
	// WebhookSlowConcurrency caps the tries in flight to slow receivers, all
	// merchants together, in each worker process (the slow lane); 0 is
	// DefaultWebhookSlowConcurrency (webhook_receivers.go).
	WebhookSlowConcurrency int
	// SignInRateLimit is how many sign-in e-mails a client IP may ask for
	// an hour, SignInEmailRateLimit how many one address may receive an
	// hour (human_signin.go). 0 turns either off.
	SignInRateLimit      int
	SignInEmailRateLimit int
	// AgentMailDailyLimit is how many invitation and pairing-request
	// e-mails one address may receive from all agents together a UTC day
	// (agent_mail.go); 0 turns it off.
	AgentMailDailyLimit int
	// Withdrawals bound human users' withdrawals (transfer_withdrawals.go); zero
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

	// StatusCacheTTL is how long a checkout status read is served from
	// memory at most while the process caches statuses
	// (CacheCheckoutStatuses, checkout_status_cache.go); 0 is DefaultStatusCacheTTL,
	// a negative value reads the database on every poll.
	StatusCacheTTL time.Duration
}

// Service is the service layer.
type Service struct {
	cfg    Config
	logger *slog.Logger
	// idem runs the keyed money operations (idempotency.go).
	idem     *idempotency.Runner
	watchers *watcherCache
	rates    rateLimits
	bus      statusbus.Bus
	// statuses is the checkout status cache (checkout_status_cache.go).
	statuses *statusCache
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
	// sessionInserts is where creates outside a transaction share their
	// insert (checkout_session_commits.go).
	sessionInserts *store.GroupBatch[*sessionInsert]
	// webhookGates hold this process's tries in flight by merchant and mode
	// (webhook_limits.go).
	webhookGates *gate.Gates[webhookGateKey]
	// webhookReceivers is what this process knows of receivers, and its
	// slow lane (webhook_receivers.go).
	webhookReceivers *webhookReceivers
	// webhookBatching holds the merchant modes (webhookGateKey) whose
	// batch of deliveries runs in this process (webhook_batch.go).
	webhookBatching sync.Map
	// webhookTriesSQLite records the tries of concurrent deliveries
	// together on SQLite (webhook_tries.go).
	webhookTriesSQLite *store.GroupBatch[*sqliteTryCall]
	// passkeys is the WebAuthn relying party; nil when passkeys are off.
	passkeys *webauthn.WebAuthn
	// partners verify partner attestations by partner name (agent_partners.go).
	partners map[string]*partnerVerifier
	// sessionRelays serialises the relays of a checkout session's payment
	// in this process (PayWithAuthorization); a session's entry goes once
	// its relay is done.
	sessionRelays keylock.Locks[uuid.UUID]
	// redeliveryRead, when set (tests only), runs between a redelivery's
	// read of its event and its transaction: where the retention job can
	// delete the event (TestRedeliveryOfAPrunedEvent).
	redeliveryRead func(eventID uuid.UUID)
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
	if cfg.StatusCacheTTL == 0 {
		cfg.StatusCacheTTL = DefaultStatusCacheTTL
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
		agentAuth: agents, merchantAuth: merchants, statuses: newStatusCache(cfg),
		heads:             headcache.New[headKey](cfg.HeadCacheTTL, cfg.Clock),
		openSessionGrants: headroom.New[openSessionsKey](headroom.Config{}),
		webhookGates:      newWebhookGates(cfg), passkeys: passkeys, partners: partners}
	s.idem = s.newIdempotencyRunner()
	s.sessionInserts = newSessionInserts(cfg.DB)
	s.webhookReceivers = newWebhookReceivers(cfg, s.now)
	s.webhookTriesSQLite = newWebhookTriesSQLite(s)
	s.liveWebhooks, s.testWebhooks = s.newWebhookClient(ModeLive), s.newWebhookClient(ModeTest)
	return s, nil
}

// now is the time by the service's clock (Config.Clock), which every rule
// reads.
func (s *Service) now() time.Time { return s.cfg.Clock.Now() }
