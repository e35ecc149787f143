package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/mailmessage"
	"agentpay/ent/merchantkey"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
	"agentpay/internal/vault"
)

// merchantCreds is a merchant registered through the API.
type merchantCreds struct {
	ID                     string
	LivePublic, LiveSecret string
	TestPublic, TestSecret string
	// WebhookSecret signs live deliveries, TestWebhookSecret test ones.
	WebhookSecret, TestWebhookSecret string
	Body                             []byte
}

func (c merchantCreds) live() http.Header { return secretKey(c.LiveSecret) }
func (c merchantCreds) test() http.Header { return secretKey(c.TestSecret) }

// secretKey is the header set of an authenticated merchant request.
func secretKey(k string) http.Header { return http.Header{"X-Checkout-Secret-Key": {k}} }

// registerMerchant creates a merchant through POST /checkout/merchants/register.
func (a *testAPI) registerMerchant(body map[string]any) merchantCreds {
	a.t.Helper()
	if body == nil {
		body = map[string]any{"name": "Acme", "email": "billing@acme.test"}
	}
	resp := a.do(http.MethodPost, "/checkout/merchants/register", body, nil)
	require.Equal(a.t, http.StatusCreated, resp.Status, string(resp.Body))
	var out struct {
		Merchant struct {
			ID string `json:"id"`
		} `json:"merchant"`
		Keys merchantKeysBody `json:"keys"`
	}
	resp.JSON(a.t, &out)
	return merchantCreds{
		ID:         out.Merchant.ID,
		LivePublic: out.Keys.LivePublicKey, LiveSecret: out.Keys.LiveSecretKey,
		TestPublic: out.Keys.TestPublicKey, TestSecret: out.Keys.TestSecretKey,
		WebhookSecret: out.Keys.WebhookSecret, TestWebhookSecret: out.Keys.TestWebhookSecret, Body: resp.Body,
	}
}

// createSession creates a session and returns its envelope.
func (a *testAPI) createSession(h http.Header, body map[string]any) (sessionEnvelope, apiResponse) {
	a.t.Helper()
	if body == nil {
		body = map[string]any{"amount": 25, "currency": "USD"}
	}
	resp := a.do(http.MethodPost, "/checkout/sessions", body, h)
	require.Equal(a.t, http.StatusCreated, resp.Status, string(resp.Body))
	var env sessionEnvelope
	resp.JSON(a.t, &env)
	return env, resp
}

// sessionExtra normalises a session's external id for golden files.
func sessionExtra(ids ...string) map[string]string {
	out := map[string]string{}
	for i, id := range ids {
		out[id] = fmt.Sprintf("<external_id_%d>", i+1)
	}
	return out
}

var fullMerchant = map[string]any{
	"name":               "Acme Widgets",
	"email":              "billing@acme.test",
	"website":            "https://acme.test",
	"webhook_url":        "https://acme.test/hooks/agentpay",
	"success_url":        "https://acme.test/thanks",
	"cancel_url":         "https://acme.test/cart",
	"settlement_type":    "crypto_usdc",
	"settlement_address": "0x52908400098527886E0F7030069857D2E4169EE7",
	"settlement_chain":   "base",
	"accepted_tokens":    []map[string]any{{"chain": "solana", "token": "USDC"}, {"chain": "base", "token": "USDC"}},
	"brand_color":        "#FF6600",
}

