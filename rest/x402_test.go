package rest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/testenv"
	"agentpay/x402"
)

// x402Do is testAPI.do for answers that may be 402 (whose body is x402's,
// not {detail}); validated against openapi.json all the same.
func (a *testAPI) x402Do(method, path string, body any, header http.Header) apiResponse {
	a.t.Helper()
	var raw []byte
	if body != nil {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(a.t, err)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.Server.URL+path, bytes.NewReader(raw))
	require.NoError(a.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := a.Server.Client().Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	require.Equal(a.t, "application/json", resp.Header.Get("Content-Type"), "%s %s: %s", method, path, out)
	validateOpenAPI(a.t, req, raw, resp, out)
	return apiResponse{Status: resp.StatusCode, Header: resp.Header, Body: out}
}

// x402API is an API on a base devnet sealing a block a second, as
// `agentpay dev` does: the token judges an authorization's validity by the
// chain's clock, and a devnet sealing faster runs that clock ahead of the
// wall clock the client dates its authorization by (chains/devnet).
func x402API(t *testing.T) *testAPI {
	t.Helper()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: time.Second,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	return newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{AgentMode: agentpay.ModeTest}})
}

// x402Payer is a devnet wallet with USDC and no gas.
type x402Payer struct {
	key  *ecdsa.PrivateKey
	addr string
}

func newX402Payer(t *testing.T, api *testAPI, units int64) x402Payer {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	addr := crypto.PubkeyToAddress(key.PublicKey).Hex()
	api.Env.Fund(t, chains.Base, addr, units)
	return x402Payer{key: key, addr: addr}
}

