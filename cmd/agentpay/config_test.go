package main

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/mail"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(envOf(nil))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:8080", c.HTTPAddr)
	require.Equal(t, "http://127.0.0.1:8080", c.BaseURL)
	require.Equal(t, c.BaseURL, c.PayURL)
	require.Equal(t, "http://localhost:8080/app", c.AppURL, "WebAuthn takes localhost, not 127.0.0.1")
	require.Equal(t, "localhost", c.PasskeyRPID)
	require.Equal(t, "http://localhost:8080", c.PasskeyOrigin)
	require.Equal(t, 30*time.Minute, c.SessionTTL)
	require.Equal(t, 24*time.Hour, c.LatePaymentWindow)
	require.Equal(t, 30*24*time.Hour, c.WebhookRetention)
	require.Equal(t, 1000, c.MaxOpenSessions)
	require.Equal(t, 10, c.SelectRateLimit)
	require.Equal(t, 20, c.RelayIPRateLimit)
	require.Equal(t, 120, c.RelayMerchantRateLimit)
	require.Equal(t, 20, c.SignInRateLimit)
	require.Equal(t, 5, c.SignInEmailLimit)
	require.Equal(t, 5, c.AgentMailLimit)
	require.Equal(t, "10000", c.WithdrawalLimit.String())
	require.Equal(t, "25000", c.WithdrawalDailyLimit.String())
	require.Equal(t, []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 2 * time.Hour}, c.WebhookRetryDelays)
	require.Equal(t, 600, c.IPRateLimit)
	require.Equal(t, 20, c.RegisterRateLimit)
	require.Equal(t, 120, c.ProbeRateLimit)
	require.Equal(t, 32, c.ConnectionsPerIP)
	require.Equal(t, time.Second, c.HeadCacheTTL)
	require.Equal(t, 500*time.Millisecond, c.AuthCacheTTL)
	require.Equal(t, time.Second, c.DevBlockTime)
	require.Equal(t, 10*time.Second, c.RPCTimeout)
	require.Contains(t, c.DatabaseURL, "agentpay.db")
	require.Nil(t, c.MasterKey)
	require.Empty(t, c.Chains[agentpay.ModeLive])
	require.Equal(t, uint64(3), c.DevConfirmations[chains.Base])
	require.Nil(t, c.GraphQLIntrospection, "unset: the command decides (graphQLSurface)")
	require.Nil(t, c.GraphQLPlayground)
	require.Nil(t, c.WebhookAllowPrivate)
	require.Equal(t, 10, c.WebhookMerchantConcurrency)
	require.Equal(t, 50, c.WebhookSlowConcurrency)
}

// TestWebhookAllowPrivate: test-mode webhooks reach private addresses under
// `dev` unless WEBHOOK_ALLOW_PRIVATE says otherwise, and under serve and
// worker only when it says so.
func TestWebhookAllowPrivate(t *testing.T) {
	tests := []struct {
		value         string
		dev, deployed bool
	}{
		{"", true, false},
		{"true", true, true},
		{"1", true, true},
		{"false", false, false},
		{"0", false, false},
	}
	for _, tt := range tests {
		c, err := loadConfig(envOf(map[string]string{"WEBHOOK_ALLOW_PRIVATE": tt.value}))
		require.NoError(t, err)
		require.Equal(t, tt.dev, c.webhookAllowPrivate(true), "dev, %q", tt.value)
		require.Equal(t, tt.deployed, c.webhookAllowPrivate(false), "serve and worker, %q", tt.value)
	}
	c, err := loadConfig(envOf(map[string]string{"WEBHOOK_MERCHANT_CONCURRENCY": "3", "WEBHOOK_SLOW_CONCURRENCY": "40"}))
	require.NoError(t, err)
	require.Equal(t, 3, c.WebhookMerchantConcurrency)
	require.Equal(t, 40, c.WebhookSlowConcurrency)
}