func TestMerchantRegisterShape(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	ctx := context.Background()

	full := api.registerMerchant(fullMerchant)
	assertGolden(t, "merchant_register", full.Body, nil)
	body := map[string]any{}
	require.NoError(t, jsonUnmarshal(full.Body, &body))
	m := body["merchant"].(map[string]any)
	require.Equal(t, "#ff6600", m["brand_color"], "stored lower case")
	require.Equal(t, map[string]any{"live": full.LivePublic, "test": full.TestPublic}, m["public_keys"])

	minimal := api.registerMerchant(nil)
	assertGolden(t, "merchant_register_minimal", minimal.Body, nil)

	// Secret keys are stored only as hashes, public keys as they are; the
	// webhook secret is sealed, never stored in the clear.
	keys := api.DB.Ent.MerchantKey.Query().Where(merchantkey.MerchantID(uuid.MustParse(full.ID))).AllX(ctx)
	require.Len(t, keys, 2)
	for _, k := range keys {
		pub, sec := full.LivePublic, full.LiveSecret
		if k.Kind == merchantkey.KindTest {
			pub, sec = full.TestPublic, full.TestSecret
		}
		require.Equal(t, pub, k.PublicKey)
		require.Equal(t, vault.HashSecret(sec), k.SecretKeyHash)
		require.Nil(t, k.RevokedAt)
	}
	row := api.DB.Ent.Merchant.GetX(ctx, uuid.MustParse(full.ID))
	require.NotContains(t, string(row.WebhookSecretEncrypted), full.WebhookSecret)
	require.NotContains(t, string(row.TestWebhookSecretEncrypted), full.TestWebhookSecret)
	require.NotEqual(t, full.WebhookSecret, minimal.WebhookSecret)
	// One secret per mode, of the Standard Webhooks form; the webhook URL
	// given is both modes'.
	require.NotEqual(t, full.WebhookSecret, full.TestWebhookSecret)
	for _, s := range []string{full.WebhookSecret, full.TestWebhookSecret} {
		require.Regexp(t, `^whsec_[A-Za-z0-9+/]{43}=$`, s)
	}
	require.Equal(t, fullMerchant["webhook_url"], row.WebhookURL)
	require.Equal(t, fullMerchant["webhook_url"], row.TestWebhookURL)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func TestMerchantRegisterValidation(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	with := func(k string, v any) map[string]any {
		b := map[string]any{"name": "Acme", "email": "a@acme.test"}
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	tests := []struct {
		name   string
		body   any
		detail string
	}{
		{"name missing", with("name", nil), "name: is required"},
		{"name blank", with("name", "  "), "name: is required"},
		{"name too long", with("name", strings.Repeat("n", 201)), "name: must be at most 200 characters long"},
		{"name not a string", with("name", 5), "name: must be a string"},
		{"email missing", with("email", nil), "email: is required"},
		{"email empty", with("email", ""), "email: is required"},
		{"email no at", with("email", "acme.test"), "email: is not a valid e-mail address"},
		{"email no domain dot", with("email", "a@localhost"), "email: is not a valid e-mail address"},
		{"email display name", with("email", "Acme <a@acme.test>"), "email: is not a valid e-mail address"},
		{"website not a URL", with("website", "acme.test"), "website: must be an absolute http or https URL"},
		{"webhook_url ftp", with("webhook_url", "ftp://acme.test/x"), webhookURLError("ftp://acme.test/x", false)},
		{"success_url no host", with("success_url", "https://"), "success_url: must be an absolute http or https URL"},
		{"cancel_url javascript", with("cancel_url", "javascript:alert(1)"), "cancel_url: must be an absolute http or https URL"},
		{"settlement_type unknown", with("settlement_type", "wire"), "settlement_type: must be crypto_usdc or fiat_pix"},
		{"settlement_chain unknown", with("settlement_chain", "bitcoin"), "settlement_chain: must be one of base, arbitrum, solana, ethereum, polygon"},
		{"settlement_chain without address", with("settlement_chain", "base"), "settlement_address: is required when settlement_chain is set"},
		{"settlement_address garbage", with("settlement_address", "not-an-address"), "settlement_address: is not a valid EVM or Solana address"},
		{"settlement_address wrong family", map[string]any{"name": "A", "email": "a@acme.test", "settlement_chain": "solana",
			"settlement_address": "0x52908400098527886E0F7030069857D2E4169EE7"}, "settlement_address: is not a valid Solana address (settlement_chain is solana)"},
		{"settlement_address bad checksum", map[string]any{"name": "A", "email": "a@acme.test", "settlement_chain": "base",
			"settlement_address": "0x52908400098527886e0F7030069857D2E4169EE7"}, "settlement_address: is not a valid EVM address (settlement_chain is base)"},
		{"accepted_tokens empty", with("accepted_tokens", []any{}), "accepted_tokens: must list at least one {chain, token} (omit it for the default: USDC on every chain)"},
		{"accepted_tokens strings", with("accepted_tokens", []any{"USDC"}), "accepted_tokens: must be a object"},
		{"accepted_tokens unknown chain", with("accepted_tokens", []any{map[string]any{"chain": "tron", "token": "USDC"}}), "accepted_tokens: [0].chain must be one of base, arbitrum, solana, ethereum, polygon"},
		{"accepted_tokens other token", with("accepted_tokens", []any{map[string]any{"chain": "base", "token": "USDT"}}), "accepted_tokens: [0].token must be USDC"},
		{"accepted_tokens duplicate", with("accepted_tokens", []any{map[string]any{"chain": "base", "token": "USDC"}, map[string]any{"chain": "base", "token": "USDC"}}), "accepted_tokens: [1] lists USDC base twice"},
		{"accepted_tokens extra field", with("accepted_tokens", []any{map[string]any{"chain": "base", "token": "USDC", "x": 1}}), `json: unknown field "x"`},
		{"brand_color short", with("brand_color", "#fff"), "brand_color: must be a hex color of the form #rrggbb"},
		{"brand_color no hash", with("brand_color", "ff6600"), "brand_color: must be a hex color of the form #rrggbb"},
		{"brand_color not hex", with("brand_color", "#gg0000"), "brand_color: must be a hex color of the form #rrggbb"},
		{"unknown field", with("phone", "123"), `json: unknown field "phone"`},
		{"malformed JSON", `{"name":`, "malformed JSON: unexpected end of body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/checkout/merchants/register", tt.body, nil)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
			require.Equal(t, map[string]any{"detail": tt.detail}, resp.Map(t))
		})
	}
	ctx := context.Background()
	require.Zero(t, api.DB.Ent.Merchant.Query().CountX(ctx), "refusals write nothing")
	require.Zero(t, api.DB.Ent.MerchantKey.Query().CountX(ctx))
}

func TestMerchantRegisterRateLimited(t *testing.T) {
	// The registrations fall into one hour's window, whenever the test runs.
	api := newTestAPI(t, testAPIConfig{Config: agentpay.Config{RegisterRateLimit: 2, Clock: rateClock()}})
	api.registerMerchant(nil)
	resp := api.do(http.MethodPost, "/checkout/merchants/register", map[string]any{"name": "x"}, nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "a failed attempt counts too")
	resp = api.do(http.MethodPost, "/checkout/merchants/register", map[string]any{"name": "A", "email": "a@acme.test"}, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.Status)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
}

