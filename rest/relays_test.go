package rest

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/testenv"
	"agentpay/x402"
)

// relayAPI is x402API with cfg's relay limits.
func relayAPI(t *testing.T, cfg agentpay.Config) *testAPI {
	t.Helper()
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: time.Second,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	cfg.AgentMode = agentpay.ModeTest
	return newTestAPI(t, testAPIConfig{Env: env, Config: cfg})
}

// gasNonce is how many transactions the treasury's base gas wallet has
// sent or pooled: one per relay, whatever it does on chain.
func (a *testAPI) gasNonce(t *testing.T) uint64 {
	t.Helper()
	gas := a.Env.Ledger(chains.Base).(interface{ GasAddress() string }).GasAddress()
	n, err := a.Env.EVM(chains.Base).Client().PendingNonceAt(context.Background(), common.HexToAddress(gas))
	require.NoError(t, err)
	return n
}

// relayPath is one REST path that has the treasury relay a payer's
// authorization for a session: how to pay a new 1 USD session with it,
// and whether an answer is the relay's success or its refusal for the
// payer's balance.
type relayPath struct {
	name string
	pay  func(t *testing.T, api *testAPI, m merchantCreds, payer x402Payer, nonce byte) apiResponse
	paid func(resp apiResponse) bool
	// short: the refusal of an authorization the payer's balance, less
	// its relays in flight, does not cover (or, once the paid relay is
	// included, the token's own check: a refusal before any gas too).
	short func(t *testing.T, resp apiResponse) bool
}

// x402Requirement is a new 1 USD session's base requirement.
func x402Requirement(t *testing.T, api *testAPI, m merchantCreds) (string, x402.RequirementsV1) {
	t.Helper()
	sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
	path := "/checkout/pay/" + sess.Session.ExternalID + "/x402"
	var ch x402ChallengeBody
	api.x402Do(http.MethodGet, path, nil, nil).JSON(t, &ch)
	return path, ch.Accepts[0]
}

var relayPaths = []relayPath{
	{
		name: "x402 session",
		pay: func(t *testing.T, api *testAPI, m merchantCreds, payer x402Payer, _ byte) apiResponse {
			path, req := x402Requirement(t, api, m)
			return api.x402Do(http.MethodGet, path, nil, xPayment(t, payer.pay(t, req, "1000000")))
		},
		paid: func(resp apiResponse) bool { return resp.Status == http.StatusOK },
		short: func(t *testing.T, resp apiResponse) bool {
			var ch x402ChallengeBody
			resp.JSON(t, &ch)
			return resp.Status == http.StatusPaymentRequired && strings.Contains(ch.Error, "insufficient balance")
		},
	},
	{
		name: "x402 facilitator settle",
		pay: func(t *testing.T, api *testAPI, m merchantCreds, payer x402Payer, _ byte) apiResponse {
			_, req := x402Requirement(t, api, m)
			body := map[string]any{"x402Version": 1, "paymentPayload": payer.pay(t, req, "1000000"), "paymentRequirements": req}
			return api.do(http.MethodPost, "/x402/settle", body, m.test())
		},
		paid: func(resp apiResponse) bool {
			return resp.Status == http.StatusOK && strings.Contains(string(resp.Body), `"success":true`)
		},
		short: func(t *testing.T, resp apiResponse) bool {
			return resp.Status == http.StatusOK && resp.Map(t)["errorReason"] == "insufficient_funds"
		},
	},
	{
		name: "browser wallet authorization",
		pay: func(t *testing.T, api *testAPI, m merchantCreds, payer x402Payer, nonce byte) apiResponse {
			sess, _ := api.createSession(m.test(), map[string]any{"amount": 1, "currency": "USD"})
			id := sess.Session.ExternalID
			sel := api.do(http.MethodPost, "/checkout/pay/"+id+"/select", map[string]any{"chain": "base", "token": "USDC"}, nil)
			require.Equal(t, http.StatusOK, sel.Status, string(sel.Body))
			return api.do(http.MethodPost, "/checkout/pay/"+id+"/authorization", signWalletPayment(t, payer.key, sel.Map(t), "1000000", nonce), nil)
		},
		paid: func(resp apiResponse) bool { return resp.Status == http.StatusOK },
		short: func(t *testing.T, resp apiResponse) bool {
			return resp.Status == http.StatusBadRequest && strings.Contains(string(resp.Body), "insufficient balance")
		},
	},
}

// TestRelaysOfOnePayerAtOnce: over each REST path that relays, a payer
// whose balance covers one 1 USD session pays four at once: one is
// relayed, the other three are refused for the payer's balance (as each
// path answers that), and the treasury's gas wallet sent one transaction.
func TestRelaysOfOnePayerAtOnce(t *testing.T) {
	api := x402API(t)
	m := api.registerMerchant(nil)
	for _, p := range relayPaths {
		t.Run(p.name, func(t *testing.T) {
			payer := newX402Payer(t, api, 1_000_000)
			before := api.gasNonce(t)
			const n = 4
			answers := make([]apiResponse, n)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					answers[i] = p.pay(t, api, m, payer, byte(i+1))
				}()
			}
			wg.Wait()
			require.Equal(t, before+1, api.gasNonce(t), "the treasury relayed one authorization")
			paid := 0
			for _, resp := range answers {
				if p.paid(resp) {
					paid++
					continue
				}
				require.True(t, p.short(t, resp), "%d %s", resp.Status, resp.Body)
			}
			require.Equal(t, 1, paid)
		})
	}
}

// TestRelayRateLimitsOverREST: the session's x402 address and the wallet's
// POST count each relay per client IP, refused with 429 and Retry-After
// past RELAY_IP_RATE_LIMIT; the facilitator's settles count per merchant
// (RELAY_MERCHANT_RATE_LIMIT), not per IP.
func TestRelayRateLimitsOverREST(t *testing.T) {
	// The limiter reads the service clock, which stands still here: every
	// relay falls in one window, whenever a minute turns.
	api := relayAPI(t, agentpay.Config{RelayIPRateLimit: 2, RelayMerchantRateLimit: 3, Clock: rateClock()})
	m := api.registerMerchant(nil)
	payer := newX402Payer(t, api, 10_000_000)
	x402, wallet, settle := relayPaths[0], relayPaths[2], relayPaths[1]

	require.True(t, x402.paid(x402.pay(t, api, m, payer, 1)))
	require.True(t, wallet.paid(wallet.pay(t, api, m, payer, 2)))
	before := api.gasNonce(t)
	for i, p := range []relayPath{x402, wallet} {
		resp := p.pay(t, api, m, payer, byte(3+i))
		require.Equal(t, http.StatusTooManyRequests, resp.Status, "%s: %s", p.name, resp.Body)
		require.Contains(t, string(resp.Body), "2 relayed authorizations per minute from this address")
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
	}
	require.Equal(t, before, api.gasNonce(t), "refused before any gas")

	// The merchant's own calls are not the client IP's: its third relay
	// this minute goes, its fourth is refused for the merchant.
	require.True(t, settle.paid(settle.pay(t, api, m, payer, 0)))
	resp := settle.pay(t, api, m, payer, 0)
	require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
	require.Contains(t, string(resp.Body), "3 relayed authorizations per minute of one merchant's test sessions")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
}
