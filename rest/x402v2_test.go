package rest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/testenv"
	"agentpay/x402"
)

// paymentRequired decodes a 402's PAYMENT-REQUIRED header (x402 v2).
func paymentRequired(t testing.TB, h http.Header) x402.PaymentRequired {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(h.Get("Payment-Required"))
	require.NoError(t, err, "PAYMENT-REQUIRED %q", h.Get("Payment-Required"))
	var out x402.PaymentRequired
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return out
}

// payV2 is the PAYMENT-SIGNATURE of an x402 v2 payload accepting req,
// signed as x402Payer.pay signs v1's (the EIP-3009 authorization is the
// same), with the payment-identifier id when id is not empty.
func (p x402Payer) payV2(t *testing.T, resource x402.ResourceInfo, req x402.Requirements, value, id string) http.Header {
	t.Helper()
	v1 := p.pay(t, x402.RequirementsV1{
		PayTo: req.PayTo, Asset: req.Asset, MaxTimeoutSeconds: req.MaxTimeoutSeconds,
		Extra: x402.DomainExtra{Name: req.Extra.Name, Version: req.Extra.Version},
	}, value)
	payload := map[string]any{"x402Version": 2, "resource": resource, "accepted": req, "payload": v1["payload"]}
	if id != "" {
		payload["extensions"] = map[string]any{"payment-identifier": map[string]any{"info": map[string]any{"required": false, "id": id}}}
	}
	raw, err := json.Marshal(payload)
	require.NoError(t, err)
	return http.Header{"Payment-Signature": {base64.StdEncoding.EncodeToString(raw)}}
}

// paymentResponse decodes PAYMENT-RESPONSE.
func paymentResponse(t testing.TB, h http.Header) x402.SettleResponse {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(h.Get("Payment-Response"))
	require.NoError(t, err)
	var out x402.SettleResponse
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return out
}

// TestX402V2Session: a session's 402 carries x402 v2's PAYMENT-REQUIRED
// (eip155:84532, amount in base units, the payment-identifier extension)
// beside v1's body; a PAYMENT-SIGNATURE paying it is relayed (200,
// PAYMENT-RESPONSE), a short one is refused with PAYMENT-RESPONSE's
// reason and the requirements again, and the page address answers v2 too.
func TestX402V2Session(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 12.5, "currency": "USD", "description": "A book"})
	id := sess.Session.ExternalID
	payer := newX402Payer(t, api, 20_000_000)
	path := "/checkout/pay/" + id + "/x402"

	resp := api.x402Do(http.MethodGet, path, nil, nil)
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	var v1 x402ChallengeBody
	resp.JSON(t, &v1)
	require.Equal(t, 1, v1.X402Version, "v1 clients read the body")
	require.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), "PAYMENT-REQUIRED")
	pr := paymentRequired(t, resp.Header)
	require.Equal(t, 2, pr.X402Version)
	require.Equal(t, api.Server.URL+path, pr.Resource.URL)
	require.Len(t, pr.Accepts, 1)
	req := pr.Accepts[0]
	require.Equal(t, x402.Requirements{
		Scheme: "exact", Network: "eip155:84532", Amount: "12500000", Asset: api.Env.Ledger(chains.Base).Token(),
		PayTo: v1.Accepts[0].PayTo, MaxTimeoutSeconds: 120,
		Extra: x402.Extra{Name: "USD Coin", Version: "2", AssetTransferMethod: "eip3009"},
	}, req)
	require.NotNil(t, pr.Extensions)
	require.NotNil(t, pr.Extensions.PaymentIdentifier)
	require.False(t, pr.Extensions.PaymentIdentifier.Info.Required)
	raw, _ := base64.StdEncoding.DecodeString(resp.Header.Get("Payment-Required"))
	extra := sessionExtra(id)
	extra[req.PayTo] = "<pay_to>"
	extra[req.Asset] = "<asset>"
	extra[api.Server.URL] = "<server>"
	assertGolden(t, "x402v2_payment_required", raw, extra)

	// Refused: 402, the reason in PAYMENT-RESPONSE and the requirements
	// again in PAYMENT-REQUIRED; nothing moves.
	resp = api.x402Do(http.MethodGet, path, nil, payer.payV2(t, pr.Resource, req, "12499999", ""))
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	failed := paymentResponse(t, resp.Header)
	require.False(t, failed.Success)
	require.Equal(t, "invalid_exact_evm_payload_authorization_value", failed.ErrorReason)
	require.Equal(t, "eip155:84532", failed.Network)
	require.Contains(t, paymentRequired(t, resp.Header).Error, "authorization.value")
	live := req
	live.Network = "eip155:8453"
	resp = api.x402Do(http.MethodGet, path, nil, payer.payV2(t, pr.Resource, live, "12500000", ""))
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	require.Equal(t, "invalid_network", paymentResponse(t, resp.Header).ErrorReason, "a test session takes no live network")
	resp = api.x402Do(http.MethodGet, path, nil, http.Header{"Payment-Signature": {"not base64!"}})
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	require.Equal(t, int64(20_000_000), api.Env.Balance(t, chains.Base, payer.addr).Int64())

	resp = api.x402Do(http.MethodGet, path, nil, payer.payV2(t, pr.Resource, req, "12500000", ""))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	body := resp.Map(t)
	require.Equal(t, "detected", body["status"])
	require.Equal(t, x402.SettleResponse{Success: true, Transaction: body["tx_hash"].(string), Network: "eip155:84532", Payer: payer.addr},
		paymentResponse(t, resp.Header))
	require.Empty(t, resp.Header.Get("X-Payment-Response"), "a v2 payment is answered in v2's header")
	require.Equal(t, int64(7_500_000), api.Env.Balance(t, chains.Base, payer.addr).Int64())
}