func TestMerchantMeAndUpdate(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(fullMerchant)

	resp := api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "merchant_me", resp.Body, nil)
	// The test key reads the same merchant.
	resp2 := api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.test())
	require.JSONEq(t, string(resp.Body), string(resp2.Body))

	patch := api.do(http.MethodPatch, "/checkout/merchants/me", map[string]any{
		"name":             "Acme Two",
		"website":          "",
		"settlement_type":  "fiat_pix",
		"settlement_chain": "",
		// settlement_address stays: with no chain it may be any EVM or Solana address
		"accepted_tokens":      []map[string]any{{"chain": "polygon", "token": "USDC"}},
		"brand_color":          nil, // null: unchanged
		"settle_held_payments": true,
	}, mc.live())
	require.Equal(t, http.StatusOK, patch.Status, string(patch.Body))
	assertGolden(t, "merchant_patch", patch.Body, nil)

	// An empty PATCH changes nothing.
	same := api.do(http.MethodPatch, "/checkout/merchants/me", map[string]any{}, mc.test())
	require.Equal(t, http.StatusOK, same.Status)
	got, want := same.Map(t), patch.Map(t)
	delete(got, "updated_at")
	delete(want, "updated_at")
	require.Equal(t, want, got)

	// Validation on update: 422 and nothing changes.
	tests := []struct {
		name   string
		body   any
		detail string
	}{
		{"name empty", map[string]any{"name": ""}, "name: is required"},
		{"email bad", map[string]any{"email": "nope"}, "email: is not a valid e-mail address"},
		{"settlement_type empty", map[string]any{"settlement_type": ""}, "settlement_type: must be crypto_usdc or fiat_pix"},
		{"chain against stored address", map[string]any{"settlement_chain": "solana"}, "settlement_address: is not a valid Solana address (settlement_chain is solana)"},
		{"webhook_url bad", map[string]any{"webhook_url": "acme"}, webhookURLError("acme", false)},
		{"webhook_url loopback with a live key", map[string]any{"webhook_url": "http://127.0.0.1:9000/hook"}, webhookURLError("http://127.0.0.1:9000/hook", false)},
		{"accepted_tokens empty", map[string]any{"accepted_tokens": []any{}}, "accepted_tokens: must list at least one {chain, token} (omit it for the default: USDC on every chain)"},
		{"brand_color bad", map[string]any{"brand_color": "red"}, "brand_color: must be a hex color of the form #rrggbb"},
		{"unknown field", map[string]any{"active": false}, `json: unknown field "active"`},
		{"empty body", "", "request body must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.do(http.MethodPatch, "/checkout/merchants/me", tt.body, mc.live())
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
			require.Equal(t, map[string]any{"detail": tt.detail}, resp.Map(t))
		})
	}
	after := api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live())
	got = after.Map(t)
	delete(got, "updated_at")
	require.Equal(t, want, got, "refused updates change nothing")

	// With private addresses allowed (WEBHOOK_ALLOW_PRIVATE, on in `agentpay
	// dev` and in these tests' bundle), a test key may point test mode's
	// webhook at a local receiver (registration too); a live key may not
	// point live mode's there (above). Each key sees its own mode's URL.
	local := api.do(http.MethodPatch, "/checkout/merchants/me", map[string]any{"webhook_url": "http://127.0.0.1:9000/hook"}, mc.test())
	require.Equal(t, http.StatusOK, local.Status, string(local.Body))
	require.Equal(t, "http://127.0.0.1:9000/hook", local.Map(t)["webhook_url"])
	require.Equal(t, fullMerchant["webhook_url"], api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live()).Map(t)["webhook_url"])
	api.registerMerchant(map[string]any{"name": "Local", "email": "l@local.test", "webhook_url": "http://localhost:8081/hook"})

	// Unless the operator allows private addresses, a test key may not
	// point test mode's webhook at a local receiver either, nor may a
	// registration.
	public := newTestAPI(t, testAPIConfig{Env: testenv.New(t, testenv.Options{PublicWebhooksOnly: true})})
	pmc := public.registerMerchant(fullMerchant)
	for _, raw := range []string{"http://127.0.0.1:9000/hook", "http://localhost:8081/hook", "http://169.254.169.254/latest/meta-data"} {
		resp := public.do(http.MethodPatch, "/checkout/merchants/me", map[string]any{"webhook_url": raw}, pmc.test())
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
		require.Equal(t, map[string]any{"detail": webhookURLError(raw, false)}, resp.Map(t))
		resp = public.do(http.MethodPost, "/checkout/merchants/register", map[string]any{"name": "Local", "email": "l@local.test", "webhook_url": raw}, nil)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
		require.Equal(t, map[string]any{"detail": webhookURLError(raw, false)}, resp.Map(t))
	}
	require.Equal(t, fullMerchant["webhook_url"], public.do(http.MethodGet, "/checkout/merchants/me", nil, pmc.test()).Map(t)["webhook_url"],
		"refused updates change nothing")
}

