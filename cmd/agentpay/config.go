package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shopspring/decimal"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/jwks"
	"agentpay/internal/mail"
	"agentpay/internal/redact"
	"agentpay/internal/vault"
)

// config is the whole environment, parsed once at start. A bad value stops
// the start with an error naming the variable.
type config struct {
	HTTPAddr string
	BaseURL  string
	PayURL   string
	AppURL   string
	// PasskeyRPID and PasskeyOrigin are the passkeys' relying party:
	// APP_URL's host and origin (passkeyRelyingParty); no RP id when the
	// host is an IP address, which WebAuthn refuses (passkeys are off).
	PasskeyRPID   string
	PasskeyOrigin string
	DatabaseURL   string
	DataDir       string
	// MasterKey is nil when MASTER_KEY is unset; only `dev` may then
	// generate one into DATA_DIR.
	MasterKey []byte
	// AdminKeyHash is the SHA-256 of ADMIN_KEY, the key admin queries
	// present (X-Admin-Key); the key itself is not kept. nil: the admin
	// API is off (`dev` generates a key for its run).
	AdminKeyHash []byte
	SessionTTL   time.Duration
	// CardRequestTTL is how long a card purchase request waits for the
	// human (CARD_REQUEST_TTL).
	CardRequestTTL time.Duration
	// SpendApprovalTTL is how long an operation held by a spending policy
	// waits for a paired human (SPEND_APPROVAL_TTL).
	SpendApprovalTTL  time.Duration
	LatePaymentWindow time.Duration
	// WebhookRetention is WEBHOOK_RETENTION: how long webhook history is
	// kept once delivered or finally failed.
	WebhookRetention time.Duration
	// SettlementMinimum and SettlementInterval batch payouts
	// (SETTLEMENT_MINIMUM_USD, SETTLEMENT_INTERVAL): a batch is paid once
	// its net reaches the minimum or its oldest payment has waited the
	// interval. SettlementInterval is -1 when unset: see settlementOptions
	// for the default.
	SettlementMinimum  decimal.Decimal
	SettlementInterval time.Duration
	MaxOpenSessions    int
	SelectRateLimit    int
	// RelayIPRateLimit and RelayMerchantRateLimit are RELAY_IP_RATE_LIMIT
	// and RELAY_MERCHANT_RATE_LIMIT: authorizations the treasury relays a
	// minute per client IP and per merchant and mode.
	RelayIPRateLimit       int
	RelayMerchantRateLimit int
	SignInRateLimit        int
	SignInEmailLimit       int
	AgentMailLimit         int
	// WithdrawalLimit and WithdrawalDailyLimit bound human users'
	// withdrawals (WITHDRAWAL_LIMIT_USD, WITHDRAWAL_DAILY_LIMIT_USD).
	WithdrawalLimit, WithdrawalDailyLimit decimal.Decimal
	// SendMinimums is SEND_MINIMUM_USD: the smallest send per chain where
	// the operator raises it above 0.01 (docs/money.md#the-send-policy).
	SendMinimums map[chains.Name]decimal.Decimal
	// DustMinimums is DUST_MINIMUM_USD: per chain, the smallest deposit
	// that is a payment (below it: dust); GasTokenPrices is
	// GAS_TOKEN_PRICE_USD: per chain, the USD price of its gas token that
	// dust is weighed against its sweep's gas with.
	DustMinimums       map[chains.Name]decimal.Decimal
	GasTokenPrices     map[chains.Name]decimal.Decimal
	WebhookRetryDelays []time.Duration
	// WebhookAllowPrivate is WEBHOOK_ALLOW_PRIVATE, nil when unset: see
	// webhookAllowPrivate for the default.
	WebhookAllowPrivate        *bool
	WebhookMerchantConcurrency int
	// WebhookSlowConcurrency is WEBHOOK_SLOW_CONCURRENCY: tries in flight
	// to slow receivers, all merchants together, per worker process.
	WebhookSlowConcurrency int
	IPRateLimit            int
	AuthCacheTTL           time.Duration // 0: off
	RegisterRateLimit      int
	ProbeRateLimit         int
	ConnectionsPerIP       int
	HeadCacheTTL           time.Duration
	DevBlockTime           time.Duration
	// RPCTimeout bounds every call to a chain's node (RPC_TIMEOUT).
	RPCTimeout     time.Duration
	AllowedOrigins []string
	// TrustedProxies are the proxies whose X-Forwarded-For is read
	// (TRUSTED_PROXIES); none: the TCP peer is the client.
	TrustedProxies []netip.Prefix
	// GraphQLIntrospection and GraphQLPlayground are nil when unset: on in
	// `dev`, off in `serve` (graphQLSurface).
	GraphQLIntrospection, GraphQLPlayground *bool
	LogLevel                                string
	// LogFormat is LOG_FORMAT: text (logfmt-like, the default) or json.
	LogFormat string
	// MetricsAddr is METRICS_ADDR: "" unset (metricsAddr says what that
	// means per command), "off", or a listen address.
	MetricsAddr string
	// SMTPURL is SMTP_URL (checked by internal/mail ParseURL; it holds the
	// SMTP password, so it is never printed) and MailFrom MAIL_FROM,
	// required with it.
	SMTPURL  string
	MailFrom string
	// AgentMode is the network of agents' wallets (AGENT_NETWORK); `dev`
	// always uses the devnets.
	AgentMode agentpay.Mode
	// InternalSettlement is INTERNAL_SETTLEMENT: agents' payments of our
	// merchants' sessions settle on the internal ledger (docs/money.md).
	InternalSettlement bool
	// Chains holds what is configured for each mode and chain; a chain
	// without an RPC URL in a mode is absent.
	Chains map[agentpay.Mode]map[chains.Name]chainConfig
	// Partners are the identity partners of verify-partner (PARTNERS),
	// their key files read.
	Partners []agentpay.Partner
	// CrashAfterBroadcast is CRASH_AFTER_BROADCAST, "" unset: "relay" or
	// "send" makes the process kill itself right after that broadcast
	// (afterBroadcast). For the process tests; refused where live money is.
	CrashAfterBroadcast string
	// DevConfirmations are the confirmations each devnet asks for in `dev`:
	// CHAIN_<NAME>_TEST_CONFIRMATIONS when set, else defaultDevConfirmations.
	DevConfirmations map[chains.Name]uint64
}

