package worker

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/ent/acporderevent"
	"agentpay/ent/checkoutsession"
)

// TestACPOrderEventRetriedInOrder: the real worker runs the
// deliver_acp_order_event jobs a completed ACP checkout and its refund
// queue. The receiver answers 500 twice: order_create is retried on the
// schedule until it is taken, signed each time (VerifyACPSignature), and
// order_update, due meanwhile, waits for it; both succeed, each once.
func TestACPOrderEventRetriedInOrder(t *testing.T) {
	h := newWebhookHarness(t, []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond})
	ctx := context.Background()
	var mu sync.Mutex
	var secret string
	var got []string
	fails := 2
	done := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if err := agentpay.VerifyACPSignature(secret, r.Header.Get(agentpay.ACPSignatureHeader), body, time.Now()); err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if fails > 0 {
			fails--
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		got = append(got, string(body[:len(`{"type":"order_xxxxxx"`)]))
		if len(got) == 2 {
			close(done)
		}
	}))
	t.Cleanup(recv.Close)

	m, _ := h.merchant(t, "")
	auth := &agentpay.MerchantAuth{Merchant: m, Mode: agentpay.ModeTest}
	st, err := h.svc.SetACPWebhook(ctx, auth, recv.URL)
	require.NoError(t, err)
	mu.Lock()
	secret = st.Secret
	mu.Unlock()
	auth.Merchant, err = h.db.Ent.Merchant.Get(ctx, m.ID)
	require.NoError(t, err)
	cs, _, err := h.svc.CreateACPCheckout(ctx, auth, "create-1", agentpay.ACPCreate{Currency: "usd",
		LineItems: []agentpay.ACPItem{{ID: "book_1", Name: "A book", UnitAmount: 1250}}})
	require.NoError(t, err)
	// The session confirmed and its events recorded in one transaction,
	// as the deposit scan and a refund do.
	err = h.db.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		if err := tx.CheckoutSession.UpdateOneID(cs.ID).SetStatus(checkoutsession.StatusConfirmed).Exec(ctx); err != nil {
			return err
		}
		for _, kind := range []string{agentpay.EventPaymentConfirmed, agentpay.EventRefundCreated} {
			if _, err := h.svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{MerchantID: m.ID, SessionID: &cs.ID, Type: kind,
				Data: agentpay.EventData{SessionExternalID: cs.ExternalID}}); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)

	h.runWorker(t)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the ACP order events were not delivered")
	}
	mu.Lock()
	require.Equal(t, []string{`{"type":"order_create"`, `{"type":"order_update"`}, got)
	mu.Unlock()
	events, err := h.svc.ACPOrderEvents(ctx, auth, cs.ExternalID)
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Eventually(t, func() bool {
		e, err := h.db.Ent.ACPOrderEvent.Get(ctx, events[1].ID)
		return err == nil && e.Status == acporderevent.StatusSucceeded
	}, 10*time.Second, 10*time.Millisecond)
	first, err := h.db.Ent.ACPOrderEvent.Get(ctx, events[0].ID)
	require.NoError(t, err)
	require.Equal(t, acporderevent.StatusSucceeded, first.Status)
	require.Equal(t, 3, first.Attempts, "two refused tries, then taken")
	second, err := h.db.Ent.ACPOrderEvent.Get(ctx, events[1].ID)
	require.NoError(t, err)
	require.Equal(t, 1, second.Attempts, "it waited without using a try")
}