// TestX402V2AtThePageAddress: {pay_url}/pay/<id> takes PAYMENT-SIGNATURE.
func TestX402V2AtThePageAddress(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
	require.True(t, wantsX402(&http.Request{Method: http.MethodGet, Header: http.Header{"Payment-Signature": {"x"}}}))
	require.False(t, wantsX402(&http.Request{Method: http.MethodGet, Header: http.Header{"Accept": {"text/html"}}}))
	srv := NewRouter(Config{Service: api.Svc, Pages: http.NotFoundHandler()})
	rec := httptest.NewRecorder()
	r, _ := http.NewRequest(http.MethodGet, "/pay/"+sess.Session.ExternalID, nil)
	r.Header.Set("Payment-Signature", "not base64!")
	srv.ServeHTTP(rec, r)
	require.Equal(t, http.StatusPaymentRequired, rec.Code, rec.Body.String())
	require.Equal(t, "eip155:84532", paymentRequired(t, rec.Header()).Accepts[0].Network)
}

// TestX402PaymentIdentifier: one payment-identifier is one payment of the
// session: a retry re-signed (another nonce) answers the first payment,
// never a second transfer; another payer under the same id is 409; a
// refusal before any broadcast leaves the id free.
func TestX402PaymentIdentifier(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 3, "currency": "USD"})
	path := "/checkout/pay/" + sess.Session.ExternalID + "/x402"
	payer := newX402Payer(t, api, 10_000_000)
	other := newX402Payer(t, api, 10_000_000)
	resp := api.x402Do(http.MethodGet, path, nil, nil)
	pr := paymentRequired(t, resp.Header)
	req := pr.Accepts[0]
	const id = "pay_7d5d747be160e280504c099d984bcfe0"

	// Refused unsent (short of what the session asks, though it keeps to
	// the requirement it claims to accept): the id stays free for the
	// payment the next request makes.
	short := req
	short.Amount = "2999999"
	resp = api.x402Do(http.MethodGet, path, nil, payer.payV2(t, pr.Resource, short, "2999999", id))
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))

	// A malformed id is refused as the payment's fault.
	resp = api.x402Do(http.MethodGet, path, nil, payer.payV2(t, pr.Resource, req, "3000000", "short"))
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	require.Equal(t, "invalid_payload", paymentResponse(t, resp.Header).ErrorReason)

	resp = api.x402Do(http.MethodGet, path, nil, payer.payV2(t, pr.Resource, req, "3000000", id))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	first := resp.Map(t)
	require.Equal(t, false, first["replayed"])

	// A retry that signed again: the first payment, replayed.
	resp = api.x402Do(http.MethodGet, path, nil, payer.payV2(t, pr.Resource, req, "3000000", id))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	again := resp.Map(t)
	require.Equal(t, true, again["replayed"])
	require.Equal(t, first["tx_hash"], again["tx_hash"])
	require.Equal(t, first["payment_id"], again["payment_id"])
	require.Equal(t, first["tx_hash"], paymentResponse(t, resp.Header).Transaction)

	// Another payer under the same id is another payment: 409.
	resp = api.x402Do(http.MethodGet, path, nil, other.payV2(t, pr.Resource, req, "3000000", id))
	require.Equal(t, http.StatusConflict, resp.Status, string(resp.Body))
	require.Contains(t, resp.Map(t)["detail"], "payment-identifier")

	require.Equal(t, int64(7_000_000), api.Env.Balance(t, chains.Base, payer.addr).Int64(), "paid once")
	require.Equal(t, int64(10_000_000), api.Env.Balance(t, chains.Base, other.addr).Int64())
}