type chainConfig struct {
	RPCURL        string
	USDC          string
	Confirmations uint64
}

// minAdminKeyLen is the shortest ADMIN_KEY taken: a key anyone could guess
// would open the books to them.
const minAdminKeyLen = 32

// Circle's USDC on each network; an operator may override any of them.
var defaultUSDC = map[agentpay.Mode]map[chains.Name]string{
	agentpay.ModeLive: {
		chains.Base:     "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
		chains.Arbitrum: "0xaf88d065e77c8cC2239327C5EDb3A432268e5831",
		chains.Ethereum: "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
		chains.Polygon:  "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359",
		chains.Solana:   "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
	},
	agentpay.ModeTest: {
		chains.Base:     "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
		chains.Arbitrum: "0x75faf114eafb1BDbe2F0316DF893fd58CE46AA4d",
		chains.Ethereum: "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238",
		chains.Polygon:  "0x41E94Eb019C0762f9Bfcf9Fb1E58725BfB0e7582",
		chains.Solana:   "4zMMC9srt5Ri5X14GAgXhaHii3GnPAEERYPJgZJDncDU",
	},
}

// Confirmations a deposit needs before a payment is confirmed. Solana uses
// the finalized commitment instead; its figure is informational.
var defaultConfirmations = map[chains.Name]uint64{
	chains.Base:     10,
	chains.Arbitrum: 10,
	chains.Ethereum: 12,
	chains.Polygon:  32,
	chains.Solana:   32,
}

const defaultDevConfirmations = 3

