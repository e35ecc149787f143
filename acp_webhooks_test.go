package agentpay

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/acporderevent"
	"agentpay/ent/checkoutsession"
	"agentpay/internal/testenv"
)

// TestACPSignature: Merchant-Signature is t=<unix>,v1=<hex HMAC-SHA256 of
// t + "." + body> (checked against an HMAC computed here), and
// VerifyACPSignature takes it within 300 s either way, refusing the rest.
func TestACPSignature(t *testing.T) {
	secret, body := "acpwhsec_00", []byte(`{"type":"order_create","data":{}}`)
	at := time.Unix(1_800_000_000, 0)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("1800000000." + string(body)))
	sig := ACPSignature(secret, at, body)
	require.Equal(t, "t=1800000000,v1="+hex.EncodeToString(mac.Sum(nil)), sig)

	other := ACPSignature("acpwhsec_01", at, body)
	for _, tc := range []struct {
		name, header string
		body         []byte
		now          time.Time
		ok           bool
	}{
		{"at once", sig, body, at, true},
		{"300 s later", sig, body, at.Add(300 * time.Second), true},
		{"301 s later", sig, body, at.Add(301 * time.Second), false},
		{"300 s early", sig, body, at.Add(-300 * time.Second), true},
		{"301 s early", sig, body, at.Add(-301 * time.Second), false},
		{"another body", sig, []byte(`{"type":"order_update","data":{}}`), at, false},
		{"another secret", other, body, at, false},
		{"another time", "t=" + strconv.Itoa(1_800_000_001) + sig[len("t=1800000000"):], body, at, false},
		{"missing", "", body, at, false},
		{"malformed", "v1=" + sig[len("t=1800000000,v1="):], body, at, false},
		{"short v1", sig[:len(sig)-2], body, at, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifyACPSignature(secret, tc.header, tc.body, tc.now)
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, ErrACPSignature)
			}
		})
	}
}

// TestACPOrderRules: which of agentpay's events make an ACP order event,
// refund statuses in ACP's words, and amounts in whole cents rounded down.
func TestACPOrderRules(t *testing.T) {
	for ev, want := range map[string]string{
		EventPaymentConfirmed: ACPOrderCreate, EventRefundCreated: ACPOrderUpdate,
		EventRefundCompleted: ACPOrderUpdate, EventRefundFailed: ACPOrderUpdate,
		EventPaymentDetected: "", EventPaymentConfirming: "", EventPaymentFailed: "",
		EventSessionExpired: "", EventSettlementCompleted: "", EventWebhookTest: "",
	} {
		require.Equal(t, want, acpOrderEventFor(ev), ev)
	}
	for in, want := range map[string]int64{"12.5": 1250, "2.509999": 250, "0.001": 0, "1000000": 100000000} {
		require.Equal(t, want, acpCents(decimal.RequireFromString(in)), in)
	}
	require.Equal(t, "pending", acpAdjustmentStatus("submitted"))
	require.Equal(t, "completed", acpAdjustmentStatus("completed"))
	require.Equal(t, "failed", acpAdjustmentStatus("failed"))
}

// TestACPOrderEventsOfConcurrentChanges: two changes of one order recorded
// at the same time (a refund created while another completes) both commit,
// their events numbered one after the other: the session's row is locked
// while an event takes its seq (without it, PostgreSQL refuses one of the
// two transactions on the unique (session_id, seq)).
func TestACPOrderEventsOfConcurrentChanges(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	name := "ACP Shop"
	reg, err := svc.RegisterMerchant(ctx, MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	auth := &MerchantAuth{Merchant: reg.Merchant, Mode: ModeTest}
	_, err = svc.SetACPWebhook(ctx, auth, "https://platform.example/acp")
	require.NoError(t, err)
	cs, _, err := svc.CreateACPCheckout(ctx, auth, "create-1", ACPCreate{Currency: "usd", LineItems: []ACPItem{{ID: "a", UnitAmount: 500}}})
	require.NoError(t, err)
	record := func(kind string) error {
		return svc.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
			_, err := svc.RecordEvent(ctx, tx, sqlTx, EventInput{MerchantID: reg.Merchant.ID, SessionID: &cs.ID, Type: kind})
			return err
		})
	}
	require.NoError(t, svc.cfg.DB.Ent.CheckoutSession.UpdateOneID(cs.ID).SetStatus(checkoutsession.StatusConfirmed).Exec(ctx))
	require.NoError(t, record(EventPaymentConfirmed))
	// Each change holds its transaction open until both have recorded
	// theirs (or one waits on the other's lock).
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = record(EventRefundCreated)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	events, err := svc.ACPOrderEvents(ctx, auth, cs.ExternalID)
	require.NoError(t, err)
	require.Len(t, events, 1+len(errs))
	for i, e := range events {
		require.Equal(t, i+1, e.Seq)
	}
	require.Equal(t, acporderevent.EventTypeOrderCreate, events[0].EventType)
	require.Equal(t, acporderevent.EventTypeOrderUpdate, events[1].EventType)
}