// TestMerchantTestKeyScope: PATCH with a test key changes test mode's
// webhook_url and nothing else. Every other field is shared with live mode
// (settlement, what customers see, where they are sent), so naming one is
// 403 and changes nothing; the live webhook URL is neither changed nor
// shown to a test key.
func TestMerchantTestKeyScope(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(fullMerchant)
	before := api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live())
	require.Equal(t, http.StatusOK, before.Status)

	for _, tt := range []struct {
		name   string
		body   map[string]any
		fields string
	}{
		{"settlement_address", map[string]any{"settlement_address": "0x000000000000000000000000000000000000dEaD"}, "settlement_address"},
		{"settlement_chain", map[string]any{"settlement_chain": "polygon"}, "settlement_chain"},
		{"settlement_type", map[string]any{"settlement_type": "fiat_pix"}, "settlement_type"},
		{"settle_held_payments", map[string]any{"settle_held_payments": false}, "settle_held_payments"},
		{"success_url", map[string]any{"success_url": "https://evil.test/ok"}, "success_url"},
		{"cancel_url", map[string]any{"cancel_url": ""}, "cancel_url"},
		{"accepted_tokens", map[string]any{"accepted_tokens": []map[string]any{{"chain": "polygon", "token": "USDC"}}}, "accepted_tokens"},
		{"name", map[string]any{"name": "Acme Widgets"}, "name"},
		{"email", map[string]any{"email": "x@evil.test"}, "email"},
		{"website", map[string]any{"website": "https://evil.test"}, "website"},
		{"brand_color", map[string]any{"brand_color": "#000000"}, "brand_color"},
		{"several, with webhook_url", map[string]any{"webhook_url": "https://evil.test/hook", "settlement_address": "0x000000000000000000000000000000000000dEaD", "name": "X"},
			"name, settlement_address"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.do(http.MethodPatch, "/checkout/merchants/me", tt.body, mc.test())
			require.Equal(t, http.StatusForbidden, resp.Status, string(resp.Body))
			require.Equal(t, map[string]any{"detail": "insufficient permissions: a test key changes test-mode settings only (webhook_url); " +
				tt.fields + " need a live secret key"}, resp.Map(t))
		})
	}
	after := api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live())
	require.JSONEq(t, string(before.Body), string(after.Body), "refused changes change nothing")

	// webhook_url alone: test mode's. The live key still sees (and
	// deliveries still use) live mode's.
	resp := api.do(http.MethodPatch, "/checkout/merchants/me", map[string]any{"webhook_url": "https://test-receiver.acme.test/hook"}, mc.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, "https://test-receiver.acme.test/hook", resp.Map(t)["webhook_url"])
	require.Equal(t, "https://test-receiver.acme.test/hook", api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.test()).Map(t)["webhook_url"])
	require.Equal(t, fullMerchant["webhook_url"], api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live()).Map(t)["webhook_url"])
	row := api.DB.Ent.Merchant.GetX(context.Background(), uuid.MustParse(mc.ID))
	require.Equal(t, fullMerchant["webhook_url"], row.WebhookURL)
	require.Equal(t, "https://test-receiver.acme.test/hook", row.TestWebhookURL)
}

// webhookURLError is the detail the webhook URL rule gives for raw, with
// private addresses allowed or not.
func webhookURLError(raw string, privateOK bool) string {
	err := agentpay.ValidateWebhookURL(raw, privateOK)
	if err == nil {
		return "<accepted>"
	}
	return err.Error()
}

// merchantPaths is every route that needs a secret key.
var merchantPaths = []struct{ method, path string }{
	{http.MethodGet, "/checkout/merchants/me"},
	{http.MethodPatch, "/checkout/merchants/me"},
	{http.MethodPost, "/checkout/merchants/me/keys/roll"},
	{http.MethodPost, "/checkout/merchants/me/webhook-secret/roll"},
	{http.MethodPost, "/checkout/sessions"},
	{http.MethodGet, "/checkout/sessions"},
	{http.MethodGet, "/checkout/sessions/cs_test_000000000000000000000000"},
	{http.MethodPost, "/checkout/sessions/cs_test_000000000000000000000000/cancel"},
}

func TestMerchantAuthRules(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(nil)
	other := api.registerMerchant(map[string]any{"name": "Other", "email": "o@other.test"})
	unknown, _, err := vault.NewSecret(vault.PrefixSecretLive)
	require.NoError(t, err)

	for _, p := range merchantPaths {
		for _, tt := range []struct {
			name   string
			header http.Header
		}{
			{"no key", nil},
			{"empty key", secretKey("")},
			{"malformed key", secretKey("sk_live_short")},
			{"unknown key", secretKey(unknown)},
			{"public key as secret", secretKey(mc.LivePublic)},
			{"agent key header", agentKey(mc.LiveSecret)},
			{"key of another kind", secretKey(mc.WebhookSecret)},
		} {
			resp := api.do(p.method, p.path, map[string]any{}, tt.header)
			require.Equal(t, http.StatusUnauthorized, resp.Status, "%s %s %s", tt.name, p.method, p.path)
			require.Equal(t, "invalid or missing API key", resp.Map(t)["detail"])
		}
	}

	// Deactivation: every merchant call answers 403, with either key, on
	// every instance; other merchants are untouched.
	// The second instance has its own pool (as another process) and has
	// just authenticated both keys: its cache holds them.
	api2 := newTestAPI(t, testAPIConfig{DB: testdb.Reopen(t, api.DB)})
	for _, h := range []http.Header{mc.live(), mc.test()} {
		require.Equal(t, http.StatusOK, api2.do(http.MethodGet, "/checkout/merchants/me", nil, h).Status)
	}
	_, err = api.Svc.DeactivateMerchant(context.Background(), uuid.MustParse(mc.ID))
	require.NoError(t, err)
	for _, p := range merchantPaths {
		for _, h := range []http.Header{mc.live(), mc.test()} {
			resp := api2.do(p.method, p.path, map[string]any{"amount": 1, "currency": "USD"}, h)
			require.Equal(t, http.StatusForbidden, resp.Status, "%s %s: %s", p.method, p.path, resp.Body)
			require.Equal(t, "insufficient permissions: merchant is deactivated", resp.Map(t)["detail"])
		}
	}
	resp := api2.do(http.MethodGet, "/checkout/merchants/me", nil, other.live())
	require.Equal(t, http.StatusOK, resp.Status)

	// A bad key is still 401 for a deactivated merchant's caller.
	resp = api2.do(http.MethodGet, "/checkout/merchants/me", nil, secretKey(unknown))
	require.Equal(t, http.StatusUnauthorized, resp.Status)

	_, err = api.Svc.ReactivateMerchant(context.Background(), uuid.MustParse(mc.ID))
	require.NoError(t, err)
	resp = api2.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live())
	require.Equal(t, http.StatusOK, resp.Status)
}

