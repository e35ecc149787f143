package rest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/chains/devnet"
	"agentpay/ent"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/testenv"
)

// checkoutAPI is an API whose test mode runs on a base devnet and a Solana
// devnet; live mode has no chains.
type checkoutAPI struct {
	*testAPI
	evm *devnet.EVM
	sol *devnet.Solana
}

func newCheckoutAPI(t *testing.T) *checkoutAPI {
	t.Helper()
	env := testenv.New(t, testenv.Options{
		Chains:        []chains.Name{chains.Base, chains.Solana},
		Confirmations: map[chains.Name]uint64{chains.Base: 3, chains.Solana: 32},
	})
	return &checkoutAPI{testAPI: newTestAPI(t, testAPIConfig{Env: env}), evm: env.EVM(chains.Base), sol: env.Solana()}
}

func (a *checkoutAPI) merchant(t *testing.T, in agentpay.MerchantInput) *agentpay.MerchantRegistration {
	t.Helper()
	if in.Name == nil {
		name := "Shop"
		in.Name = &name
	}
	email := "shop@example.com"
	in.Email = &email
	reg, err := a.Svc.RegisterMerchant(context.Background(), in)
	require.NoError(t, err)
	return reg
}

// session inserts a test-mode session of 12.50 USD directly.
func (a *checkoutAPI) session(t *testing.T, m *ent.Merchant, set ...func(*ent.CheckoutSessionCreate)) *ent.CheckoutSession {
	t.Helper()
	c := a.DB.Ent.CheckoutSession.Create().
		SetMerchantID(m.ID).
		SetExternalID("cs_test_" + strings.ReplaceAll(uuid.NewString(), "-", "")).
		SetLivemode(false).
		SetAmountUsd(decimal.RequireFromString("12.50")).
		SetCurrency("USD").
		SetDescription("Order #42").
		SetExpiresAt(time.Now().Add(30 * time.Minute).UTC())
	for _, s := range set {
		s(c)
	}
	return c.SaveX(context.Background())
}

func publicKey(k string) http.Header { return http.Header{"X-Checkout-Public-Key": {k}} }

func TestCheckoutPageFlow(t *testing.T) {
	api := newCheckoutAPI(t)
	color, site, success := "#0a7cff", "https://shop.example", "https://shop.example/thanks"
	reg := api.merchant(t, agentpay.MerchantInput{BrandColor: &color, Website: &site, SuccessURL: &success})
	sess := api.session(t, reg.Merchant, func(c *ent.CheckoutSessionCreate) { c.SetCancelURL("https://shop.example/cart/42") })
	path := "/checkout/pay/" + sess.ExternalID
	extra := map[string]string{sess.ExternalID: "<external_id>", api.sol.Mint.String(): "<mint>"}

	res := api.do(http.MethodGet, path, nil, nil)
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	assertGolden(t, "checkout_page_pending", res.Body, extra)

	res = api.do(http.MethodGet, path+"/status", nil, nil)
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	assertGolden(t, "checkout_status_pending", res.Body, extra)

	res = api.do(http.MethodPost, path+"/select", map[string]any{"chain": "base", "token": "USDC"}, publicKey(reg.Keys.TestPublicKey))
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	assertGolden(t, "checkout_select_base", res.Body, extra)
	base := res.Map(t)
	require.Equal(t, base["payment_uri"], base["qr_data"])
	require.Equal(t, 12.5, base["amount_token"])
	require.EqualValues(t, 12_500_000, base["amount_base_units"])
	require.True(t, strings.HasPrefix(base["payment_uri"].(string), "ethereum:"+api.evm.USDC.Hex()+"@"))

	res = api.do(http.MethodPost, path+"/select", map[string]any{"chain": "solana", "token": "USDC"}, nil)
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	sol := res.Map(t)
	extra[sol["address"].(string)] = "<deposit>"
	assertGolden(t, "checkout_select_solana", res.Body, extra)
	require.NotEqual(t, base["address"], sol["address"], "another chain, another address")

	res = api.do(http.MethodGet, path, nil, publicKey(reg.Keys.TestPublicKey))
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	assertGolden(t, "checkout_page_selected", res.Body, extra)

	res = api.do(http.MethodGet, path+"/status", nil, nil)
	require.Equal(t, http.StatusOK, res.Status, string(res.Body))
	assertGolden(t, "checkout_status_detecting", res.Body, extra)
}