func loadConfig(getenv func(string) string) (config, error) {
	p := envParser{getenv: getenv}
	c := config{
		HTTPAddr:               p.str("HTTP_ADDR", "127.0.0.1:8080"),
		DataDir:                p.str("DATA_DIR", "./data"),
		SessionTTL:             p.duration("SESSION_TTL", 30*time.Minute),
		CardRequestTTL:         p.duration("CARD_REQUEST_TTL", agentpay.DefaultCardRequestTTL),
		SpendApprovalTTL:       p.duration("SPEND_APPROVAL_TTL", agentpay.DefaultSpendApprovalTTL),
		LatePaymentWindow:      p.duration("LATE_PAYMENT_WINDOW", agentpay.DefaultLatePaymentWindow),
		WebhookRetention:       p.duration("WEBHOOK_RETENTION", agentpay.DefaultWebhookRetention),
		SettlementMinimum:      p.positiveUSD("SETTLEMENT_MINIMUM_USD", agentpay.DefaultSettlementMinimum),
		SettlementInterval:     p.nonNegativeDuration("SETTLEMENT_INTERVAL", -1),
		MaxOpenSessions:        p.nonNegativeInt("MAX_OPEN_SESSIONS", 1000),
		SelectRateLimit:        p.nonNegativeInt("SELECT_RATE_LIMIT", 10),
		RelayIPRateLimit:       p.nonNegativeInt("RELAY_IP_RATE_LIMIT", agentpay.DefaultRelayIPRateLimit),
		RelayMerchantRateLimit: p.nonNegativeInt("RELAY_MERCHANT_RATE_LIMIT", agentpay.DefaultRelayMerchantRateLimit),
		SignInRateLimit:        p.nonNegativeInt("SIGNIN_RATE_LIMIT", 20),
		SignInEmailLimit:       p.nonNegativeInt("SIGNIN_EMAIL_RATE_LIMIT", 5),
		AgentMailLimit:         p.nonNegativeInt("AGENT_MAIL_DAILY_LIMIT", 5),
		WithdrawalLimit:        p.positiveUSD("WITHDRAWAL_LIMIT_USD", agentpay.DefaultWithdrawalLimit),
		SendMinimums:           p.sendMinimums("SEND_MINIMUM_USD"),
		DustMinimums:           p.dustMinimums("DUST_MINIMUM_USD"),
		GasTokenPrices:         p.gasTokenPrices("GAS_TOKEN_PRICE_USD"),
		WithdrawalDailyLimit:   p.positiveUSD("WITHDRAWAL_DAILY_LIMIT_USD", agentpay.DefaultWithdrawalDailyLimit),
		IPRateLimit:            p.nonNegativeInt("IP_RATE_LIMIT", 600),
		AuthCacheTTL:           p.nonNegativeDuration("AUTH_CACHE_TTL", agentpay.DefaultAuthCacheTTL),
		RegisterRateLimit:      p.nonNegativeInt("REGISTER_RATE_LIMIT", 20),
		ProbeRateLimit:         p.nonNegativeInt("PROBE_RATE_LIMIT", 120),
		ConnectionsPerIP:       p.nonNegativeInt("WS_CONNECTIONS_PER_IP", 32),
		HeadCacheTTL:           p.duration("HEAD_CACHE_TTL", agentpay.DefaultHeadCacheTTL),
		DevBlockTime:           p.duration("DEV_BLOCK_TIME", time.Second),
		RPCTimeout:             p.duration("RPC_TIMEOUT", chains.DefaultRPCTimeout),
		LogLevel:               p.oneOf("LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		LogFormat:              p.oneOf("LOG_FORMAT", "text", "text", "json"),
		MetricsAddr:            p.listenAddr("METRICS_ADDR"),
		AgentMode:              agentpay.Mode(p.oneOf("AGENT_NETWORK", "live", "live", "test")),
	}
	c.BaseURL = p.url("BASE_URL", "http://"+c.HTTPAddr)
	c.PayURL = p.url("PAY_URL", c.BaseURL)
	c.AppURL = p.url("APP_URL", defaultAppURL(c.BaseURL))
	c.PasskeyRPID, c.PasskeyOrigin = passkeyRelyingParty(c.AppURL)
	c.DatabaseURL = p.str("DATABASE_URL", "file:"+filepath.Join(c.DataDir, "agentpay.db"))
	c.WebhookRetryDelays = p.durations("WEBHOOK_RETRY_DELAYS", "30s,2m,10m,30m,2h")
	c.WebhookAllowPrivate = p.optionalBool("WEBHOOK_ALLOW_PRIVATE")
	if on := p.optionalBool("INTERNAL_SETTLEMENT"); on != nil {
		c.InternalSettlement = *on
	}
	c.WebhookMerchantConcurrency = int(p.positiveUint("WEBHOOK_MERCHANT_CONCURRENCY", agentpay.DefaultWebhookMerchantConcurrency))
	c.WebhookSlowConcurrency = int(p.positiveUint("WEBHOOK_SLOW_CONCURRENCY", agentpay.DefaultWebhookSlowConcurrency))
	if v := p.str("ALLOWED_ORIGINS", ""); v != "" {
		c.AllowedOrigins = strings.Split(v, ",")
	}
	c.TrustedProxies = p.prefixes("TRUSTED_PROXIES")
	c.GraphQLIntrospection = p.optionalBool("GRAPHQL_INTROSPECTION")
	c.GraphQLPlayground = p.optionalBool("GRAPHQL_PLAYGROUND")
	c.SMTPURL, c.MailFrom = p.str("SMTP_URL", ""), p.str("MAIL_FROM", "")
	if c.SMTPURL != "" {
		if _, err := mail.ParseURL(c.SMTPURL); err != nil {
			p.fail("SMTP_URL", "%s", err) // the reason only: the URL holds the password
		}
		if c.MailFrom == "" {
			p.fail("MAIL_FROM", "required with SMTP_URL (the sender's address, such as \"agentpay <noreply@example.com>\")")
		}
	}
	if c.MailFrom != "" {
		if _, err := mail.ParseFrom(c.MailFrom); err != nil {
			p.fail("MAIL_FROM", "%s, got %q", err, c.MailFrom)
		}
	}
	c.Partners = p.partners("PARTNERS")
	if v := p.str("ADMIN_KEY", ""); v != "" {
		if len(v) < minAdminKeyLen {
			p.fail("ADMIN_KEY", "must be at least %d characters (a random secret, e.g. openssl rand -hex 32)", minAdminKeyLen)
		} else {
			c.AdminKeyHash = agentpay.AdminKeyHash(v)
		}
	}
	if v := p.str("MASTER_KEY", ""); v != "" {
		key, err := vault.ParseMasterKey(v)
		if err != nil {
			p.fail("MASTER_KEY", "must be 32 bytes, base64 or hex encoded")
		}
		c.MasterKey = key
	}

	c.Chains = map[agentpay.Mode]map[chains.Name]chainConfig{agentpay.ModeLive: {}, agentpay.ModeTest: {}}
	c.DevConfirmations = map[chains.Name]uint64{}
	for _, mode := range []agentpay.Mode{agentpay.ModeLive, agentpay.ModeTest} {
		for _, name := range chains.All {
			prefix := "CHAIN_" + strings.ToUpper(string(name)) + "_"
			if mode == agentpay.ModeTest {
				prefix += "TEST_"
			}
			confs := p.positiveUint(prefix+"CONFIRMATIONS", 0)
			if mode == agentpay.ModeTest && confs != 0 {
				c.DevConfirmations[name] = confs
			}
			rpcURL := p.url(prefix+"RPC_URL", "")
			if rpcURL == "" {
				continue
			}
			if confs == 0 {
				confs = defaultConfirmations[name]
			}
			c.Chains[mode][name] = chainConfig{
				RPCURL:        rpcURL,
				USDC:          p.str(prefix+"USDC", defaultUSDC[mode][name]),
				Confirmations: confs,
			}
		}
	}
	for _, name := range chains.All {
		if _, ok := c.DevConfirmations[name]; !ok {
			c.DevConfirmations[name] = defaultDevConfirmations
		}
	}
	c.CrashAfterBroadcast = p.oneOf("CRASH_AFTER_BROADCAST", "", "", "relay", "send")
	if c.CrashAfterBroadcast != "" && (len(c.Chains[agentpay.ModeLive]) > 0 || c.AgentMode == agentpay.ModeLive) {
		// A crash point in front of live money is never wanted: only a
		// deployment that holds test networks alone takes it.
		p.fail("CRASH_AFTER_BROADCAST", "is for the process tests only: refused with a live chain configured or AGENT_NETWORK=live")
	}
	return c, p.err()
}

// afterBroadcast is the service's crash point (agentpay.Config's
// AfterBroadcast) CRASH_AFTER_BROADCAST asks for: the process kills itself
// (SIGKILL, as a crash or an OOM kill ends it) right after broadcasting
// a payment of that kind, before recording or answering it. nil unset.
func (c config) afterBroadcast() func(string) {
	if c.CrashAfterBroadcast == "" {
		return nil
	}
	return func(what string) {
		if what == c.CrashAfterBroadcast {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

// defaultAppURL is APP_URL when unset: BASE_URL/app, with a loopback IP
// host (the default BASE_URL's 127.0.0.1) named localhost instead. The
// same machine answers either way, and WebAuthn takes localhost as a
// relying party id (and as a secure origin over http) but no IP address:
// so `agentpay dev` serves passkeys out of the box.
func defaultAppURL(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return baseURL + "/app"
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && ip.IsLoopback() {
		port := u.Port()
		u.Host = "localhost"
		if port != "" {
			u.Host += ":" + port
		}
	}
	return strings.TrimRight(u.String(), "/") + "/app"
}

// passkeyRelyingParty is the passkeys' relying party of an APP_URL: its
// host as the RP id and its origin (scheme, host and a port other than
// the scheme's) as the only origin whose answers are taken. An IP host
// has no RP id (WebAuthn refuses one): passkeys are then off, and the
// e-mailed link remains.
func passkeyRelyingParty(appURL string) (rpID, origin string) {
	u, err := url.Parse(appURL)
	if err != nil || u.Host == "" {
		return "", ""
	}
	host := strings.ToLower(u.Hostname())
	if _, err := netip.ParseAddr(host); err == nil {
		return "", ""
	}
	origin = u.Scheme + "://" + host
	if port := u.Port(); port != "" && !(u.Scheme == "http" && port == "80" || u.Scheme == "https" && port == "443") {
		origin += ":" + port
	}
	return host, origin
}

// webhookAllowPrivate is whether test-mode webhooks may reach private and
// loopback addresses: WEBHOOK_ALLOW_PRIVATE when set, else on under `dev`
// only (a developer's receiver is local; a deployment's network is not for
// merchants to probe).
func (c config) webhookAllowPrivate(dev bool) bool {
	if c.WebhookAllowPrivate != nil {
		return *c.WebhookAllowPrivate
	}
	return dev
}

// devSettlementInterval is SETTLEMENT_INTERVAL's default under `dev`: test
// payments are paid out within seconds, still batched.
const devSettlementInterval = 10 * time.Second

// settlementOptions are the service's settlement batching: the interval is
// SETTLEMENT_INTERVAL when set (0: a batch is paid as soon as a payment is
// swept), else an hour (agentpay.DefaultSettlementInterval), or
// devSettlementInterval under `dev`.
func (c config) settlementOptions(dev bool) agentpay.SettlementOptions {
	interval := c.SettlementInterval
	switch {
	case interval < 0 && dev:
		interval = devSettlementInterval
	case interval < 0:
		interval = agentpay.DefaultSettlementInterval
	case interval == 0:
		interval = -1 // the service's "no wait"
	}
	return agentpay.SettlementOptions{BatchMinimum: c.SettlementMinimum, BatchInterval: interval}
}

// envParser collects every bad variable so one start reports them all.
type envParser struct {
	getenv func(string) string
	errs   []error
}

func (p *envParser) fail(name, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

func (p *envParser) err() error { return errors.Join(p.errs...) }

func (p *envParser) str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

func (p *envParser) url(name, def string) string {
	v := p.str(name, def)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ws" && u.Scheme != "wss") {
		// Shown redacted: an RPC URL carries the provider's key.
		p.fail(name, "must be an absolute http(s) URL, got %q", redact.URL(v))
		return def
	}
	return strings.TrimRight(v, "/")
}

func (p *envParser) duration(name string, def time.Duration) time.Duration {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		p.fail(name, "must be a positive duration such as 30s or 2m, got %q", v)
		return def
	}
	return d
}

func (p *envParser) nonNegativeDuration(name string, def time.Duration) time.Duration {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		p.fail(name, "must be a duration such as 500ms or 0, got %q", v)
		return def
	}
	return d
}

func (p *envParser) durations(name, def string) []time.Duration {
	v := p.str(name, def)
	var out []time.Duration
	for _, part := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			p.fail(name, "must be a comma-separated list of positive durations, got %q", v)
			return nil
		}
		out = append(out, d)
	}
	return out
}