func TestMerchantKeyRollAcrossInstances(t *testing.T) {
	a := newTestAPI(t, testAPIConfig{})
	b := newTestAPI(t, testAPIConfig{DB: testdb.Reopen(t, a.DB), Vault: nil}) // as another process
	mc := a.registerMerchant(nil)
	before, _ := a.createSession(mc.test(), nil)

	// Both instances accept the keys (and hold them in their caches), then
	// A rolls the live pair.
	for _, api := range []*testAPI{a, b} {
		for _, h := range []http.Header{mc.live(), mc.test()} {
			require.Equal(t, http.StatusOK, api.do(http.MethodGet, "/checkout/merchants/me", nil, h).Status)
		}
		_, err := api.Svc.MerchantByPublicKey(context.Background(), mc.LivePublic)
		require.NoError(t, err)
	}
	resp := a.do(http.MethodPost, "/checkout/merchants/me/keys/roll", nil, mc.live())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "merchant_keys_roll", resp.Body, nil)
	var rolled rolledKeysBody
	resp.JSON(t, &rolled)
	require.Empty(t, rolled.Keys.WebhookSecret, "the webhook secret is not rolled")
	require.Empty(t, rolled.Keys.TestSecretKey, "the test pair is not rolled")

	// The old live key is refused at once on the other instance, and so is
	// rolling again with it; the test key is untouched.
	resp = b.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live())
	require.Equal(t, http.StatusUnauthorized, resp.Status)
	resp = b.do(http.MethodPost, "/checkout/merchants/me/keys/roll", nil, mc.live())
	require.Equal(t, http.StatusUnauthorized, resp.Status)
	require.Equal(t, http.StatusOK, b.do(http.MethodGet, "/checkout/merchants/me", nil, mc.test()).Status)
	// The new keys work everywhere and see the same merchant and sessions.
	me := b.do(http.MethodGet, "/checkout/merchants/me", nil, secretKey(rolled.Keys.LiveSecretKey))
	require.Equal(t, http.StatusOK, me.Status)
	require.Equal(t, mc.ID, me.Map(t)["id"])
	require.Equal(t, map[string]any{"live": rolled.Keys.LivePublicKey, "test": mc.TestPublic}, me.Map(t)["public_keys"])

	// The old live public key no longer resolves either, on either instance.
	for _, api := range []*testAPI{a, b} {
		_, err := api.Svc.MerchantByPublicKey(context.Background(), mc.LivePublic)
		require.ErrorIs(t, err, agentpay.ErrUnauthorized)
	}

	// A live key may roll the test pair (a lost test key).
	resp = a.do(http.MethodPost, "/checkout/merchants/me/keys/roll", map[string]any{"mode": "test"}, secretKey(rolled.Keys.LiveSecretKey))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var testRolled rolledKeysBody
	resp.JSON(t, &testRolled)
	require.Empty(t, testRolled.Keys.LiveSecretKey)
	require.Equal(t, http.StatusUnauthorized, b.do(http.MethodGet, "/checkout/merchants/me", nil, mc.test()).Status)
	got := b.do(http.MethodGet, "/checkout/sessions/"+before.Session.ExternalID, nil, secretKey(testRolled.Keys.TestSecretKey))
	require.Equal(t, http.StatusOK, got.Status)
	auth, err := a.Svc.MerchantByPublicKey(context.Background(), testRolled.Keys.TestPublicKey)
	require.NoError(t, err)
	require.Equal(t, agentpay.ModeTest, auth.Mode)
}

// TestMerchantKeyRollTestKey: a test key rolls the test pair and is never
// shown a live key; asking for the live pair is 403 and revokes nothing.
func TestMerchantKeyRollTestKey(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(nil)

	for _, tt := range []struct {
		body   any
		status int
		detail string
	}{
		{map[string]any{"mode": "live"}, http.StatusForbidden, "insufficient permissions: a test key rolls test keys only; rolling live keys needs a live secret key"},
		{map[string]any{"mode": "staging"}, http.StatusUnprocessableEntity, "mode: must be live or test"},
		{map[string]any{"pair": "test"}, http.StatusUnprocessableEntity, `json: unknown field "pair"`},
	} {
		resp := api.do(http.MethodPost, "/checkout/merchants/me/keys/roll", tt.body, mc.test())
		require.Equal(t, tt.status, resp.Status, string(resp.Body))
		require.Equal(t, map[string]any{"detail": tt.detail}, resp.Map(t))
	}
	for _, h := range []http.Header{mc.live(), mc.test()} {
		require.Equal(t, http.StatusOK, api.do(http.MethodGet, "/checkout/merchants/me", nil, h).Status, "refusals revoke nothing")
	}

	for _, body := range []any{nil, map[string]any{"mode": "test"}} {
		resp := api.do(http.MethodPost, "/checkout/merchants/me/keys/roll", body, mc.test())
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		assertGolden(t, "merchant_keys_roll_test", resp.Body, nil)
		var rolled rolledKeysBody
		resp.JSON(t, &rolled)
		require.Equal(t, http.StatusUnauthorized, api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.test()).Status)
		require.Equal(t, http.StatusOK, api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live()).Status, "the live pair is untouched")
		mc.TestSecret = rolled.Keys.TestSecretKey
	}
}

