package agentpay

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/webhookdelivery"
	"agentpay/internal/jobs"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

func TestRecordEventPayload(t *testing.T) {
	t.Parallel()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	m, _ := createWebhookMerchant(t, svc, "https://shop.example.com/hooks")
	in := confirmedEventInput(m, false)
	in.Data.Extra = map[string]any{"reason": "overpaid", "excess_usd": decimal.RequireFromString("0.05")}
	ev := recordTestEvent(t, svc, in)

	require.Equal(t, EventPaymentConfirmed, ev.EventType)
	require.False(t, ev.Livemode)
	want := `{"id":"` + ev.ID.String() + `","event":"payment.confirmed","data":{` +
		`"session_external_id":"cs_test_123","payment_external_id":"pay_456",` +
		`"amount_usd":49.95,"amount_token":49.95,"token":"USDC","chain":"base",` +
		`"tx_hash":"0xabc","from_address":"0xdef","metadata":{"items":["x","y"],"order_id":"A-1"},` +
		`"excess_usd":0.05,"reason":"overpaid"},` +
		`"timestamp":"2026-11-25T12:00:00.000Z","livemode":false}`
	require.Equal(t, want, string(ev.Payload))

	// The stored bytes are what gets sent.
	stored, err := svc.cfg.DB.Ent.WebhookEvent.Get(context.Background(), ev.ID)
	require.NoError(t, err)
	require.Equal(t, want, string(stored.Payload))

	t.Run("minimal data", func(t *testing.T) {
		ev := recordTestEvent(t, svc, EventInput{MerchantID: m.ID, Type: EventSessionExpired, Livemode: true,
			Data: EventData{SessionExternalID: "cs_1"}})
		var got map[string]any
		require.NoError(t, json.Unmarshal(ev.Payload, &got))
		require.Equal(t, map[string]any{"session_external_id": "cs_1", "metadata": map[string]any{}}, got["data"])
		require.Equal(t, true, got["livemode"])
		ts, err := time.Parse(time.RFC3339, got["timestamp"].(string))
		require.NoError(t, err)
		require.WithinDuration(t, time.Now(), ts, time.Minute)
	})

	t.Run("refused input", func(t *testing.T) {
		tests := []struct {
			name string
			in   EventInput
			err  error
		}{
			{"unknown kind", EventInput{MerchantID: m.ID, Type: "payment.maybe"}, nil},
			{"unknown merchant", EventInput{MerchantID: uuid.New(), Type: EventSessionExpired}, ErrNotFound},
			{"extra shadows a standard field", EventInput{MerchantID: m.ID, Type: EventPaymentFailed,
				Data: EventData{Extra: map[string]any{"amount_usd": 1}}}, nil},
		}
		for _, tt := range tests {
			err := svc.cfg.DB.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
				_, err := svc.RecordEvent(ctx, tx, sqlTx, tt.in)
				return err
			})
			require.Error(t, err, tt.name)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err, tt.name)
			}
		}
	})
}

// TestRecordEventOutbox: the event, its delivery and the delivery's job are
// committed with the state change that caused them, or not at all.
func TestRecordEventOutbox(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		webhookURL string
		fail       bool
		events     int
		deliveries int
		jobs       int
	}{
		{"commit", "https://shop.example.com/hooks", false, 1, 1, 1},
		{"rollback", "https://shop.example.com/hooks", true, 0, 0, 0},
		{"no webhook url", "", false, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
			m, _ := createWebhookMerchant(t, svc, tt.webhookURL)
			boom := errors.New("the state change failed after the event was recorded")
			err := svc.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
				if _, err := svc.RecordEvent(ctx, tx, sqlTx, confirmedEventInput(m, true)); err != nil {
					return err
				}
				if tt.fail {
					return boom
				}
				return nil
			})
			if tt.fail {
				require.ErrorIs(t, err, boom)
			} else {
				require.NoError(t, err)
			}
			db := svc.cfg.DB
			require.Equal(t, tt.events, testdb.CountRows(t, db, "webhook_events"))
			require.Equal(t, tt.deliveries, testdb.CountRows(t, db, "webhook_deliveries"))
			require.Equal(t, tt.jobs, countDeliverJobs(t, db))
			if tt.deliveries == 1 {
				d, err := db.Ent.WebhookDelivery.Query().Only(ctx)
				require.NoError(t, err)
				require.Equal(t, webhookdelivery.StatusPending, d.Status)
				require.Equal(t, tt.webhookURL, d.URL)
				require.Zero(t, d.Attempts)
				var args, queue string
				var maxAttempts int
				argsText := "args::text" // River keeps args as jsonb on both engines
				if !db.IsPostgres() {
					argsText = "json(args)"
				}
				require.NoError(t, db.SQL.QueryRowContext(ctx,
					"SELECT "+argsText+", queue, max_attempts FROM river_job WHERE kind = 'deliver_webhook'").Scan(&args, &queue, &maxAttempts))
				// The merchant and mode let a worker see the merchant's cap
				// is reached before reading anything (WebhookSlotsFull).
				require.JSONEq(t, `{"delivery_id":"`+d.ID.String()+`","merchant_id":"`+m.ID.String()+`","livemode":true}`, args)
				require.Equal(t, jobs.WebhookQueue, queue)
				require.Greater(t, maxAttempts, svc.webhookTries())
			}
		})
	}
}

func TestRecordEventNeedsJobs(t *testing.T) {
	t.Parallel()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	m, _ := createWebhookMerchant(t, svc, "https://shop.example.com/hooks")
	svc.cfg.Jobs = nil
	err := svc.cfg.DB.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		_, err := svc.RecordEvent(ctx, tx, sqlTx, confirmedEventInput(m, true))
		return err
	})
	require.ErrorContains(t, err, "Config.Jobs")
	require.Equal(t, 0, testdb.CountRows(t, svc.cfg.DB, "webhook_events"))
}