// pay signs what the requirement asks as an x402 client does and answers
// the X-PAYMENT payload.
func (p x402Payer) pay(t *testing.T, req x402.RequirementsV1, value string) map[string]any {
	t.Helper()
	var nonce [32]byte
	_, err := rand.Read(nonce[:])
	require.NoError(t, err)
	now := time.Now().Unix()
	v, ok := new(big.Int).SetString(value, 10)
	require.True(t, ok)
	from := crypto.PubkeyToAddress(p.key.PublicKey)
	domain := crypto.Keccak256(
		crypto.Keccak256([]byte("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
		crypto.Keccak256([]byte(req.Extra.Name)), crypto.Keccak256([]byte(req.Extra.Version)),
		math.U256Bytes(big.NewInt(84532)), common.LeftPadBytes(common.HexToAddress(req.Asset).Bytes(), 32),
	)
	structHash := crypto.Keccak256(
		crypto.Keccak256([]byte("TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)")),
		common.LeftPadBytes(from.Bytes(), 32), common.LeftPadBytes(common.HexToAddress(req.PayTo).Bytes(), 32),
		math.U256Bytes(v), math.U256Bytes(big.NewInt(now-600)), math.U256Bytes(big.NewInt(now+int64(req.MaxTimeoutSeconds))), nonce[:],
	)
	sig, err := crypto.Sign(crypto.Keccak256([]byte("\x19\x01"), domain, structHash), p.key)
	require.NoError(t, err)
	sig[64] += 27
	return map[string]any{
		"x402Version": 1, "scheme": "exact", "network": req.Network,
		"payload": map[string]any{
			"signature": "0x" + common.Bytes2Hex(sig),
			"authorization": map[string]any{
				"from": from.Hex(), "to": req.PayTo, "value": value,
				"validAfter": fmt.Sprint(now - 600), "validBefore": fmt.Sprint(now + int64(req.MaxTimeoutSeconds)),
				"nonce": "0x" + common.Bytes2Hex(nonce[:]),
			},
		},
	}
}

func xPayment(t *testing.T, payload map[string]any) http.Header {
	t.Helper()
	raw, err := json.Marshal(payload)
	require.NoError(t, err)
	return http.Header{"X-Payment": {base64.StdEncoding.EncodeToString(raw)}}
}

type x402ChallengeBody struct {
	X402Version int                   `json:"x402Version"`
	Error       string                `json:"error"`
	Accepts     []x402.RequirementsV1 `json:"accepts"`
}

// TestX402Session: a session's x402 address answers 402 with the base
// test network's exact requirements; an X-PAYMENT paying them is relayed
// (200, X-PAYMENT-RESPONSE, the payment recorded), the same one again
// answers the same payment, and a bad one is 402 with the reason.
func TestX402Session(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 12.5, "currency": "USD", "description": "A book"})
	id := sess.Session.ExternalID
	payer := newX402Payer(t, api, 20_000_000)
	path := "/checkout/pay/" + id + "/x402"

	resp := api.x402Do(http.MethodGet, path, nil, nil)
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
	var ch x402ChallengeBody
	resp.JSON(t, &ch)
	require.Equal(t, 1, ch.X402Version)
	require.Len(t, ch.Accepts, 1)
	req := ch.Accepts[0]
	require.Equal(t, "exact", req.Scheme)
	require.Equal(t, "base-sepolia", req.Network)
	require.Equal(t, "12500000", req.MaxAmountRequired)
	require.Equal(t, api.Env.Ledger(chains.Base).Token(), req.Asset)
	require.Equal(t, x402.DomainExtra{Name: "USD Coin", Version: "2"}, req.Extra)
	require.Equal(t, api.Server.URL+path, req.Resource)
	extra := sessionExtra(id)
	extra[req.PayTo] = "<pay_to>"
	extra[req.Asset] = "<asset>"
	extra[api.Server.URL] = "<server>"
	assertGolden(t, "x402_requirements", resp.Body, extra)

	// Refused payments: 402 with the reason, nothing moves.
	for _, tc := range []struct {
		name    string
		payload map[string]any
		reason  string
	}{
		{"less than due", payer.pay(t, req, "12499999"), "authorization.value"},
		{"another network", func() map[string]any { p := payer.pay(t, req, "12500000"); p["network"] = "base"; return p }(), "network"},
		{"tampered", func() map[string]any {
			p := payer.pay(t, req, "12500000")
			p["payload"].(map[string]any)["authorization"].(map[string]any)["validBefore"] = fmt.Sprint(time.Now().Unix() + 3600)
			return p
		}(), "signature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := api.x402Do(http.MethodGet, path, nil, xPayment(t, tc.payload))
			require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))
			var ch x402ChallengeBody
			resp.JSON(t, &ch)
			require.Contains(t, ch.Error, tc.reason)
			require.Len(t, ch.Accepts, 1)
		})
	}
	resp = api.x402Do(http.MethodGet, path, nil, http.Header{"X-Payment": {"not base64!"}})
	require.Equal(t, http.StatusPaymentRequired, resp.Status, string(resp.Body))

	payload := payer.pay(t, req, "12500000")
	resp = api.x402Do(http.MethodGet, path, nil, xPayment(t, payload))
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	body := resp.Map(t)
	require.Equal(t, "detected", body["status"])
	require.Equal(t, "confirming", body["session_status"])
	require.Equal(t, payer.addr, body["payer"])
	var settled x402.SettleResponse
	raw, err := base64.StdEncoding.DecodeString(resp.Header.Get("X-Payment-Response"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &settled))
	require.Equal(t, x402.SettleResponse{Success: true, Transaction: body["tx_hash"].(string), Network: "base-sepolia", Payer: payer.addr}, settled)
	extra[body["payment_id"].(string)] = "<payment_id>"
	extra[body["tx_hash"].(string)] = "<tx_hash>"
	extra[payer.addr] = "<payer>"
	assertGolden(t, "x402_paid", resp.Body, extra)

	again := api.x402Do(http.MethodGet, path, nil, xPayment(t, payload))
	require.Equal(t, http.StatusOK, again.Status, string(again.Body))
	require.Equal(t, true, again.Map(t)["replayed"])
	require.Equal(t, body["payment_id"], again.Map(t)["payment_id"])

	// Paid: no more requirements.
	resp = api.do(http.MethodGet, path, nil, nil)
	require.Equal(t, http.StatusConflict, resp.Status, string(resp.Body))
	resp = api.do(http.MethodGet, "/checkout/pay/cs_test_nope/x402", nil, nil)
	require.Equal(t, http.StatusNotFound, resp.Status, string(resp.Body))
}

// TestX402AtThePageAddress: {pay_url}/pay/<id> answers x402 clients (JSON,
// or X-PAYMENT) with the 402, and browsers with the page.
func TestX402AtThePageAddress(t *testing.T) {
	api := x402API(t)
	pages := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>page</html>")
	})
	srv := httptest.NewServer(NewRouter(Config{Service: api.Svc, Pages: pages}))
	defer srv.Close()
	m := api.registerMerchant(nil)
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
	get := func(accept string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/pay/"+sess.Session.ExternalID, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("application/json")
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode, body)
	require.Contains(t, body, `"network":"base-sepolia"`)
	resp, body = get("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "<html>page</html>", body)
}