// TestLoadConfigRelayRates: the relay rates come from the environment,
// 0 turning one off.
func TestLoadConfigRelayRates(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{"RELAY_IP_RATE_LIMIT": "7", "RELAY_MERCHANT_RATE_LIMIT": "0"}))
	require.NoError(t, err)
	require.Equal(t, 7, c.RelayIPRateLimit)
	require.Equal(t, 0, c.RelayMerchantRateLimit)
}

func TestLoadConfigChains(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{
		"CHAIN_BASE_RPC_URL":               "https://base.example/rpc",
		"CHAIN_SOLANA_TEST_RPC_URL":        "https://solana.example",
		"CHAIN_SOLANA_TEST_USDC":           "Mint111",
		"CHAIN_BASE_CONFIRMATIONS":         "20",
		"CHAIN_POLYGON_TEST_CONFIRMATIONS": "5",
	}))
	require.NoError(t, err)
	require.Equal(t, chainConfig{RPCURL: "https://base.example/rpc", USDC: defaultUSDC[agentpay.ModeLive][chains.Base], Confirmations: 20}, c.Chains[agentpay.ModeLive][chains.Base])
	require.Equal(t, chainConfig{RPCURL: "https://solana.example", USDC: "Mint111", Confirmations: 32}, c.Chains[agentpay.ModeTest][chains.Solana])
	require.Len(t, c.Chains[agentpay.ModeLive], 1)
	require.Equal(t, uint64(5), c.DevConfirmations[chains.Polygon])
}

// TestLoadConfigCrashAfterBroadcast: the process tests' crash point is
// taken only where no live money is: refused with a live chain or with
// agents' wallets on live networks, and unknown values refused.
func TestLoadConfigCrashAfterBroadcast(t *testing.T) {
	testOnly := map[string]string{"AGENT_NETWORK": "test", "CHAIN_BASE_TEST_RPC_URL": "http://127.0.0.1:8545"}
	c, err := loadConfig(envOf(testOnly))
	require.NoError(t, err)
	require.Nil(t, c.afterBroadcast(), "unset: no crash point")
	for _, what := range []string{"send", "relay"} {
		env := maps.Clone(testOnly)
		env["CRASH_AFTER_BROADCAST"] = what
		c, err := loadConfig(envOf(env))
		require.NoError(t, err)
		require.NotNil(t, c.afterBroadcast())
	}
	for name, env := range map[string]map[string]string{
		"a live chain":   {"AGENT_NETWORK": "test", "CHAIN_BASE_RPC_URL": "https://base.example/rpc", "CRASH_AFTER_BROADCAST": "send"},
		"live agents":    {"CHAIN_BASE_TEST_RPC_URL": "http://127.0.0.1:8545", "CRASH_AFTER_BROADCAST": "relay"},
		"an unknown one": {"AGENT_NETWORK": "test", "CRASH_AFTER_BROADCAST": "always"},
	} {
		_, err := loadConfig(envOf(env))
		require.ErrorContains(t, err, "CRASH_AFTER_BROADCAST", name)
	}
}

func TestAuthCacheTTLZeroTurnsTheCacheOff(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{"AUTH_CACHE_TTL": "0"}))
	require.NoError(t, err)
	require.Negative(t, serviceAuthCacheTTL(c.AuthCacheTTL), "a negative Config.AuthCacheTTL reads every key")
	require.Equal(t, 2*time.Second, serviceAuthCacheTTL(2*time.Second))
}