func TestCheckoutPageRefusals(t *testing.T) {
	api := newCheckoutAPI(t)
	shop := api.merchant(t, agentpay.MerchantInput{})
	baseOnly := api.merchant(t, agentpay.MerchantInput{AcceptedTokens: &[]agentpay.TokenRef{{Chain: "base", Token: "USDC"}}})
	other := api.merchant(t, agentpay.MerchantInput{})
	status := func(st checkoutsession.Status) func(*ent.CheckoutSessionCreate) {
		return func(c *ent.CheckoutSessionCreate) { c.SetStatus(st) }
	}
	pending := api.session(t, shop.Merchant)
	baseOnlySession := api.session(t, baseOnly.Merchant)
	expired := api.session(t, shop.Merchant, status(checkoutsession.StatusExpired))
	lapsed := api.session(t, shop.Merchant, func(c *ent.CheckoutSessionCreate) { c.SetExpiresAt(time.Now().Add(-time.Minute).UTC()) })
	cancelled := api.session(t, shop.Merchant, status(checkoutsession.StatusCancelled))
	confirmed := api.session(t, shop.Merchant, status(checkoutsession.StatusConfirmed))

	sel := func(chain, token string) map[string]any { return map[string]any{"chain": chain, "token": token} }
	tests := []struct {
		name   string
		method string
		path   string
		body   any
		header http.Header
		status int
		detail string
		golden string
	}{
		{"unknown session page", http.MethodGet, "/checkout/pay/cs_nope", nil, nil, 404, `not found: checkout session "cs_nope"`, ""},
		{"unknown session status", http.MethodGet, "/checkout/pay/cs_nope/status", nil, nil, 404, "not found", ""},
		{"unknown session select", http.MethodPost, "/checkout/pay/cs_nope/select", sel("base", "USDC"), nil, 404, "not found", ""},
		{"unknown chain", http.MethodPost, "/checkout/pay/" + pending.ExternalID + "/select", sel("bitcoin", "USDC"), nil, 422, "", "checkout_select_unknown_chain"},
		{"chain missing", http.MethodPost, "/checkout/pay/" + pending.ExternalID + "/select", map[string]any{"token": "USDC"}, nil, 422, "chain: is required", ""},
		{"token not USDC", http.MethodPost, "/checkout/pay/" + pending.ExternalID + "/select", sel("base", "USDT"), nil, 422, `token: "USDT" is not supported: expected USDC`, ""},
		{"chain as number", http.MethodPost, "/checkout/pay/" + pending.ExternalID + "/select", `{"chain":1,"token":"USDC"}`, nil, 422, "chain: must be a string", ""},
		{"unknown field", http.MethodPost, "/checkout/pay/" + pending.ExternalID + "/select", `{"chain":"base","token":"USDC","amount":1}`, nil, 422, "unknown field", ""},
		{"not accepted by the merchant", http.MethodPost, "/checkout/pay/" + baseOnlySession.ExternalID + "/select", sel("solana", "USDC"), nil, 422, "", "checkout_select_not_accepted"},
		{"not configured for test mode", http.MethodPost, "/checkout/pay/" + pending.ExternalID + "/select", sel("polygon", "USDC"), nil, 422, "", "checkout_select_not_configured"},
		{"expired", http.MethodPost, "/checkout/pay/" + expired.ExternalID + "/select", sel("base", "USDC"), nil, 409, "", "checkout_select_expired"},
		{"past expires_at", http.MethodPost, "/checkout/pay/" + lapsed.ExternalID + "/select", sel("base", "USDC"), nil, 409, "expired at", ""},
		{"cancelled", http.MethodPost, "/checkout/pay/" + cancelled.ExternalID + "/select", sel("base", "USDC"), nil, 409, "is cancelled", ""},
		{"confirmed", http.MethodPost, "/checkout/pay/" + confirmed.ExternalID + "/select", sel("base", "USDC"), nil, 409, "", "checkout_select_paid"},
		{"another merchant's key on the page", http.MethodGet, "/checkout/pay/" + pending.ExternalID, nil, publicKey(other.Keys.TestPublicKey), 401, "", "checkout_wrong_public_key"},
		{"live key on a test session", http.MethodGet, "/checkout/pay/" + pending.ExternalID + "/status", nil, publicKey(shop.Keys.LivePublicKey), 401, "does not belong", ""},
		{"secret key as public key", http.MethodPost, "/checkout/pay/" + pending.ExternalID + "/select", sel("base", "USDC"), publicKey(shop.Keys.TestSecretKey), 401, "invalid or missing API key", ""},
		{"garbage key", http.MethodGet, "/checkout/pay/" + pending.ExternalID, nil, publicKey("pk_test_x"), 401, "invalid or missing API key", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := api.do(tt.method, tt.path, tt.body, tt.header)
			require.Equal(t, tt.status, res.Status, string(res.Body))
			if tt.detail != "" {
				require.Contains(t, res.Map(t)["detail"], tt.detail)
			}
			if tt.golden != "" {
				assertGolden(t, tt.golden, res.Body, map[string]string{
					pending.ExternalID: "<external_id>", baseOnlySession.ExternalID: "<external_id>",
					expired.ExternalID: "<external_id>", confirmed.ExternalID: "<external_id>",
				})
			}
		})
	}
	// Nothing was issued by a refusal.
	require.Zero(t, api.DB.Ent.DepositAddress.Query().CountX(context.Background()))
}

