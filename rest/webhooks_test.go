package rest

import (
	"context"
	"database/sql"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/ent"
	"agentpay/internal/testenv"
	"agentpay/webhook"
)

// recordWebhookEvent records an event the way a state change does: through
// RecordEvent inside a transaction.
func (a *testAPI) recordWebhookEvent(merchantID string, live bool, sessionExternalID string) *ent.WebhookEvent {
	a.t.Helper()
	var ev *ent.WebhookEvent
	err := a.DB.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
		ev, err = a.Svc.RecordEvent(ctx, tx, sqlTx, agentpay.EventInput{
			MerchantID: uuid.MustParse(merchantID),
			Type:       agentpay.EventSessionExpired,
			Livemode:   live,
			At:         time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC),
			Data: agentpay.EventData{
				SessionExternalID: sessionExternalID,
				Metadata:          map[string]any{"order_id": "A-1"},
			},
		})
		return err
	})
	require.NoError(a.t, err)
	return ev
}

var durationMs = regexp.MustCompile(`"duration_ms":\s*\d+`)

// stableDurations replaces the measured durations for golden files.
func stableDurations(b []byte) []byte {
	return durationMs.ReplaceAll(b, []byte(`"duration_ms":0`))
}

func TestWebhookEventLog(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{Env: testenv.New(t, testenv.Options{Jobs: true})})
	receiver := testenv.NewReceiver(t, http.StatusInternalServerError)
	extra := map[string]string{receiver.URL: "<receiver>"}

	m := api.registerMerchant(map[string]any{"name": "Acme", "email": "billing@acme.test", "webhook_url": receiver.URL + "/hook"})
	other := api.registerMerchant(nil)

	first := api.recordWebhookEvent(m.ID, false, "cs_test_first")
	time.Sleep(5 * time.Millisecond) // distinct created_at: the list is newest first
	second := api.recordWebhookEvent(m.ID, false, "cs_test_second")
	live := api.recordWebhookEvent(m.ID, true, "cs_live_one")

	// Two failed tries of the second event's delivery.
	ctx := context.Background()
	deliveries, err := api.DB.Ent.WebhookEvent.QueryDeliveries(second).All(ctx)
	require.NoError(t, err)
	require.Len(t, deliveries, 1)
	for range 2 {
		res, err := api.Svc.DeliverWebhook(ctx, deliveries[0].ID)
		require.NoError(t, err)
		require.Error(t, res.Err)
		require.False(t, res.Done)
	}

	// The list: the key's mode only, newest first, deliveries with counts.
	resp := api.do(http.MethodGet, "/checkout/webhooks/events", nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var list webhookEventListBody
	resp.JSON(t, &list)
	require.Equal(t, 2, list.Total)
	require.Len(t, list.Data, 2)
	require.Equal(t, second.ID.String(), list.Data[0].ID)
	require.Equal(t, first.ID.String(), list.Data[1].ID)
	require.Equal(t, 2, list.Data[0].Deliveries[0].Attempts)
	require.Equal(t, "pending", list.Data[0].Deliveries[0].Status)
	require.NotNil(t, list.Data[0].Deliveries[0].NextAttemptAt)
	assertGolden(t, "webhook_events_list", resp.Body, extra)

	resp = api.do(http.MethodGet, "/checkout/webhooks/events?limit=1&offset=1", nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	resp.JSON(t, &list)
	require.Len(t, list.Data, 1)
	require.Equal(t, first.ID.String(), list.Data[0].ID)
	require.False(t, list.HasMore)
	resp = api.do(http.MethodGet, "/checkout/webhooks/events?limit=0x", nil, m.test())
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))

	resp = api.do(http.MethodGet, "/checkout/webhooks/events", nil, m.live())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	resp.JSON(t, &list)
	require.Len(t, list.Data, 1)
	require.Equal(t, live.ID.String(), list.Data[0].ID)

	// One event: its payload as sent and every attempt.
	resp = api.do(http.MethodGet, "/checkout/webhooks/events/"+second.ID.String(), nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var detail webhookEventBody
	resp.JSON(t, &detail)
	require.JSONEq(t, string(second.Payload), string(detail.Payload))
	require.Len(t, detail.Deliveries, 1)
	require.NotNil(t, detail.Deliveries[0].AttemptLog)
	require.Len(t, *detail.Deliveries[0].AttemptLog, 2)
	for _, a := range *detail.Deliveries[0].AttemptLog {
		require.NotNil(t, a.StatusCode)
		require.Equal(t, http.StatusInternalServerError, *a.StatusCode)
		require.NotNil(t, a.Error)
	}
	assertGolden(t, "webhook_event", stableDurations(resp.Body), extra)

	// Redelivery: a new series of the same event.
	resp = api.do(http.MethodPost, "/checkout/webhooks/events/"+second.ID.String()+"/redeliver", nil, m.test())
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	var redelivery webhookDeliveryBody
	resp.JSON(t, &redelivery)
	require.NotEqual(t, deliveries[0].ID.String(), redelivery.ID)
	require.Equal(t, "pending", redelivery.Status)
	require.Zero(t, redelivery.Attempts)
	assertGolden(t, "webhook_redeliver", resp.Body, extra)

	res, err := api.Svc.DeliverWebhook(ctx, uuid.MustParse(redelivery.ID))
	require.NoError(t, err)
	require.Error(t, res.Err)
	resp = api.do(http.MethodGet, "/checkout/webhooks/events/"+second.ID.String(), nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	resp.JSON(t, &detail)
	require.Len(t, detail.Deliveries, 2)
	require.Equal(t, deliveries[0].ID.String(), detail.Deliveries[0].ID)
	require.Len(t, *detail.Deliveries[0].AttemptLog, 2)
	require.Equal(t, redelivery.ID, detail.Deliveries[1].ID)
	require.Len(t, *detail.Deliveries[1].AttemptLog, 1)
	require.Equal(t, 1, detail.Deliveries[1].Attempts)

	// Authentication and scoping.
	resp = api.do(http.MethodGet, "/checkout/webhooks/events", nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status, string(resp.Body))
	resp = api.do(http.MethodGet, "/checkout/webhooks/events/"+second.ID.String(), nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status, string(resp.Body))
	resp = api.do(http.MethodPost, "/checkout/webhooks/events/"+second.ID.String()+"/redeliver", nil, nil)
	require.Equal(t, http.StatusUnauthorized, resp.Status, string(resp.Body))
	for _, h := range []http.Header{other.test(), other.live(), m.live()} {
		resp = api.do(http.MethodGet, "/checkout/webhooks/events/"+second.ID.String(), nil, h)
		require.Equal(t, http.StatusNotFound, resp.Status, string(resp.Body))
		resp = api.do(http.MethodPost, "/checkout/webhooks/events/"+second.ID.String()+"/redeliver", nil, h)
		require.Equal(t, http.StatusNotFound, resp.Status, string(resp.Body))
	}
	resp = api.do(http.MethodGet, "/checkout/webhooks/events", nil, other.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	resp.JSON(t, &list)
	require.Empty(t, list.Data)
	resp = api.do(http.MethodGet, "/checkout/webhooks/events/not-a-uuid", nil, m.test())
	require.Equal(t, http.StatusNotFound, resp.Status, string(resp.Body))
	n, err := api.DB.Ent.WebhookDelivery.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n, "one per event and the redelivery: the 404s created none")
}

// TestWebhookSecretRoll: POST /checkout/merchants/me/webhook-secret/roll
// replaces the key's mode's secret only; until the overlap ends, deliveries
// verify under the replaced secret and the new one (Standard Webhooks
// signatures), never under the other mode's.
func TestWebhookSecretRoll(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{Env: testenv.New(t, testenv.Options{Jobs: true})})
	receiver := testenv.NewReceiver(t, http.StatusOK)
	m := api.registerMerchant(map[string]any{"name": "Acme", "email": "billing@acme.test", "webhook_url": receiver.URL + "/hook"})

	for _, tt := range []struct {
		body   any
		detail string
	}{
		{map[string]any{"overlap_seconds": -1}, "overlap_seconds: must be from 0 to 604800 (7 days)"},
		{map[string]any{"overlap_seconds": 604801}, "overlap_seconds: must be from 0 to 604800 (7 days)"},
		{map[string]any{"overlap_seconds": "1h"}, "overlap_seconds: must be a number"},
		{map[string]any{"mode": "live"}, `json: unknown field "mode"`},
	} {
		resp := api.do(http.MethodPost, "/checkout/merchants/me/webhook-secret/roll", tt.body, m.test())
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status, string(resp.Body))
		require.Equal(t, map[string]any{"detail": tt.detail}, resp.Map(t))
	}

	start := time.Now()
	resp := api.do(http.MethodPost, "/checkout/merchants/me/webhook-secret/roll", nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	assertGolden(t, "merchant_webhook_secret_roll", resp.Body, nil)
	var rolled rolledWebhookSecretBody
	resp.JSON(t, &rolled)
	require.False(t, rolled.Livemode)
	require.NotEqual(t, m.TestWebhookSecret, rolled.WebhookSecret)
	require.NotNil(t, rolled.PreviousSecretExpiresAt)
	require.WithinDuration(t, start.Add(24*time.Hour), *rolled.PreviousSecretExpiresAt, time.Minute)

	ev := api.recordWebhookEvent(m.ID, false, "cs_test_rolled")
	ctx := context.Background()
	deliveries, err := api.DB.Ent.WebhookEvent.QueryDeliveries(ev).All(ctx)
	require.NoError(t, err)
	res, err := api.Svc.DeliverWebhook(ctx, deliveries[0].ID)
	require.NoError(t, err)
	require.NoError(t, res.Err)
	got := receiver.Requests()
	require.Len(t, got, 1)
	h, body := got[0].Header, got[0].Body
	for secret, want := range map[string]bool{rolled.WebhookSecret: true, m.TestWebhookSecret: true, m.WebhookSecret: false} {
		err := webhook.VerifyStandard(secret, h, body, 0, time.Now())
		require.Equal(t, want, err == nil, "%v", err)
	}

	// A live key rolls live mode's secret; an overlap of 0 ends the old one
	// at once.
	resp = api.do(http.MethodPost, "/checkout/merchants/me/webhook-secret/roll", map[string]any{"overlap_seconds": 0}, m.live())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	resp.JSON(t, &rolled)
	require.True(t, rolled.Livemode)
	require.Nil(t, rolled.PreviousSecretExpiresAt)
	require.Nil(t, resp.Map(t)["previous_secret_expires_at"])
}