func (p *envParser) nonNegativeInt(name string, def int) int {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		p.fail(name, "must be a whole number >= 0, got %q", v)
		return def
	}
	return n
}

// positiveUSD reads an amount of USD: a positive number with at most 6
// decimals (USDC's), written without an exponent.
func (p *envParser) positiveUSD(name string, def decimal.Decimal) decimal.Decimal {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	d, err := agentpay.ParseAmount(name, v)
	if err != nil || !d.IsPositive() || !d.Equal(d.Round(6)) {
		p.fail(name, "must be a positive amount of USD with at most 6 decimals, got %q", v)
		return def
	}
	return d
}

// sendMinimums reads chain=amount pairs, comma-separated
// ("base=0.50,solana=0.05"): each chain an agents' chain named once, each
// amount of USD at least 0.01 with at most 6 decimals.
func (p *envParser) sendMinimums(name string) map[chains.Name]decimal.Decimal {
	return p.chainAmounts(name, "base=0.50,solana=0.05", "an amount of USD of at least "+agentpay.MinSendUSD.String(),
		func(d decimal.Decimal) bool { return d.GreaterThanOrEqual(agentpay.MinSendUSD) })
}

// dustMinimums reads DUST_MINIMUM_USD's chain=amount pairs: each amount
// of USD from 0 (no dust on that chain) to below the smallest session
// amount (a deposit paying a whole session is never dust).
func (p *envParser) dustMinimums(name string) map[chains.Name]decimal.Decimal {
	return p.chainAmounts(name, "base=0.01,solana=0.001", "an amount of USD from 0 to below "+agentpay.SessionMinAmount.String(),
		func(d decimal.Decimal) bool { return !d.IsNegative() && d.LessThan(agentpay.SessionMinAmount) })
}