func TestLoadConfigRejectsBadValues(t *testing.T) {
	tests := []struct {
		name, value string
	}{
		{"SESSION_TTL", "soon"},
		{"SESSION_TTL", "-5m"},
		{"LATE_PAYMENT_WINDOW", "0"},
		{"WEBHOOK_RETENTION", "30d"},
		{"WEBHOOK_RETENTION", "0"},
		{"SETTLEMENT_MINIMUM_USD", "0"},
		{"SETTLEMENT_INTERVAL", "-1h"},
		{"MAX_OPEN_SESSIONS", "-1"},
		{"SELECT_RATE_LIMIT", "x"},
		{"RELAY_IP_RATE_LIMIT", "-1"},
		{"RELAY_MERCHANT_RATE_LIMIT", "many"},
		{"WEBHOOK_RETRY_DELAYS", "30s,often"},
		{"IP_RATE_LIMIT", "-1"},
		{"AUTH_CACHE_TTL", "-1s"},
		{"AUTH_CACHE_TTL", "briefly"},
		{"REGISTER_RATE_LIMIT", "many"},
		{"PROBE_RATE_LIMIT", "-1"},
		{"WS_CONNECTIONS_PER_IP", "lots"},
		{"HEAD_CACHE_TTL", "0"},
		{"DEV_BLOCK_TIME", "0"},
		{"RPC_TIMEOUT", "0"},
		{"BASE_URL", "not a url"},
		{"MASTER_KEY", "c2hvcnQ="},
		{"ADMIN_KEY", "short-admin-secret"},
		{"CHAIN_BASE_RPC_URL", "ftp://x"},
		// An RPC URL carries the provider's key: the error shows it redacted.
		{"CHAIN_BASE_RPC_URL", "ftp://rpcUser:rpcPassw0rd@node.example/v2/PathKeyAbc123xyz?api-key=QueryKeyDef456uvw"},
		{"CHAIN_SOLANA_TEST_RPC_URL", "https://rpcUser:rpcPassw0rd@[::1/v2/PathKeyAbc123xyz"},
		{"CHAIN_ETHEREUM_CONFIRMATIONS", "0"},
		{"LOG_LEVEL", "loud"},
		{"GRAPHQL_INTROSPECTION", "sometimes"},
		{"GRAPHQL_PLAYGROUND", "maybe"},
		{"WEBHOOK_ALLOW_PRIVATE", "sometimes"},
		{"WEBHOOK_MERCHANT_CONCURRENCY", "0"},
		{"WEBHOOK_SLOW_CONCURRENCY", "0"},
		{"WITHDRAWAL_LIMIT_USD", "0"},
		{"WITHDRAWAL_LIMIT_USD", "lots"},
		{"WITHDRAWAL_DAILY_LIMIT_USD", "-5"},
		{"WITHDRAWAL_DAILY_LIMIT_USD", "0.0000001"},
		{"SEND_MINIMUM_USD", "base"},
		{"SEND_MINIMUM_USD", "tron=1"},
		{"SEND_MINIMUM_USD", "base=0.001"},
		{"SEND_MINIMUM_USD", "base=0.5,base=1"},
		{"SEND_MINIMUM_USD", "solana=0.0000001"},
		{"DUST_MINIMUM_USD", "base"},
		{"DUST_MINIMUM_USD", "base=-0.01"},
		{"DUST_MINIMUM_USD", "base=0.50"},
		{"DUST_MINIMUM_USD", "base=0.0000001"},
		{"DUST_MINIMUM_USD", "base=0.01,base=0.02"},
		{"GAS_TOKEN_PRICE_USD", "base=0"},
		{"GAS_TOKEN_PRICE_USD", "tron=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			_, err := loadConfig(envOf(map[string]string{tt.name: tt.value}))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.name)
			if tt.name == "MASTER_KEY" || tt.name == "ADMIN_KEY" {
				require.NotContains(t, err.Error(), tt.value, "a secret never appears in an error")
			}
			for _, secret := range []string{"rpcUser", "rpcPassw0rd", "PathKeyAbc123xyz", "QueryKeyDef456uvw"} {
				require.NotContains(t, err.Error(), secret, "a secret never appears in an error")
			}
		})
	}
}

// ADMIN_KEY is kept as its SHA-256 only; unset, the admin API is off.
func TestLoadConfigAdminKey(t *testing.T) {
	const key = "0123456789abcdef0123456789abcdef"
	c, err := loadConfig(envOf(map[string]string{"ADMIN_KEY": " " + key + " "}))
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(key))
	require.Equal(t, sum[:], c.AdminKeyHash)
	require.NotContains(t, fmt.Sprintf("%+v", c), key, "the key itself is not kept")

	c, err = loadConfig(envOf(nil))
	require.NoError(t, err)
	require.Nil(t, c.AdminKeyHash)
}