func TestSessionCreateShape(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(nil)

	env, resp := api.createSession(mc.test(), map[string]any{
		"amount":          1234.5,
		"currency":        "USD",
		"description":     "2 widgets",
		"success_url":     "https://acme.test/ok",
		"cancel_url":      "https://acme.test/no",
		"metadata":        map[string]any{"order_id": "A-17", "qty": 2, "tags": []any{"x", true, nil}, "big": 9007199254740992},
		"idempotency_key": "order-A-17",
	})
	s := env.Session
	assertGolden(t, "session_create", resp.Body, sessionExtra(s.ExternalID))
	require.Regexp(t, `^cs_test_[0-9A-Za-z]{24}$`, s.ExternalID)
	require.Equal(t, "http://pay.test/pay/"+s.ExternalID, env.CheckoutURL)
	require.Equal(t, env.CheckoutURL+"/embed", env.EmbedURL)
	require.Equal(t, "1234.5", s.AmountUSD.String())
	require.Equal(t, 30*time.Minute, s.ExpiresAt.Sub(s.CreatedAt), "default SESSION_TTL")
	require.Equal(t, time.UTC, s.ExpiresAt.Location())

	// A minimal live session: spec fields only, the rest null.
	live, resp := api.createSession(mc.live(), map[string]any{"amount": 0.5, "currency": "usd"})
	assertGolden(t, "session_create_minimal", resp.Body, sessionExtra(live.Session.ExternalID))
	require.True(t, live.Session.Livemode)
	require.Regexp(t, `^cs_live_`, live.Session.ExternalID)

	// The read answers the same envelope.
	got := api.do(http.MethodGet, "/checkout/sessions/"+s.ExternalID, nil, mc.test())
	require.Equal(t, http.StatusOK, got.Status)
	require.JSONEq(t, string(resp2Body(t, api, mc, s.ExternalID)), string(got.Body))
}

// resp2Body reads a session again (a second, independent read).
func resp2Body(t *testing.T, api *testAPI, mc merchantCreds, id string) []byte {
	t.Helper()
	resp := api.do(http.MethodGet, "/checkout/sessions/"+id, nil, mc.test())
	require.Equal(t, http.StatusOK, resp.Status)
	return resp.Body
}

func TestSessionTTLConfig(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{Config: agentpay.Config{SessionTTL: 5 * time.Minute}})
	mc := api.registerMerchant(nil)
	env, _ := api.createSession(mc.live(), nil)
	require.Equal(t, 5*time.Minute, env.Session.ExpiresAt.Sub(env.Session.CreatedAt))
	// The stored row agrees with the answer.
	row, err := api.Svc.SessionByExternalID(context.Background(), env.Session.ExternalID)
	require.NoError(t, err)
	require.True(t, row.ExpiresAt.Equal(env.Session.ExpiresAt))
	_, err = api.Svc.SessionByExternalID(context.Background(), "cs_live_nope")
	require.ErrorIs(t, err, agentpay.ErrNotFound)
}

func TestSessionCreateValidation(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(nil)
	with := func(k string, v any) map[string]any {
		b := map[string]any{"amount": 10, "currency": "USD"}
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	tests := []struct {
		name   string
		body   any
		detail string
	}{
		{"amount missing", with("amount", nil), "amount: is required"},
		{"amount null", `{"amount":null,"currency":"USD"}`, "amount: is required"},
		{"amount string", with("amount", "10"), "amount: must be a number"},
		{"amount below minimum", with("amount", 0.49), "amount: must be at least 0.50 USD"},
		{"amount zero", with("amount", 0), "amount: must be at least 0.50 USD"},
		{"amount negative", with("amount", -5), "amount: must be at least 0.50 USD"},
		{"amount above maximum", with("amount", 1000000.01), "amount: must be at most 1000000 USD"},
		{"amount three decimals", with("amount", 1.005), "amount: must have at most 2 decimal places"},
		{"amount exponent", `{"amount":1e7,"currency":"USD"}`, "amount: must be at most 1000000 USD"},
		{"currency missing", with("currency", nil), "currency: is required"},
		{"currency EUR", with("currency", "EUR"), "currency: must be USD"},
		{"currency number", with("currency", 840), "currency: must be a string"},
		{"description too long", with("description", strings.Repeat("d", 1001)), "description: must be at most 1000 characters long"},
		{"success_url bad", with("success_url", "acme.test/ok"), "success_url: must be an absolute http or https URL"},
		{"cancel_url bad", with("cancel_url", "mailto:x@acme.test"), "cancel_url: must be an absolute http or https URL"},
		{"metadata array", with("metadata", []any{1}), "metadata: must be an object"},
		{"metadata string", with("metadata", "x"), "metadata: must be an object"},
		{"metadata inexact number", `{"amount":10,"currency":"USD","metadata":{"id":12345678901234567891}}`, "metadata.id: number 12345678901234567891 cannot be stored exactly; send it as a string"},
		{"metadata too big", with("metadata", map[string]any{"x": strings.Repeat("m", 17000)}), "metadata: must be at most 16384 bytes as JSON"},
		{"idempotency_key empty", with("idempotency_key", ""), "idempotency_key: must be 1 to 255 characters long"},
		{"idempotency_key too long", with("idempotency_key", strings.Repeat("k", 256)), "idempotency_key: must be 1 to 255 characters long"},
		{"idempotency_key control char", with("idempotency_key", "a\nb"), "idempotency_key: must contain printable characters only"},
		{"unknown field", with("amount_usd", 10), `json: unknown field "amount_usd"`},
		{"malformed JSON", `{"amount":`, "malformed JSON: unexpected end of body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/checkout/sessions", tt.body, mc.live())
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
			require.Equal(t, map[string]any{"detail": tt.detail}, resp.Map(t))
		})
	}
	require.Zero(t, api.DB.Ent.CheckoutSession.Query().CountX(context.Background()), "refusals write nothing")

	// The bounds themselves are accepted, exactly.
	for _, amount := range []string{"0.50", "1000000", "1000000.00", "19.99"} {
		env, _ := api.createSession(mc.live(), map[string]any{"amount": jsonNumber(amount), "currency": "USD"})
		require.True(t, decimal.RequireFromString(amount).Equal(env.Session.AmountUSD.Decimal), amount)
	}
}

