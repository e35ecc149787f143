package rest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/acporderevent"
	"agentpay/internal/clock"
	"agentpay/internal/testenv"
)

// acpReceiver is an agent platform's ACP webhook endpoint on loopback: it
// checks Merchant-Signature with its own HMAC-SHA256 (not the service's
// code) and ACP's 300 s window, answers ACP's 401 otherwise, and validates
// every accepted body against ACP's schema.
type acpReceiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret atomic.Value // string
	mu     sync.Mutex
	got    []acpReceived
	// refused counts the 401s it answered.
	refused atomic.Int32
}

type acpReceived struct {
	RequestID string
	Type      string
	Data      map[string]any
}

var acpSignatureFormat = regexp.MustCompile(`^t=(\d+),v1=([a-fA-F0-9]{64})$`)

func newACPReceiver(t *testing.T) *acpReceiver {
	r := &acpReceiver{t: t}
	r.secret.Store("")
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *acpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil || req.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	refuse := func(msg string) {
		r.refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"type": "invalid_request", "code": "invalid_signature", "message": msg})
	}
	m := acpSignatureFormat.FindStringSubmatch(req.Header.Get("Merchant-Signature"))
	if m == nil {
		refuse("Merchant-Signature must be t=<timestamp>,v1=<64_hex>.")
		return
	}
	ts, _ := strconv.ParseInt(m[1], 10, 64)
	if skew := time.Since(time.Unix(ts, 0)); skew > 300*time.Second || skew < -300*time.Second {
		refuse("Timestamp outside allowed window.")
		return
	}
	mac := hmac.New(sha256.New, []byte(r.secret.Load().(string)))
	mac.Write([]byte(m[1] + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(want), []byte(m[2])) {
		refuse("Webhook signature verification failed.")
		return
	}
	// ACP's WebhookEvent: {type, data} and nothing else; data is an Order
	// (its schema) with type, checkout_session_id, permalink_url and
	// status (EventDataOrder).
	var ev map[string]json.RawMessage
	require.NoError(r.t, json.Unmarshal(body, &ev), string(body))
	require.Len(r.t, ev, 2, string(body))
	acpValidate(r.t, "Order", ev["data"])
	var got acpReceived
	require.NoError(r.t, json.Unmarshal(ev["type"], &got.Type))
	require.NoError(r.t, json.Unmarshal(ev["data"], &got.Data))
	for _, k := range []string{"type", "checkout_session_id", "permalink_url", "status"} {
		require.Contains(r.t, got.Data, k, string(body))
	}
	got.RequestID = req.Header.Get("Request-Id")
	r.mu.Lock()
	r.got = append(r.got, got)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"received":true}`))
}

func (r *acpReceiver) received() []acpReceived {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]acpReceived(nil), r.got...)
}

// TestACPOrderWebhooks: the merchant sets its test-mode ACP webhook URL
// (the secret issued once), an agent creates an ACP checkout and completes
// it with an x402 USDC payment on the base devnet; at confirmation an
// order_create is queued (with its River job, in the same transaction),
// a refund queues an order_update. The loopback receiver verifies each
// signature itself: a try signed more than 300 s off is refused and
// retried, signed again at the next try; order_update waits until
// order_create is through; a done event is not sent again.
func TestACPOrderWebhooks(t *testing.T) {
	var offset atomic.Int64
	env := testenv.New(t, testenv.Options{
		Chains: []chains.Name{chains.Base}, BlockTime: time.Second,
		Confirmations: map[chains.Name]uint64{chains.Base: 2}, Jobs: true,
	})
	api := newTestAPI(t, testAPIConfig{Env: env, Config: agentpay.Config{
		AgentMode: agentpay.ModeTest, WebhookAllowPrivate: true,
		Clock: clock.Func(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }),
	}})
	ctx := context.Background()
	m := api.registerMerchant(nil)
	sk := m.TestSecret
	recv := newACPReceiver(t)

	// Settings: the first URL issues the secret, shown once.
	resp := api.do(http.MethodPut, "/checkout/merchants/me/acp-webhook", map[string]any{"url": recv.srv.URL + "/orders"}, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var set acpWebhookBody
	resp.JSON(t, &set)
	require.Regexp(t, `^acpwhsec_[0-9a-f]{64}$`, set.Secret)
	require.False(t, set.Livemode)
	require.True(t, set.SecretSet)
	resp = api.do(http.MethodGet, "/checkout/merchants/me/acp-webhook", nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	require.JSONEq(t, `{"url":"`+recv.srv.URL+`/orders","livemode":false,"secret_set":true}`, string(resp.Body))
	resp = api.do(http.MethodGet, "/checkout/merchants/me/acp-webhook", nil, http.Header{"X-Checkout-Secret-Key": {m.LiveSecret}})
	require.JSONEq(t, `{"url":null,"livemode":true,"secret_set":false}`, string(resp.Body), "live mode is apart")
	// A roll replaces it; setting the URL again issues none.
	resp = api.do(http.MethodPost, "/checkout/merchants/me/acp-webhook/secret/roll", nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var rolled acpWebhookBody
	resp.JSON(t, &rolled)
	require.NotEqual(t, set.Secret, rolled.Secret)
	resp = api.do(http.MethodPut, "/checkout/merchants/me/acp-webhook", map[string]any{"url": recv.srv.URL + "/orders"}, m.test())
	require.NotContains(t, string(resp.Body), `"secret":`)
	recv.secret.Store(rolled.Secret)

	// The ACP checkout, completed with a USDC payment, confirmed.
	resp = api.acpDo(http.MethodPost, "/checkout_sessions", sk, "create-1", "CheckoutSessionCreateRequest", acpCreateBody(1250))
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	id := resp.Map(t)["id"].(string)
	payer := newX402Payer(t, api, 20_000_000)
	ch := api.x402Do(http.MethodGet, "/checkout/pay/"+id+"/x402", nil, nil)
	pr := paymentRequired(t, ch.Header)
	sig := payer.payV2(t, pr.Resource, pr.Accepts[0], "12500000", "").Get("Payment-Signature")
	complete := map[string]any{"payment_data": map[string]any{
		"handler_id": "agentpay_x402",
		"instrument": map[string]any{"type": "crypto", "credential": map[string]any{"type": "x402_payment_payload", "token": sig}},
	}}
	resp = api.acpDo(http.MethodPost, "/checkout_sessions/"+id+"/complete", sk, "complete-1", "CheckoutSessionCompleteRequest", complete)
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	auth, err := api.Svc.AuthenticateMerchant(ctx, sk)
	require.NoError(t, err)
	events, err := api.Svc.ACPOrderEvents(ctx, auth, id)
	require.NoError(t, err)
	require.Empty(t, events, "no order before the checkout completes")
	waitConfirmed(t, api, m, id)
	resp = api.acpDo(http.MethodGet, "/checkout_sessions/"+id, sk, "", "", nil)
	acpValidate(t, "CheckoutSession", resp.Body)
	require.Equal(t, "completed", resp.Map(t)["status"])
	sessionOrder := resp.Map(t)["order"].(map[string]any)

	// A refund of 2.50: order_update.
	refund := api.do(http.MethodPost, "/checkout/sessions/"+id+"/refunds", map[string]any{"amount_usd": 2.5, "reason": "damaged"}, m.test())
	require.Equal(t, http.StatusCreated, refund.Status, string(refund.Body))
	refundID := refund.Map(t)["refund_id"].(string)

	events, err = api.Svc.ACPOrderEvents(ctx, auth, id)
	require.NoError(t, err)
	require.Len(t, events, 2)
	create, update := events[0], events[1]
	require.Equal(t, acporderevent.EventTypeOrderCreate, create.EventType)
	require.Equal(t, acporderevent.EventTypeOrderUpdate, update.EventType)
	var jobs int
	require.NoError(t, api.DB.SQL.QueryRow(`SELECT count(*) FROM river_job WHERE kind = 'deliver_acp_order_event'`).Scan(&jobs))
	require.Equal(t, 2, jobs, "each event's job committed with it")

	// order_update waits for order_create.
	res, err := api.Svc.DeliverACPOrderEvent(ctx, update.ID)
	require.NoError(t, err)
	require.True(t, res.Waiting)
	require.False(t, res.Sent)

	// Signed 10 minutes late: the receiver refuses it, a failed try
	// retried by the schedule.
	offset.Store(int64(-10 * time.Minute))
	res, err = api.Svc.DeliverACPOrderEvent(ctx, create.ID)
	require.NoError(t, err)
	require.True(t, res.Sent)
	require.Error(t, res.Err)
	require.False(t, res.Done)
	require.Equal(t, 1, res.Tries)
	require.False(t, res.RetryAt.IsZero())
	require.Equal(t, int32(1), recv.refused.Load())
	require.Empty(t, recv.received())
	offset.Store(0)

	// The retry is signed at its own time: accepted.
	res, err = api.Svc.DeliverACPOrderEvent(ctx, create.ID)
	require.NoError(t, err)
	require.NoError(t, res.Err)
	require.True(t, res.Done)
	require.Equal(t, acporderevent.StatusSucceeded, res.Status)
	require.Equal(t, 2, res.Tries)
	res, err = api.Svc.DeliverACPOrderEvent(ctx, update.ID)
	require.NoError(t, err)
	require.NoError(t, res.Err)
	require.True(t, res.Done)

	// Done: nothing sent again.
	res, err = api.Svc.DeliverACPOrderEvent(ctx, create.ID)
	require.NoError(t, err)
	require.True(t, res.Done)
	require.False(t, res.Sent)

	got := recv.received()
	require.Len(t, got, 2)
	require.Equal(t, "order_create", got[0].Type)
	require.Equal(t, create.ID.String(), got[0].RequestID)
	require.Equal(t, "order_update", got[1].Type)
	require.Equal(t, update.ID.String(), got[1].RequestID)
	order := got[0].Data
	require.Equal(t, "order", order["type"])
	require.Equal(t, "ord_"+id, order["id"])
	require.Equal(t, sessionOrder["id"], order["id"], "the order the checkout answers")
	require.Equal(t, sessionOrder["permalink_url"], order["permalink_url"])
	require.Equal(t, id, order["checkout_session_id"])
	require.Equal(t, "confirmed", order["status"])
	require.Equal(t, []any{map[string]any{
		"id": id + "_li_0", "title": "A book", "product_id": "book_1",
		"quantity":   map[string]any{"ordered": 1.0, "current": 1.0, "fulfilled": 0.0},
		"unit_price": 1250.0, "subtotal": 1250.0, "status": "processing",
	}}, order["line_items"])
	require.Equal(t, []any{}, order["adjustments"])
	require.Equal(t, []any{
		map[string]any{"type": "subtotal", "display_text": "Subtotal", "amount": 1250.0},
		map[string]any{"type": "total", "display_text": "Total", "amount": 1250.0},
	}, order["totals"])
	adj := got[1].Data["adjustments"].([]any)
	require.Len(t, adj, 1)
	a := adj[0].(map[string]any)
	require.Equal(t, refundID, a["id"])
	require.Equal(t, "refund", a["type"])
	require.Equal(t, "pending", a["status"])
	require.Equal(t, 250.0, a["amount"])
	require.Equal(t, "usd", a["currency"])
	require.Equal(t, "Refund of 2.5 USDC: damaged", a["description"])
	require.Len(t, got[1].Data["totals"], 2, "nothing refunded yet: no amount_refunded")

	// The refund sent (the treasury pays it): order_update with the
	// adjustment completed and amount_refunded.
	api.Env.Fund(t, chains.Base, api.Env.Treasury.Address(chains.Base), 10_000_000)
	pending, err := api.Svc.PendingRefunds(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	var last error
	require.Eventually(t, func() bool {
		res, err := api.Svc.SendRefund(ctx, pending[0])
		last = err
		return err == nil && res.Done
	}, 30*time.Second, 250*time.Millisecond, "the refund is sent: %v", &last)
	events, err = api.Svc.ACPOrderEvents(ctx, auth, id)
	require.NoError(t, err)
	require.Len(t, events, 3)
	res, err = api.Svc.DeliverACPOrderEvent(ctx, events[2].ID)
	require.NoError(t, err)
	require.NoError(t, res.Err)
	got = recv.received()
	require.Len(t, got, 3)
	require.Equal(t, "order_update", got[2].Type)
	a = got[2].Data["adjustments"].([]any)[0].(map[string]any)
	require.Equal(t, "completed", a["status"])
	require.Equal(t, map[string]any{"type": "amount_refunded", "display_text": "Refunded", "amount": 250.0},
		got[2].Data["totals"].([]any)[2])
}

// TestACPOrderWebhookRefusals: the URL follows webhook_url's rules, bad
// input changes nothing, and a merchant without an ACP URL gets no ACP
// events.
func TestACPOrderWebhookRefusals(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{})
	m := api.registerMerchant(nil)
	live := http.Header{"X-Checkout-Secret-Key": {m.LiveSecret}}
	for _, body := range []any{
		map[string]any{"url": "ftp://example.com/x"},
		map[string]any{"url": "http://127.0.0.1/orders"}, // live events never go to a private address
		map[string]any{},
	} {
		resp := api.do(http.MethodPut, "/checkout/merchants/me/acp-webhook", body, live)
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
		require.Contains(t, resp.Map(t), "detail")
	}
	resp := api.do(http.MethodGet, "/checkout/merchants/me/acp-webhook", nil, live)
	require.JSONEq(t, `{"url":null,"livemode":true,"secret_set":false}`, string(resp.Body))
	resp = api.do(http.MethodGet, "/checkout/merchants/me/acp-webhook", nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status)
	_, err := api.Svc.DeliverACPOrderEvent(context.Background(), uuid.New())
	require.ErrorIs(t, err, agentpay.ErrNotFound)
}