// BenchmarkCheckoutStatus: GET /checkout/pay/{id}/status with 10,000 open
// sessions (half with a chain selected), 16 clients over real HTTP, against
// a bare net/http handler writing the same JSON in the same run. The
// sessions are polled in turn, b.N polls in all: at -benchtime 40000x each
// session four times, what a page polling every 3 seconds does in the
// status cache's 10 seconds (agentpay.DefaultStatusCacheTTL), so a quarter
// of the polls read the database. The statuses are cached as `agentpay
// serve` caches them (CacheCheckoutStatuses); uncached reads the database
// on every poll, as before the cache. ip-limit-600 runs with the default
// per-IP limit on, the clients' connections coming from 250 loopback
// addresses in turn (each connection lives one round of 1,000 requests).
func BenchmarkCheckoutStatus(b *testing.B) {
	b.Run("ip-limit-off", func(b *testing.B) { benchmarkCheckoutStatus(b, 0, true) })
	b.Run("ip-limit-off-uncached", func(b *testing.B) { benchmarkCheckoutStatus(b, 0, false) })
	b.Run("ip-limit-600", func(b *testing.B) { benchmarkCheckoutStatus(b, 600, true) })
}

func benchmarkCheckoutStatus(b *testing.B, ipLimit int, cached bool) {
	ctx := context.Background()
	inst := newTestAPI(b, testAPIConfig{Config: agentpay.Config{IPRateLimit: ipLimit}})
	svc, srv, db := inst.Svc, inst.Server, inst.DB
	if cached {
		if err := svc.CacheCheckoutStatuses(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	name, email := "Shop", "shop@example.com"
	reg, err := svc.RegisterMerchant(ctx, agentpay.MerchantInput{Name: &name, Email: &email})
	if err != nil {
		b.Fatal(err)
	}
	const sessions = 10_000
	ids := make([]string, sessions)
	for lo := 0; lo < sessions; lo += 500 {
		batch := make([]*ent.CheckoutSessionCreate, 0, 500)
		for i := lo; i < lo+500; i++ {
			ids[i] = fmt.Sprintf("cs_bench_%05d", i)
			c := db.Ent.CheckoutSession.Create().SetMerchantID(reg.Merchant.ID).SetExternalID(ids[i]).
				SetLivemode(false).SetAmountUsd(decimal.NewFromInt(10)).
				SetExpiresAt(time.Now().Add(time.Hour).UTC())
			if i%2 == 1 {
				c.SetChain("base").SetToken("USDC").SetStatus(checkoutsession.StatusDetecting)
			}
			batch = append(batch, c)
		}
		if _, err := db.Ent.CheckoutSession.CreateBulk(batch...).Save(ctx); err != nil {
			b.Fatal(err)
		}
	}
	body := []byte(`{"amount_paid":0,"chain":"base","confirmations":0,"confirmations_required":null,"status":"detecting","token":"USDC"}` + "\n")
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(bare.Close)

	get := func(base string) func(i int) *http.Request {
		return func(i int) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, base+"/checkout/pay/"+ids[i%sessions]+"/status", nil)
			return req
		}
	}
	// Interleaved rounds, so a machine whose load changes during the run
	// affects both sides alike.
	client := benchHTTPClient()
	if ipLimit > 0 {
		client = manyIPsHTTPClient()
	}
	defer client.CloseIdleConnections()
	apiLat, refLat := make([]time.Duration, b.N), make([]time.Duration, b.N)
	var apiTime, refTime time.Duration
	var roundRatios []float64
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += 1000 {
		hi := min(lo+1000, b.N)
		if ipLimit > 0 {
			client.CloseIdleConnections() // new connections, other addresses
		}
		api := runLoadRange(b, client, apiLat, lo, hi, http.StatusOK, get(srv.URL))
		ref := runLoadRange(b, client, refLat, lo, hi, http.StatusOK, get(bare.URL))
		apiTime += api
		refTime += ref
		roundRatios = append(roundRatios, ref.Seconds()/api.Seconds())
	}
	b.StopTimer()
	api, ref := summarize(apiTime, apiLat), summarize(refTime, refLat)
	b.ReportMetric(api.perSecond(b.N), "req/s")
	b.ReportMetric(float64(api.p99.Microseconds()), "p99-µs")
	b.ReportMetric(ref.perSecond(b.N), "bare-req/s")
	b.ReportMetric(float64(ref.p99.Microseconds()), "bare-p99-µs")
	b.ReportMetric(100*api.perSecond(b.N)/ref.perSecond(b.N), "%-of-bare")
	// The median of the rounds' ratios: a burst of load from outside the
	// benchmark falls on one side of one round and moves the ratio of the
	// sums, not the median.
	b.ReportMetric(100*median(roundRatios), "median-%-of-bare")
	b.ReportMetric(float64(b.N)/sessions, "polls/session")
}