// x402V2Client is testdata/x402v2client, whose node_modules make deps
// installs.
func x402V2Client(tb testing.TB) (node, dir string) {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Skip("node is not installed: the x402 v2 npm client cannot run (TestX402V2Session covers the protocol)")
	}
	dir, err = filepath.Abs(filepath.Join("..", "testdata", "x402v2client"))
	require.NoError(tb, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@x402", "fetch")); err != nil {
		tb.Fatalf("%s has no node_modules: run make deps (npm ci there)", dir)
	}
	return node, dir
}

// runX402V2Client runs pay.mjs with env and a fresh payer funded with
// units of USDC and no gas; it answers the printed JSON and the payer.
func runX402V2Client(tb testing.TB, api *testAPI, units int64, env ...string) (map[string]any, string) {
	tb.Helper()
	node, dir := x402V2Client(tb)
	key, err := crypto.GenerateKey()
	require.NoError(tb, err)
	addr := crypto.PubkeyToAddress(key.PublicKey).Hex()
	api.Env.Fund(tb, chains.Base, addr, units)
	cmd := exec.Command(node, "pay.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append(env, "PAYER_KEY=0x"+common.Bytes2Hex(crypto.FromECDSA(key)))...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(tb, err, "node pay.mjs: %s", stderr.String())
	var got map[string]any
	require.NoError(tb, json.Unmarshal(out, &got), string(out))
	return got, addr
}

// TestX402V2NodeClient: @x402/fetch, @x402/evm and @x402/core 2.27.0
// (testdata/x402v2client) under node pay a session by its v2 402 from a
// wallet holding no gas, and a merchant's resource through the
// facilitator (supported, verify, settle), signing for eip155:84532 (the
// base devnet's chain id).
func TestX402V2NodeClient(t *testing.T) {
	x402V2Client(t)
	api := x402API(t)
	m := api.registerMerchant(nil)

	t.Run("session", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 1.25, "currency": "USD"})
		got, payer := runX402V2Client(t, api, 10_000_000, "X402_MODE=session",
			"SESSION_URL="+api.Server.URL+"/checkout/pay/"+sess.Session.ExternalID+"/x402")
		require.Equal(t, float64(402), got["challengeStatus"])
		require.Equal(t, float64(2), got["challenge"].(map[string]any)["x402Version"])
		require.Equal(t, float64(200), got["status"], "%v", got)
		body := got["body"].(map[string]any)
		require.Equal(t, "detected", body["status"])
		require.Equal(t, 1.25, body["amount_usd"])
		require.Equal(t, payer, body["payer"])
		pr := got["paymentResponse"].(map[string]any)
		require.Equal(t, true, pr["success"])
		require.Equal(t, "eip155:84532", pr["network"])
		require.Equal(t, body["tx_hash"], pr["transaction"])
		require.Equal(t, int64(8_750_000), api.Env.Balance(t, chains.Base, payer).Int64())

		// Refunded through the one refunds API: to the payer's address by
		// default, the payer who signed (not the treasury that relayed).
		id := sess.Session.ExternalID
		waitConfirmed(t, api, m, id)
		resp := api.do(http.MethodPost, "/checkout/sessions/"+id+"/refunds", map[string]any{"amount_usd": 0.5},
			http.Header{"X-Checkout-Secret-Key": {m.TestSecret}, "Idempotency-Key": {"x402-refund-" + id}})
		require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
		var refund refundBody
		resp.JSON(t, &refund)
		require.Equal(t, payer, common.HexToAddress(refund.ToAddress).Hex(), "an x402 payment is refunded to the payer's address")
		require.Equal(t, body["payment_id"], refund.PaymentID)
		// The treasury pays refunds (it holds the payments until the payout).
		api.Env.Fund(t, chains.Base, api.Env.Treasury.Address(chains.Base), 10_000_000)
		pending, err := api.Svc.PendingRefunds(context.Background(), 0, 10)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		var last error
		require.Eventually(t, func() bool {
			res, err := api.Svc.SendRefund(context.Background(), pending[0])
			last = err
			return err == nil && res.Done
		}, 30*time.Second, 250*time.Millisecond, "the refund is sent: %v", &last)
		require.Equal(t, int64(9_250_000), api.Env.Balance(t, chains.Base, payer).Int64(), "half a dollar back to the payer")
	})
	t.Run("payment-identifier", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 2, "currency": "USD"})
		got, payer := runX402V2Client(t, api, 10_000_000, "X402_MODE=retry", "PAYMENT_ID=pay_retry_0123456789abcdef",
			"SESSION_URL="+api.Server.URL+"/checkout/pay/"+sess.Session.ExternalID+"/x402")
		nonces := got["nonces"].([]any)
		require.NotEqual(t, nonces[0], nonces[1], "the retry signed again")
		require.Equal(t, []any{"pay_retry_0123456789abcdef", "pay_retry_0123456789abcdef"}, got["ids"])
		first, retry, again := got["first"].(map[string]any), got["retry"].(map[string]any), got["again"].(map[string]any)
		require.Equal(t, float64(200), first["status"], "%v", got)
		tx := first["body"].(map[string]any)["tx_hash"]
		require.Equal(t, float64(200), retry["status"], "%v", got)
		// While the first is being relayed the retry is pending (with the
		// first's transaction once broadcast); after, the first payment.
		rb := retry["body"].(map[string]any)
		t.Logf("the retry sent while the first was relayed answered %v %v", rb["status"], rb["tx_hash"])
		if rb["status"] == "pending" {
			require.Contains(t, []any{"", tx}, rb["tx_hash"], "%v", got)
		} else {
			require.Equal(t, tx, rb["tx_hash"], "%v", got)
		}
		require.Equal(t, float64(200), again["status"], "%v", got)
		require.Equal(t, tx, again["body"].(map[string]any)["tx_hash"])
		require.Equal(t, true, again["body"].(map[string]any)["replayed"])
		require.Equal(t, int64(8_000_000), api.Env.Balance(t, chains.Base, payer).Int64(), "one transfer")
	})
	t.Run("facilitator", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 2, "currency": "USD"})
		got, payer := runX402V2Client(t, api, 10_000_000, "X402_MODE=facilitator",
			"SESSION_URL="+api.Server.URL+"/checkout/pay/"+sess.Session.ExternalID+"/x402",
			"FACILITATOR_URL="+api.Server.URL+"/x402", "SECRET_KEY="+m.TestSecret)
		require.Equal(t, float64(402), got["challengeStatus"])
		supported := got["supported"].(map[string]any)
		require.Contains(t, supported["kinds"], map[string]any{"x402Version": float64(2), "scheme": "exact", "network": "eip155:84532"})
		require.Equal(t, []any{"payment-identifier"}, supported["extensions"])
		require.Equal(t, true, got["verify"].(map[string]any)["isValid"], "%v", got)
		settle := got["settle"].(map[string]any)
		require.Equal(t, true, settle["success"], "%v", got)
		require.Equal(t, "eip155:84532", settle["network"])
		require.Equal(t, settle["transaction"], got["settleAgain"].(map[string]any)["transaction"])
		require.Equal(t, int64(8_000_000), api.Env.Balance(t, chains.Base, payer).Int64())
		st := api.do(http.MethodGet, "/checkout/sessions/"+sess.Session.ExternalID, nil, m.test())
		require.Contains(t, string(st.Body), `"status":"confirming"`)
	})
}