// TestWebhookAttemptLogRefusedTarget: a merchant whose webhook URL points
// at a private address (set while the operator allowed them) gets no
// request once they are not allowed; its attempt log shows the refusal
// with the same generic error whatever the address, no status and no
// duration, so it maps nothing of the service's network.
func TestWebhookAttemptLogRefusedTarget(t *testing.T) {
	receiver := testenv.NewReceiver(t, http.StatusOK)
	allowed := testenv.New(t, testenv.Options{Jobs: true})
	before := newTestAPI(t, testAPIConfig{Env: allowed})
	// A name: what it resolves to must not show.
	hook := strings.Replace(receiver.URL, "127.0.0.1", "localhost", 1) + "/admin"
	m := before.registerMerchant(map[string]any{"name": "Probe", "email": "probe@acme.test", "webhook_url": hook})

	api := newTestAPI(t, testAPIConfig{Env: testenv.New(t, testenv.Options{
		DB: allowed.DB, Vault: allowed.Vault, Jobs: true, PublicWebhooksOnly: true})})
	ev := api.recordWebhookEvent(m.ID, false, "cs_test_probe")
	ctx := context.Background()
	// The first delivery, and a redelivery: each is refused when it
	// connects.
	resp := api.do(http.MethodPost, "/checkout/webhooks/events/"+ev.ID.String()+"/redeliver", nil, m.test())
	require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	deliveries, err := api.DB.Ent.WebhookEvent.QueryDeliveries(ev).All(ctx)
	require.NoError(t, err)
	require.Len(t, deliveries, 2)
	for _, d := range deliveries {
		res, err := api.Svc.DeliverWebhook(ctx, d.ID)
		require.NoError(t, err)
		require.Error(t, res.Err)
	}
	require.Empty(t, receiver.Requests(), "the receiver was reached")

	resp = api.do(http.MethodGet, "/checkout/webhooks/events/"+ev.ID.String(), nil, m.test())
	require.Equal(t, http.StatusOK, resp.Status, string(resp.Body))
	var detail struct {
		Deliveries []struct {
			AttemptLog []map[string]any `json:"attempt_log"`
		}
	}
	resp.JSON(t, &detail)
	require.Len(t, detail.Deliveries, 2)
	for _, d := range detail.Deliveries {
		require.Len(t, d.AttemptLog, 1)
		a := d.AttemptLog[0]
		require.Nil(t, a["status_code"])
		require.Equal(t, float64(0), a["duration_ms"])
		require.Equal(t, "refused: the webhook URL's host does not resolve to a public address", a["error"])
	}
	for _, addr := range []string{"127.0.0.1", "::1"} {
		require.NotContains(t, string(resp.Body), addr, "the address dialled is not shown")
	}
}