func TestSessionIdempotencyKey(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(nil)
	other := api.registerMerchant(map[string]any{"name": "Other", "email": "o@other.test"})
	body := map[string]any{"amount": 10, "currency": "USD", "idempotency_key": "order-1"}

	first, _ := api.createSession(mc.live(), body)
	// Any reuse by the same merchant and mode is 409 naming the session,
	// even with other fields.
	for _, b := range []map[string]any{body, {"amount": 99, "currency": "USD", "idempotency_key": "order-1"}} {
		resp := api.do(http.MethodPost, "/checkout/sessions", b, mc.live())
		require.Equal(t, http.StatusConflict, resp.Status)
		require.Equal(t, fmt.Sprintf(`conflict: idempotency_key "order-1" was already used for session %s`, first.Session.ExternalID),
			resp.Map(t)["detail"])
	}
	// The other mode and another merchant have their own key spaces.
	api.createSession(mc.test(), body)
	api.createSession(other.live(), body)
	// Sessions without a key never collide.
	api.createSession(mc.live(), nil)
	api.createSession(mc.live(), nil)
	require.Equal(t, 5, api.DB.Ent.CheckoutSession.Query().CountX(context.Background()))
}

func TestSessionIsolation(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	a := api.registerMerchant(nil)
	b := api.registerMerchant(map[string]any{"name": "B", "email": "b@b.test"})
	aLive, _ := api.createSession(a.live(), nil)
	aTest, _ := api.createSession(a.test(), nil)
	bLive, _ := api.createSession(b.live(), nil)

	for _, tt := range []struct {
		name string
		h    http.Header
		id   string
	}{
		{"other merchant", b.live(), aLive.Session.ExternalID},
		{"other mode (test key, live session)", a.test(), aLive.Session.ExternalID},
		{"other mode (live key, test session)", a.live(), aTest.Session.ExternalID},
		{"unknown", a.live(), "cs_live_000000000000000000000000"},
	} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			path := "/checkout/sessions/" + tt.id
			if method == http.MethodPost {
				path += "/cancel"
			}
			resp := api.do(method, path, nil, tt.h)
			require.Equal(t, http.StatusNotFound, resp.Status, "%s %s", tt.name, method)
			require.Equal(t, "not found: no such session", resp.Map(t)["detail"])
		}
	}
	// Cancels above changed nothing.
	require.Equal(t, "pending", getSession(t, api, a.live(), aLive.Session.ExternalID)["status"])

	list := func(h http.Header) []string {
		resp := api.do(http.MethodGet, "/checkout/sessions", nil, h)
		require.Equal(t, http.StatusOK, resp.Status)
		var l sessionListBody
		resp.JSON(t, &l)
		ids := []string{}
		for _, s := range l.Data {
			ids = append(ids, s.ExternalID)
		}
		return ids
	}
	require.Equal(t, []string{aLive.Session.ExternalID}, list(a.live()))
	require.Equal(t, []string{aTest.Session.ExternalID}, list(a.test()))
	require.Equal(t, []string{bLive.Session.ExternalID}, list(b.live()))
	require.Empty(t, list(b.test()))
}

func getSession(t *testing.T, api *testAPI, h http.Header, id string) map[string]any {
	t.Helper()
	resp := api.do(http.MethodGet, "/checkout/sessions/"+id, nil, h)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	return resp.Map(t)["session"].(map[string]any)
}

func TestSessionListPagination(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(nil)
	var ids []string // oldest first
	for i := range 5 {
		env, _ := api.createSession(mc.live(), map[string]any{"amount": 10 + i, "currency": "USD"})
		ids = append(ids, env.Session.ExternalID)
	}
	newestFirst := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}

	page := func(q string) sessionListBody {
		resp := api.do(http.MethodGet, "/checkout/sessions"+q, nil, mc.live())
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		var l sessionListBody
		resp.JSON(t, &l)
		return l
	}
	ext := func(l sessionListBody) []string {
		out := []string{}
		for _, s := range l.Data {
			out = append(out, s.ExternalID)
		}
		return out
	}
	all := page("")
	require.Equal(t, newestFirst, ext(all))
	require.Equal(t, 5, all.Total)
	require.Equal(t, 20, all.Limit, "default limit")
	require.False(t, all.HasMore)

	p1, p2, p3 := page("?limit=2"), page("?limit=2&offset=2"), page("?limit=2&offset=4")
	require.Equal(t, newestFirst[0:2], ext(p1))
	require.Equal(t, newestFirst[2:4], ext(p2))
	require.Equal(t, newestFirst[4:], ext(p3))
	require.True(t, p1.HasMore)
	require.False(t, p3.HasMore)
	require.Empty(t, ext(page("?offset=10")))
	require.Equal(t, 100, page("?limit=100").Limit)

	resp := api.do(http.MethodGet, "/checkout/sessions?limit=2&offset=1", nil, mc.live())
	assertGolden(t, "session_list", resp.Body, sessionExtra(newestFirst[1], newestFirst[2]))

	for q, detail := range map[string]string{
		"?limit=101":   "limit: must be between 1 and 100",
		"?limit=-1":    "limit: must be between 1 and 100",
		"?limit=abc":   "limit: must be an integer",
		"?limit=1.5":   "limit: must be an integer",
		"?offset=-1":   "offset: must be at least 0",
		"?offset=next": "offset: must be an integer",
	} {
		resp := api.do(http.MethodGet, "/checkout/sessions"+q, nil, mc.live())
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, q)
		require.Equal(t, detail, resp.Map(t)["detail"], q)
	}
}