// TestX402Supported: /x402/supported lists the exact scheme on the key's
// mode's networks in both versions, the payment-identifier extension and
// the treasury's relaying address; a live key sees no test network.
func TestX402Supported(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	resp := api.do(http.MethodGet, "/x402/supported", nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status)
	resp = api.do(http.MethodGet, "/x402/supported", nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var got x402.Supported
	resp.JSON(t, &got)
	require.Equal(t, []x402.SupportedKind{
		{X402Version: 1, Scheme: "exact", Network: "base-sepolia"},
		{X402Version: 2, Scheme: "exact", Network: "eip155:84532"},
	}, got.Kinds)
	require.Equal(t, []string{"payment-identifier"}, got.Extensions)
	gas := api.Env.Ledger(chains.Base).(interface{ GasAddress() string }).GasAddress()
	require.Equal(t, map[string][]string{"eip155:*": {gas}}, got.Signers)
	assertGolden(t, "x402_supported", resp.Body, map[string]string{gas: "<signer>"})
	resp = api.do(http.MethodGet, "/x402/supported", nil, m.live())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.NotContains(t, string(resp.Body), "84532")
}

// BenchmarkX402V2PaidRequest: an x402 v2 paid request's round trip on the
// base devnet (a block a second, as `agentpay dev`), measured by the
// @x402/fetch client under node from its first GET to the 200: the 402,
// the signature, the relay and its inclusion, the answer. One payer pays
// b.N sessions in turn; p50 and p99 are reported (goal: p50 at most one
// block time plus 200 ms).
func BenchmarkX402V2PaidRequest(b *testing.B) {
	x402V2Client(b)
	env := testenv.New(b, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: time.Second,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	api := newTestAPI(b, testAPIConfig{Env: env, Config: agentpay.Config{
		AgentMode: agentpay.ModeTest, RelayIPRateLimit: 1_000_000, RelayMerchantRateLimit: 1_000_000,
	}})
	m := api.registerMerchant(nil)
	urls := make([]string, b.N)
	for i := range urls {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
		urls[i] = api.Server.URL + "/checkout/pay/" + sess.Session.ExternalID + "/x402"
	}
	b.ResetTimer()
	got, _ := runX402V2Client(b, api, int64(b.N)*1_000_000, "X402_MODE=bench", "SESSION_URLS="+strings.Join(urls, ","))
	b.StopTimer()
	reportRoundTrips(b, "x402 v2 paid request round trip (base)", got)
}

// BenchmarkX402V2SolanaPaidRequest: the same round trip on the Solana
// devnet (LiteSVM, a slot every 50 ms as the tests' devnet), paid by
// @x402/fetch with @x402/svm under node from a wallet holding USDC and
// no SOL: the 402, the payer's signature of the exact transaction (built
// against the devnet's RPC: its blockhash and the payer's token account),
// the treasury's co-signature and submission, inclusion, the 200.
func BenchmarkX402V2SolanaPaidRequest(b *testing.B) {
	x402V2Client(b)
	env := testenv.New(b, testenv.Options{
		Chains: []chains.Name{chains.Solana}, Confirmations: map[chains.Name]uint64{chains.Solana: 4}, Jobs: true,
	})
	api := newTestAPI(b, testAPIConfig{Env: env, Config: agentpay.Config{
		AgentMode: agentpay.ModeTest, RelayIPRateLimit: 1_000_000, RelayMerchantRateLimit: 1_000_000,
	}})
	m := api.registerMerchant(nil)
	urls := make([]string, b.N)
	for i := range urls {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
		urls[i] = api.Server.URL + "/checkout/pay/" + sess.Session.ExternalID + "/x402"
	}
	payer := solanaPayer(b, api, int64(b.N)*1_000_000)
	b.ResetTimer()
	got := runX402SVMClient(b, api, payer, "X402_MODE=bench", "SESSION_URLS="+strings.Join(urls, ","))
	b.StopTimer()
	reportRoundTrips(b, "x402 v2 paid request round trip (solana)", got)
	require.Zero(b, solanaLamports(b, api, payer.PublicKey()), "the payer paid no fee")
}

// reportRoundTrips reports the client's round trips (got["ms"], one per
// payment) as p50 and p99.
func reportRoundTrips(b *testing.B, name string, got map[string]any) {
	b.Helper()
	var ms []float64
	for _, v := range got["ms"].([]any) {
		ms = append(ms, v.(float64))
	}
	require.Len(b, ms, b.N)
	sort.Float64s(ms)
	pct := func(p float64) float64 { return ms[min(len(ms)-1, int(p*float64(len(ms))))] }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
	fmt.Fprintf(os.Stderr, "%s over %d payments: p50 %.0f ms, p99 %.0f ms\n", name, b.N, pct(0.50), pct(0.99))
}

// TestX402FacilitatorV2: verify and settle take x402 v2's shapes (the
// payload's accepted must be the requirements); refusals are answers with
// x402's reasons, a body in neither shape is 422, and settling again
// answers the same transaction.
func TestX402FacilitatorV2(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 3, "currency": "USD"})
	payer := newX402Payer(t, api, 5_000_000)
	resp := api.x402Do(http.MethodGet, "/checkout/pay/"+sess.Session.ExternalID+"/x402", nil, nil)
	pr := paymentRequired(t, resp.Header)
	req := pr.Accepts[0]
	payload := func(accepted x402.Requirements, value string) map[string]any {
		raw, _ := base64.StdEncoding.DecodeString(payer.payV2(t, pr.Resource, accepted, value, "").Get("Payment-Signature"))
		var p map[string]any
		require.NoError(t, json.Unmarshal(raw, &p))
		return p
	}
	body := map[string]any{"x402Version": 2, "paymentPayload": payload(req, "3000000"), "paymentRequirements": req}

	other := req
	other.Amount = "2000000"
	for _, tc := range []struct {
		name   string
		body   map[string]any
		key    http.Header
		reason string
	}{
		{"accepted another amount", map[string]any{"x402Version": 2, "paymentPayload": payload(other, "2000000"), "paymentRequirements": req}, m.test(), "invalid_payload"},
		{"short of the session", map[string]any{"x402Version": 2, "paymentPayload": payload(other, "2000000"), "paymentRequirements": other}, m.test(), "invalid_exact_evm_payload_authorization_value"},
		{"live key", body, m.live(), "invalid_network"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.do(http.MethodPost, "/x402/verify", tc.body, tc.key)
			require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
			require.Equal(t, map[string]any{"isValid": false, "invalidReason": tc.reason, "payer": payer.addr}, resp.Map(t))
		})
	}
	resp = api.do(http.MethodPost, "/x402/verify", map[string]any{"x402Version": 2, "paymentPayload": map[string]any{"network": "base-sepolia"}, "paymentRequirements": req}, m.test())
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "a v1 payload under version 2: %s", resp.Body)

	resp = api.do(http.MethodPost, "/x402/verify", body, m.test())
	require.Equal(t, map[string]any{"isValid": true, "payer": payer.addr}, resp.Map(t))
	resp = api.do(http.MethodPost, "/x402/settle", body, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	settled := resp.Map(t)
	require.Equal(t, true, settled["success"])
	require.Equal(t, "eip155:84532", settled["network"])
	again := api.do(http.MethodPost, "/x402/settle", body, m.test())
	require.Equal(t, settled, again.Map(t))
	require.Equal(t, int64(2_000_000), api.Env.Balance(t, chains.Base, payer.addr).Int64(), "paid once")
}