// gasTokenPrices reads GAS_TOKEN_PRICE_USD's chain=amount pairs: each a
// USD price above 0.
func (p *envParser) gasTokenPrices(name string) map[chains.Name]decimal.Decimal {
	return p.chainAmounts(name, "base=4000,solana=200", "a price in USD above 0",
		func(d decimal.Decimal) bool { return d.IsPositive() })
}

// chainAmounts reads chain=amount pairs, comma-separated (as example):
// each chain named once, each amount valid (what rule says) with at most 6
// decimals.
func (p *envParser) chainAmounts(name, example, rule string, valid func(decimal.Decimal) bool) map[chains.Name]decimal.Decimal {
	v := p.str(name, "")
	if v == "" {
		return nil
	}
	out := map[chains.Name]decimal.Decimal{}
	for _, pair := range strings.Split(v, ",") {
		chainName, amount, ok := strings.Cut(strings.TrimSpace(pair), "=")
		chain, err := chains.ParseName(strings.TrimSpace(chainName))
		if !ok || err != nil {
			p.fail(name, "must be chain=amount pairs separated by commas (%s), got %q", example, pair)
			return nil
		}
		if _, dup := out[chain]; dup {
			p.fail(name, "names %s twice", chain)
			return nil
		}
		d, err := agentpay.ParseAmount(name, strings.TrimSpace(amount))
		if err != nil || !valid(d) || !d.Equal(d.Round(6)) {
			p.fail(name, "%s: must be %s with at most 6 decimals, got %q", chain, rule, amount)
			return nil
		}
		out[chain] = d
	}
	return out
}