// TestWebhookRedeliverRateLimited: past its hourly redeliveries an event
// is refused 429 with Retry-After, and nothing is created.
func TestWebhookRedeliverRateLimited(t *testing.T) {
	api := newTestAPI(t, testAPIConfig{Env: testenv.New(t, testenv.Options{Jobs: true})})
	m := api.registerMerchant(map[string]any{"name": "Acme", "email": "billing@acme.test", "webhook_url": "https://acme.example/hook"})
	ev := api.recordWebhookEvent(m.ID, false, "cs_test_loop")
	path := "/checkout/webhooks/events/" + ev.ID.String() + "/redeliver"
	for range agentpay.RedeliveriesPerEvent {
		resp := api.do(http.MethodPost, path, nil, m.test())
		require.Equal(t, http.StatusCreated, resp.Status, string(resp.Body))
	}
	resp := api.do(http.MethodPost, path, nil, m.test())
	require.Equal(t, http.StatusTooManyRequests, resp.Status, string(resp.Body))
	require.Contains(t, resp.Map(t)["detail"], "10 redeliveries per hour of one event")
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.Positive(t, retry)
	require.LessOrEqual(t, retry, 3600)
	require.Equal(t, "10", resp.Header.Get("X-RateLimit-Limit"))
	require.Equal(t, "0", resp.Header.Get("X-RateLimit-Remaining"))
	n, err := api.DB.Ent.WebhookEvent.QueryDeliveries(ev).Count(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1+agentpay.RedeliveriesPerEvent, n)
}