// TestX402Facilitator: a merchant's own resource paid through
// /x402/verify and /x402/settle with its secret key, payTo a deposit
// address of its session; refusals are answers, not errors.
func TestX402Facilitator(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	other := api.registerMerchant(map[string]any{"name": "Other", "email": "other@acme.test"})
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 3, "currency": "USD"})
	payer := newX402Payer(t, api, 5_000_000)
	resp := api.x402Do(http.MethodGet, "/checkout/pay/"+sess.Session.ExternalID+"/x402", nil, nil)
	var ch x402ChallengeBody
	resp.JSON(t, &ch)
	req := ch.Accepts[0]
	payload := payer.pay(t, req, "3000000")
	body := map[string]any{"x402Version": 1, "paymentPayload": payload, "paymentRequirements": req}

	resp = api.do(http.MethodPost, "/x402/verify", body, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status)
	resp = api.do(http.MethodPost, "/x402/verify", body, other.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, map[string]any{"isValid": false, "invalidReason": "invalid_payment", "payer": payer.addr}, resp.Map(t),
		"payTo is no address of the other merchant's")
	resp = api.do(http.MethodPost, "/x402/verify", body, m.live())
	require.Equal(t, map[string]any{"isValid": false, "invalidReason": "invalid_network", "payer": payer.addr}, resp.Map(t),
		"a live key reaches live networks only")

	short := map[string]any{"x402Version": 1, "paymentPayload": payer.pay(t, req, "2999999"), "paymentRequirements": req}
	resp = api.do(http.MethodPost, "/x402/verify", short, m.test())
	require.Equal(t, map[string]any{"isValid": false, "invalidReason": "invalid_exact_evm_payload_authorization_value", "payer": payer.addr}, resp.Map(t))

	resp = api.do(http.MethodPost, "/x402/verify", body, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.Equal(t, map[string]any{"isValid": true, "payer": payer.addr}, resp.Map(t))
	assertGolden(t, "x402_verify", resp.Body, map[string]string{payer.addr: "<payer>"})

	resp = api.do(http.MethodPost, "/x402/settle", body, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	settled := resp.Map(t)
	require.Equal(t, true, settled["success"])
	require.Equal(t, "base-sepolia", settled["network"])
	assertGolden(t, "x402_settle", resp.Body, map[string]string{payer.addr: "<payer>", settled["transaction"].(string): "<tx_hash>"})

	again := api.do(http.MethodPost, "/x402/settle", body, m.test())
	require.Equal(t, settled, again.Map(t), "settling again answers the same transaction")
	st := api.do(http.MethodGet, "/checkout/sessions/"+sess.Session.ExternalID, nil, m.test())
	require.Contains(t, string(st.Body), `"status":"confirming"`)
	require.Equal(t, int64(2_000_000), api.Env.Balance(t, chains.Base, payer.addr).Int64(), "paid once")
}

// TestX402NodeClient: the x402 npm packages (testdata/x402client: x402-fetch
// and x402 1.2.0) under node pay a session by its 402, and a merchant's
// resource through the facilitator, signing for base-sepolia (chain id
// 84532, the base devnet's).
func TestX402NodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the x402 npm client cannot run (TestX402Session covers the protocol)")
	}
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "x402client"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "x402-fetch")); err != nil {
		t.Fatalf("%s has no node_modules: run make deps (npm ci there)", dir)
	}
	api := x402API(t)
	m := api.registerMerchant(nil)
	run := func(t *testing.T, env ...string) map[string]any {
		t.Helper()
		key, err := crypto.GenerateKey()
		require.NoError(t, err)
		api.Env.Fund(t, chains.Base, crypto.PubkeyToAddress(key.PublicKey).Hex(), 10_000_000)
		cmd := exec.Command(node, "pay.mjs")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append(env, "PAYER_KEY=0x"+common.Bytes2Hex(crypto.FromECDSA(key)))...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "node pay.mjs: %s", stderr.String())
		var got map[string]any
		require.NoError(t, json.Unmarshal(out, &got), string(out))
		return got
	}

	t.Run("session", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 1.25, "currency": "USD"})
		got := run(t, "X402_MODE=session", "SESSION_URL="+api.Server.URL+"/checkout/pay/"+sess.Session.ExternalID+"/x402")
		require.Equal(t, float64(200), got["status"], "%v", got)
		body := got["body"].(map[string]any)
		require.Equal(t, "detected", body["status"])
		require.Equal(t, 1.25, body["amount_usd"])
		pr := got["paymentResponse"].(map[string]any)
		require.Equal(t, true, pr["success"])
		require.Equal(t, "base-sepolia", pr["network"])
		require.Equal(t, body["tx_hash"], pr["transaction"])
	})
	t.Run("facilitator", func(t *testing.T) {
		sess, _ := api.createSession(m.test(), map[string]any{"amount": 2, "currency": "USD"})
		got := run(t, "X402_MODE=facilitator", "SESSION_URL="+api.Server.URL+"/checkout/pay/"+sess.Session.ExternalID+"/x402",
			"FACILITATOR_URL="+api.Server.URL+"/x402", "SECRET_KEY="+m.TestSecret)
		require.Equal(t, float64(402), got["challengeStatus"])
		require.Equal(t, true, got["verify"].(map[string]any)["isValid"], "%v", got)
		settle := got["settle"].(map[string]any)
		require.Equal(t, true, settle["success"], "%v", got)
		require.Equal(t, settle["transaction"], got["settleAgain"].(map[string]any)["transaction"])
		st := api.do(http.MethodGet, "/checkout/sessions/"+sess.Session.ExternalID, nil, m.test())
		require.Contains(t, string(st.Body), `"status":"confirming"`)
	})
}