func TestSessionCancel(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	mc := api.registerMerchant(nil)
	ctx := context.Background()

	pending, _ := api.createSession(mc.live(), nil)
	resp := api.do(http.MethodPost, "/checkout/sessions/"+pending.Session.ExternalID+"/cancel", nil, mc.live())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "session_cancel", resp.Body, sessionExtra(pending.Session.ExternalID))
	// Cancelling again is a no-op 200 with the same answer.
	again := api.do(http.MethodPost, "/checkout/sessions/"+pending.Session.ExternalID+"/cancel", nil, mc.live())
	require.Equal(t, http.StatusOK, again.Status)
	require.JSONEq(t, string(resp.Body), string(again.Body))

	// setStatus moves a session as the worker would; withPayment records a
	// payment seen on-chain.
	newSession := func(status checkoutsession.Status, withPayment bool) string {
		env, _ := api.createSession(mc.live(), nil)
		sess, err := api.Svc.SessionByExternalID(ctx, env.Session.ExternalID)
		require.NoError(t, err)
		api.DB.Ent.CheckoutSession.UpdateOne(sess).SetStatus(status).SetChain("base").SetToken("USDC").ExecX(ctx)
		if withPayment {
			api.DB.Ent.Payment.Create().
				SetSessionID(sess.ID).SetExternalID("pay_" + uuid.NewString()).SetChain("base").
				SetTxHash("0x" + strings.ReplaceAll(uuid.NewString()+uuid.NewString(), "-", "")).SetLogIndex(0).
				SetFromAddress("0x52908400098527886E0F7030069857D2E4169EE7").SetToAddress("0x52908400098527886E0F7030069857D2E4169EE8").
				SetAmountToken(1_000_000).SetAmountUsd(decimal.NewFromInt(1)).SetBlockNumber(7).
				ExecX(ctx)
		}
		return env.Session.ExternalID
	}
	tests := []struct {
		name    string
		status  checkoutsession.Status
		payment bool
		code    int
		detail  string
	}{
		{"detecting, nothing paid", checkoutsession.StatusDetecting, false, http.StatusOK, ""},
		{"detecting, payment seen", checkoutsession.StatusDetecting, true, http.StatusConflict, "conflict: session %s already has a payment and cannot be cancelled"},
		{"confirming", checkoutsession.StatusConfirming, true, http.StatusConflict, "conflict: session %s already has a payment (status confirming) and cannot be cancelled"},
		{"confirmed", checkoutsession.StatusConfirmed, true, http.StatusConflict, "conflict: session %s already has a payment (status confirmed) and cannot be cancelled"},
		{"expired", checkoutsession.StatusExpired, false, http.StatusConflict, "conflict: session %s has expired and cannot be cancelled"},
	}
	t.Run("pending past expires_at", func(t *testing.T) {
		env, _ := api.createSession(mc.live(), nil)
		past := time.Now().UTC().Add(-time.Second).Truncate(time.Second)
		api.DB.Ent.CheckoutSession.Update().Where(checkoutsession.ExternalID(env.Session.ExternalID)).SetExpiresAt(past).ExecX(ctx)
		resp := api.do(http.MethodPost, "/checkout/sessions/"+env.Session.ExternalID+"/cancel", nil, mc.live())
		require.Equal(t, http.StatusConflict, resp.Status, string(resp.Body))
		require.Equal(t, fmt.Sprintf("conflict: session %s expired at %s and cannot be cancelled", env.Session.ExternalID, past.Format(time.RFC3339)),
			resp.Map(t)["detail"])
		require.Equal(t, "pending", getSession(t, api, mc.live(), env.Session.ExternalID)["status"])
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := newSession(tt.status, tt.payment)
			resp := api.do(http.MethodPost, "/checkout/sessions/"+id+"/cancel", nil, mc.live())
			require.Equal(t, tt.code, resp.Status, string(resp.Body))
			after := getSession(t, api, mc.live(), id)
			if tt.code == http.StatusOK {
				require.Equal(t, "cancelled", after["status"])
				require.NotNil(t, after["cancelled_at"])
				return
			}
			require.Equal(t, fmt.Sprintf(tt.detail, id), resp.Map(t)["detail"])
			require.Equal(t, string(tt.status), after["status"], "a refused cancel changes nothing")
			require.Nil(t, after["cancelled_at"])
		})
	}
}

// jsonNumber sends a number exactly as written.
type jsonNumber string

func (n jsonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// The contact e-mail over REST: registration and every change mail a
// confirmation link to the address (the change's answer is the merchant as
// changed); past the day's confirmations of one merchant a change is 429
// and changes nothing.
func TestMerchantEmailChangeOverREST(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	ctx := context.Background()
	mc := api.registerMerchant(nil)
	confirmations := func(to string) int {
		t.Helper()
		n, err := api.DB.Ent.MailMessage.Query().
			Where(mailmessage.To(to), mailmessage.SubjectContains("contact e-mail")).Count(ctx)
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 1, confirmations("billing@acme.test"), "registration mails a confirmation link")

	for i := range agentpay.MerchantEmailConfirmationsPerDay - 1 {
		to := fmt.Sprintf("owner%d@acme.test", i)
		resp := api.do(http.MethodPatch, "/checkout/merchants/me", map[string]any{"email": to}, mc.live())
		require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
		require.Equal(t, to, resp.Map(t)["email"])
		require.Equal(t, 1, confirmations(to))
	}
	resp := api.do(http.MethodPatch, "/checkout/merchants/me", map[string]any{"email": "victim@example.com", "name": "Renamed"}, mc.live())
	require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
	require.Equal(t, "rate limit exceeded: 5 contact e-mail confirmations per day of one merchant, retry after "+resp.Header.Get("Retry-After")+" s", resp.Map(t)["detail"])
	require.Zero(t, confirmations("victim@example.com"))
	me := api.do(http.MethodGet, "/checkout/merchants/me", nil, mc.live()).Map(t)
	require.Equal(t, "Acme", me["name"], "nothing changed")
}