func TestLoadConfigSendMinimums(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{"SEND_MINIMUM_USD": " base=0.50, solana=0.05"}))
	require.NoError(t, err)
	require.Len(t, c.SendMinimums, 2)
	require.Equal(t, "0.5", c.SendMinimums[chains.Base].String())
	require.Equal(t, "0.05", c.SendMinimums[chains.Solana].String())

	c, err = loadConfig(envOf(nil))
	require.NoError(t, err)
	require.Empty(t, c.SendMinimums, "none by default: 0.01 on every chain")
}

// DUST_MINIMUM_USD and GAS_TOKEN_PRICE_USD reach the service's
// configuration; unset, the service's defaults hold (one cent, the
// default gas token prices).
func TestLoadConfigDustSettings(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{"DUST_MINIMUM_USD": "base=0.05, solana=0", "GAS_TOKEN_PRICE_USD": "base=3500.5"}))
	require.NoError(t, err)
	require.Equal(t, "0.05", c.DustMinimums[chains.Base].String())
	require.True(t, c.DustMinimums[chains.Solana].IsZero())
	require.Equal(t, "3500.5", c.GasTokenPrices[chains.Base].String())

	c, err = loadConfig(envOf(nil))
	require.NoError(t, err)
	require.Empty(t, c.DustMinimums, "none by default: one cent on every chain")
	require.Empty(t, c.GasTokenPrices)
}

func TestLoadConfigTrustedProxies(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{"TRUSTED_PROXIES": "10.0.0.0/8, 192.0.2.7 ,2001:db8::/32,::ffff:198.51.100.0/120"}))
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("198.51.100.0/24"),
	}, c.TrustedProxies)

	c, err = loadConfig(envOf(nil))
	require.NoError(t, err)
	require.Empty(t, c.TrustedProxies, "none by default: the TCP peer is the client")

	for _, bad := range []string{"10.0.0.0/33", "proxy.internal"} {
		_, err := loadConfig(envOf(map[string]string{"TRUSTED_PROXIES": bad}))
		require.ErrorContains(t, err, "TRUSTED_PROXIES")
	}
}

// SMTP_URL and MAIL_FROM: the forms accepted, and the refusals, which name
// the variable and never quote the URL (it holds the SMTP password).
func TestLoadConfigMail(t *testing.T) {
	const from = "agentpay <noreply@example.com>"
	for _, tc := range []struct {
		name     string
		env      map[string]string
		err      string // a variable named in the error; "" for none
		security mail.Security
	}{
		{name: "unset: no SMTP", env: nil},
		{name: "starttls", env: map[string]string{"SMTP_URL": "smtp://user:hunter2@mail.example.com:587", "MAIL_FROM": from}, security: mail.StartTLS},
		{name: "smtps", env: map[string]string{"SMTP_URL": "smtps://user:hunter2@mail.example.com", "MAIL_FROM": from}, security: mail.ImplicitTLS},
		{name: "loopback relay", env: map[string]string{"SMTP_URL": "smtp://127.0.0.1:1025", "MAIL_FROM": "noreply@example.com"}, security: mail.StartTLSIfOffered},
		{name: "tls=none", env: map[string]string{"SMTP_URL": "smtp://relay.internal:25?tls=none", "MAIL_FROM": from}, security: mail.NoTLS},
		{name: "no MAIL_FROM", env: map[string]string{"SMTP_URL": "smtp://user:hunter2@mail.example.com"}, err: "MAIL_FROM"},
		{name: "bad MAIL_FROM", env: map[string]string{"SMTP_URL": "smtp://mail.example.com", "MAIL_FROM": "noreply"}, err: "MAIL_FROM"},
		{name: "bad scheme", env: map[string]string{"SMTP_URL": "https://user:hunter2@mail.example.com", "MAIL_FROM": from}, err: "SMTP_URL"},
		{name: "password in clear", env: map[string]string{"SMTP_URL": "smtp://user:hunter2@relay.internal?tls=none", "MAIL_FROM": from}, err: "SMTP_URL"},
		{name: "unparsable", env: map[string]string{"SMTP_URL": "smtp://user:hunter2%zz@mail.example.com", "MAIL_FROM": from}, err: "SMTP_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(envOf(tc.env))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.NotContains(t, err.Error(), "hunter2", "the SMTP password never appears in an error")
				return
			}
			require.NoError(t, err)
			m, err := newMailer(c, false)
			require.NoError(t, err)
			if tc.env == nil {
				require.Nil(t, m, "serve and worker without SMTP_URL send nothing")
				dm, err := newMailer(c, true)
				require.NoError(t, err)
				require.IsType(t, &mail.Catcher{}, dm, "dev without SMTP_URL catches mail")
				return
			}
			s, ok := m.(*mail.SMTP)
			require.True(t, ok)
			require.Equal(t, tc.security, s.Endpoint().Security)
			dm, err := newMailer(c, true)
			require.NoError(t, err)
			require.IsType(t, &mail.SMTP{}, dm, "dev with SMTP_URL sends for real")
		})
	}
}

