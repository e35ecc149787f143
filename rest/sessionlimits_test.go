package rest

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/internal/testenv"
)

// TestOpenSessionCap: POST /checkout/sessions refuses a merchant holding
// MAX_OPEN_SESSIONS open sessions in the key's mode with 429 and a
// Retry-After until its first open session expires; the other mode has its
// own cap, a reused idempotency key still answers 409, and a cancelled
// session frees its place.
func TestOpenSessionCap(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{Config: agentpay.Config{MaxOpenSessions: 2}})
	mc := api.registerMerchant(nil)
	first, _ := api.createSession(mc.live(), map[string]any{"amount": 5, "currency": "USD", "idempotency_key": "order-1"})
	api.createSession(mc.live(), nil)

	resp := api.do(http.MethodPost, "/checkout/sessions", map[string]any{"amount": 5, "currency": "USD"}, mc.live())
	require.Equal(t, http.StatusTooManyRequests, resp.Status)
	require.Contains(t, resp.Map(t)["detail"], "rate limit exceeded: 2 open live sessions, the most a merchant may have at once")
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.InDelta(t, time.Until(first.Session.ExpiresAt).Seconds(), retry, 5, "until the first open session expires")

	resp = api.do(http.MethodPost, "/checkout/sessions", map[string]any{"amount": 5, "currency": "USD", "idempotency_key": "order-1"}, mc.live())
	require.Equal(t, http.StatusConflict, resp.Status, "a retried create is still told its session")
	api.createSession(mc.test(), nil) // test mode has its own cap

	resp = api.do(http.MethodPost, "/checkout/sessions/"+first.Session.ExternalID+"/cancel", nil, mc.live())
	require.Equal(t, http.StatusOK, resp.Status)
	api.createSession(mc.live(), nil)
}

// TestSelectIsLimitedPerSession: a session takes SELECT_RATE_LIMIT
// payment method selections a minute; one more is 429 with Retry-After and
// changes nothing, while another session of the same page's client is not
// affected.
func TestSelectIsLimitedPerSession(t *testing.T) {
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Chains: []chains.Name{chains.Base}, Confirmations: map[chains.Name]uint64{chains.Base: 3}})
	api := &checkoutAPI{testAPI: newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{SelectRateLimit: 3}})}
	m := api.merchant(t, agentpay.MerchantInput{})
	sess, other := api.session(t, m.Merchant), api.session(t, m.Merchant)

	sel := map[string]any{"chain": "base", "token": "USDC"}
	var address string
	for i := range 3 {
		resp := api.do(http.MethodPost, "/checkout/pay/"+sess.ExternalID+"/select", sel, nil)
		require.Equal(t, http.StatusOK, resp.Status, "select %d", i+1)
		address = resp.Map(t)["address"].(string)
	}
	resp := api.do(http.MethodPost, "/checkout/pay/"+sess.ExternalID+"/select", sel, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.Status)
	require.Contains(t, resp.Map(t)["detail"], "rate limit exceeded: 3 payment method selections per minute for this session")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	n, err := api.DB.Ent.DepositAddress.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one address, the same one each time")

	resp = api.do(http.MethodPost, "/checkout/pay/"+other.ExternalID+"/select", sel, nil)
	require.Equal(t, http.StatusOK, resp.Status, "another session has its own")
	require.NotEqual(t, address, resp.Map(t)["address"])
}