func (p *envParser) positiveUint(name string, def uint64) uint64 {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		p.fail(name, "must be a whole number > 0, got %q", v)
		return def
	}
	return n
}

// prefixes reads a comma-separated list of CIDR blocks (10.0.0.0/8,
// 2001:db8::/32) or single addresses; empty is none.
func (p *envParser) prefixes(name string) []netip.Prefix {
	v := p.str(name, "")
	if v == "" {
		return nil
	}
	var out []netip.Prefix
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		pfx, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				p.fail(name, "must be a comma-separated list of CIDR blocks or addresses, got %q", part)
				return nil
			}
			a = a.Unmap()
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		// An IPv4 block written as IPv4-mapped IPv6 matches the addresses
		// clients are compared as (httpx.ClientIP unmaps them).
		if pfx.Addr().Is4In6() && pfx.Bits() >= 96 {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		out = append(out, pfx.Masked())
	}
	return out
}

// partners reads PARTNERS: identity partners separated by ';', each its
// name then space-separated settings:
//
//	alg=ES256|EdDSA         required: the one algorithm its tokens may use
//	jwks=https://...        where it publishes its keys, or
//	keyfile=/path           a file of its public keys (a JWK, a JWK Set or
//	                        PEM), read now
//	iss=...                 the iss of its tokens (default: the name)
//	aud=...                 the aud its tokens carry (default: BASE_URL)
//
// such as "skyfire alg=ES256 jwks=https://app.skyfire.xyz/.well-known/jwks.json
// iss=https://app.skyfire.xyz; acme alg=EdDSA keyfile=/etc/agentpay/acme.jwk".
// The service checks the rest (a key fitting alg) at start.
func (p *envParser) partners(name string) []agentpay.Partner {
	v := p.str(name, "")
	if v == "" {
		return nil
	}
	var out []agentpay.Partner
	seen := map[string]bool{}
	for _, entry := range strings.Split(v, ";") {
		fields := strings.Fields(entry)
		if len(fields) == 0 {
			continue
		}
		pt := agentpay.Partner{Name: fields[0]}
		fail := func(format string, args ...any) {
			p.fail(name, "partner %q: %s", pt.Name, fmt.Sprintf(format, args...))
		}
		if err := agentpay.ValidatePartnerName(pt.Name); err != nil {
			p.fail(name, "%s (each partner is its name, then alg=, jwks= or keyfile=, and optionally iss= and aud=, partners separated by ';')", err)
			continue
		}
		if seen[pt.Name] {
			fail("named twice")
			continue
		}
		seen[pt.Name] = true
		var keyFile string
		ok := true
		for _, f := range fields[1:] {
			k, val, found := strings.Cut(f, "=")
			if !found || val == "" {
				fail("%q is not a setting (key=value)", f)
				ok = false
				continue
			}
			switch k {
			case "alg":
				pt.Algorithm = val
			case "jwks":
				u, err := url.Parse(val)
				if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
					fail("jwks must be an absolute http(s) URL, got %q", redact.URL(val))
					ok = false
				}
				pt.JWKSURL = val
			case "keyfile":
				keyFile = val
			case "iss":
				pt.Issuer = val
			case "aud":
				pt.Audience = val
			default:
				fail("unknown setting %q (alg, jwks, keyfile, iss, aud)", k)
				ok = false
			}
		}
		if pt.Algorithm != agentpay.PartnerES256 && pt.Algorithm != agentpay.PartnerEdDSA {
			fail("alg must be %s or %s, got %q", agentpay.PartnerES256, agentpay.PartnerEdDSA, pt.Algorithm)
			ok = false
		}
		switch {
		case (pt.JWKSURL == "") == (keyFile == ""):
			fail("give exactly one of jwks= and keyfile=")
			ok = false
		case keyFile != "":
			data, err := os.ReadFile(keyFile)
			if err == nil && len(data) > jwks.DefaultMaxBytes {
				err = fmt.Errorf("larger than %d bytes", jwks.DefaultMaxBytes)
			}
			if err == nil {
				pt.Keys, err = jwks.Parse(data)
			}
			if err != nil {
				fail("keyfile %s: %v", keyFile, err)
				ok = false
			}
		}
		if ok {
			out = append(out, pt)
		}
	}
	return out
}

// optionalBool reads true or false (1, 0, ...); nil when unset.
func (p *envParser) optionalBool(name string) *bool {
	v := p.str(name, "")
	if v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, "must be true or false, got %q", v)
		return nil
	}
	return &b
}

func (p *envParser) oneOf(name, def string, allowed ...string) string {
	v := p.str(name, def)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail(name, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
	return def
}

// listenAddr reads a host:port to listen on ("" when unset; "off" kept as
// is: the caller decides what each means).
func (p *envParser) listenAddr(name string) string {
	v := p.str(name, "")
	if v == "" || v == "off" {
		return v
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		p.fail(name, "must be host:port (127.0.0.1:9464, :9464) or off, got %q", v)
		return ""
	}
	return v
}