// TestPasskeyRelyingParty: the passkeys' RP id is APP_URL's host and the
// origin APP_URL's; an IP host turns passkeys off; APP_URL's default names
// a loopback BASE_URL's host localhost.
func TestPasskeyRelyingParty(t *testing.T) {
	for _, tc := range []struct {
		env             map[string]string
		app, id, origin string
	}{
		{map[string]string{"APP_URL": "https://App.Example.com/app"}, "https://App.Example.com/app", "app.example.com", "https://app.example.com"},
		{map[string]string{"APP_URL": "https://example.com:443"}, "https://example.com:443", "example.com", "https://example.com"},
		{map[string]string{"APP_URL": "http://example.com:8080/humans/"}, "http://example.com:8080/humans", "example.com", "http://example.com:8080"},
		{map[string]string{"BASE_URL": "https://api.example.com"}, "https://api.example.com/app", "api.example.com", "https://api.example.com"},
		{map[string]string{"HTTP_ADDR": "127.0.0.1:9000"}, "http://localhost:9000/app", "localhost", "http://localhost:9000"},
		{map[string]string{"BASE_URL": "http://[::1]:9000"}, "http://localhost:9000/app", "localhost", "http://localhost:9000"},
		{map[string]string{"HTTP_ADDR": "0.0.0.0:8080"}, "http://0.0.0.0:8080/app", "", ""},
		{map[string]string{"APP_URL": "http://127.0.0.1:8080/app"}, "http://127.0.0.1:8080/app", "", ""},
		{map[string]string{"APP_URL": "http://10.0.0.5/app"}, "http://10.0.0.5/app", "", ""},
	} {
		c, err := loadConfig(envOf(tc.env))
		require.NoError(t, err)
		require.Equal(t, tc.app, c.AppURL, "%v", tc.env)
		require.Equal(t, tc.id, c.PasskeyRPID, "%v", tc.env)
		require.Equal(t, tc.origin, c.PasskeyOrigin, "%v", tc.env)
	}
}

// TestLoadConfigInternalSettlement: INTERNAL_SETTLEMENT is off unless set
// true; anything but a boolean is refused.
func TestLoadConfigInternalSettlement(t *testing.T) {
	for value, want := range map[string]bool{"": false, "false": false, "true": true, "1": true} {
		c, err := loadConfig(envOf(map[string]string{"INTERNAL_SETTLEMENT": value}))
		require.NoError(t, err)
		require.Equal(t, want, c.InternalSettlement, "%q", value)
	}
	_, err := loadConfig(envOf(map[string]string{"INTERNAL_SETTLEMENT": "maybe"}))
	require.ErrorContains(t, err, "INTERNAL_SETTLEMENT")
}
