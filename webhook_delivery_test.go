package agentpay

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/internal/store"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
	"agentpay/internal/webhooksend"
	"agentpay/webhook"
)

// createWebhookMerchant writes a merchant whose webhook URL is webhookURL
// in both modes, and returns it with its webhook secret: one secret of the
// form registration issues, sealed in each mode's column as registration
// seals it, so a test reads either mode's deliveries with it.
func createWebhookMerchant(t *testing.T, svc *Service, webhookURL string) (*ent.Merchant, string) {
	t.Helper()
	secret, err := webhook.NewSecret()
	require.NoError(t, err)
	return createWebhookMerchantWithSecret(t, svc, webhookURL, secret), secret
}

// createWebhookMerchantWithSecret is createWebhookMerchant with a given
// secret (of either form).
func createWebhookMerchantWithSecret(t *testing.T, svc *Service, webhookURL, secret string) *ent.Merchant {
	t.Helper()
	id := uuid.New()
	live, err := svc.cfg.Vault.Seal([]byte(secret), webhookSecretAD(id, ModeLive))
	require.NoError(t, err)
	test, err := svc.cfg.Vault.Seal([]byte(secret), webhookSecretAD(id, ModeTest))
	require.NoError(t, err)
	m, err := svc.cfg.DB.Ent.Merchant.Create().
		SetID(id).
		SetName("Shop").
		SetEmail("shop@example.com").
		SetWebhookURL(webhookURL).
		SetWebhookSecretEncrypted(live).
		SetTestWebhookURL(webhookURL).
		SetTestWebhookSecretEncrypted(test).
		Save(context.Background())
	require.NoError(t, err)
	return m
}

func confirmedEventInput(m *ent.Merchant, live bool) EventInput {
	amount := decimal.RequireFromString("49.95")
	return EventInput{
		MerchantID: m.ID,
		Type:       EventPaymentConfirmed,
		Livemode:   live,
		At:         time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC),
		Data: EventData{
			SessionExternalID: "cs_test_123",
			PaymentExternalID: "pay_456",
			AmountUSD:         &amount,
			AmountToken:       &amount,
			Token:             "USDC",
			Chain:             "base",
			TxHash:            "0xabc",
			FromAddress:       "0xdef",
			Metadata:          map[string]any{"order_id": "A-1", "items": []any{"x", "y"}},
		},
	}
}

func recordTestEvent(t *testing.T, svc *Service, in EventInput) *ent.WebhookEvent {
	t.Helper()
	var ev *ent.WebhookEvent
	err := svc.cfg.DB.WithTx(context.Background(), func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		var err error
		ev, err = svc.RecordEvent(ctx, tx, sqlTx, in)
		return err
	})
	require.NoError(t, err)
	return ev
}

func onlyDelivery(t *testing.T, svc *Service, eventID uuid.UUID) *ent.WebhookDelivery {
	t.Helper()
	d, err := svc.cfg.DB.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(eventID)).Only(context.Background())
	require.NoError(t, err)
	return d
}

func countDeliverJobs(t *testing.T, db *store.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.SQL.QueryRowContext(context.Background(),
		"SELECT count(*) FROM river_job WHERE kind = 'deliver_webhook'").Scan(&n))
	return n
}

// TestValidateWebhookURL: the shape of a webhook URL, and where it may
// point: anywhere when private addresses are allowed (test mode with
// WEBHOOK_ALLOW_PRIVATE), else not at localhost nor at an IP literal outside
// the public ranges.
func TestValidateWebhookURL(t *testing.T) {
	t.Parallel()
	const (
		localhost = "webhook_url: must not point at localhost: webhooks go to public addresses only"
		private   = "webhook_url: must not point at a private, loopback or link-local address: webhooks go to public addresses only"
	)
	tests := []struct {
		url       string
		privateOK bool
		err       string // "" = valid
	}{
		{"https://shop.example.com/hooks", false, ""},
		{"http://shop.example.com:8080/hooks?x=1", false, ""},
		{"https://93.184.216.34/hooks", false, ""},
		{"http://127.0.0.1:9000/hooks", true, ""},
		{"http://localhost:9000/hooks", true, ""},
		{"http://10.1.2.3/hooks", true, ""},
		{"http://[::1]:9000/hooks", true, ""},
		{"", false, "webhook_url: must be an http or https URL"},
		{" https://shop.example.com", false, "webhook_url: must be an http or https URL"},
		{"http://0/0000 000", true, "webhook_url: must be an http or https URL"},
		{"https://shop.example.com/a\u00a0b", false, "webhook_url: must be an http or https URL"},
		{"ftp://shop.example.com/hooks", true, "webhook_url: must be an http or https URL"},
		{"shop.example.com/hooks", true, "webhook_url: must be an http or https URL"},
		{"mailto:shop@example.com", true, "webhook_url: must be an http or https URL"},
		{"https:///hooks", true, "webhook_url: must include a host"},
		{"https://shop.example.com:99999/", true, "webhook_url: has an invalid port"},
		{"https://shop.example.com/" + strings.Repeat("a", 2048), true, "webhook_url: must be at most 2048 characters long"},
		{"http://localhost:9000/hooks", false, localhost},
		{"http://LOCALHOST./hooks", false, localhost},
		{"http://api.localhost/hooks", false, localhost},
		{"http://127.0.0.1:9000/hooks", false, private},
		{"http://10.1.2.3/hooks", false, private},
		{"http://192.168.1.10/hooks", false, private},
		{"http://169.254.169.254/latest/meta-data", false, private},
		{"http://[::1]:9000/hooks", false, private},
		{"http://[::ffff:127.0.0.1]/hooks", false, private},
		{"http://[fd00::1]/hooks", false, private},
		{"http://0.0.0.0/hooks", false, private},
	}
	for _, tt := range tests {
		t.Run(tt.url+"/"+strconv.FormatBool(tt.privateOK), func(t *testing.T) {
			err := ValidateWebhookURL(tt.url, tt.privateOK)
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, IsValidation(err), "%v", err)
			require.EqualError(t, err, tt.err)
		})
	}
}

// TestWebhookPrivateAddressRule: which modes may reach private addresses,
// by the operator's setting: test mode only when it is on, live mode never.
// Registration and changes of webhook_url follow the same rule.
func TestWebhookPrivateAddressRule(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		svc := &Service{cfg: Config{WebhookAllowPrivate: allow}}
		require.False(t, svc.webhookMayReachPrivate(ModeLive), "live, allow=%v", allow)
		require.Equal(t, allow, svc.webhookMayReachPrivate(ModeTest), "test, allow=%v", allow)
	}
}

// TestDeliverWebhookSigned: the receiver gets the stored bytes with both
// signatures, which it can recompute from the body and its secret.
func TestDeliverWebhookSigned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	rcv := testenv.NewReceiver(t, http.StatusOK)
	m, secret := createWebhookMerchant(t, svc, rcv.URL+"/hooks")
	ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
	d := onlyDelivery(t, svc, ev.ID)

	res, err := svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.True(t, res.Done)
	require.NoError(t, res.Err)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
	require.Equal(t, 1, res.Tries)
	d = onlyDelivery(t, svc, ev.ID)
	require.Equal(t, webhookdelivery.StatusSucceeded, d.Status)
	require.Equal(t, 1, d.Attempts)
	require.NotNil(t, d.CompletedAt)
	require.NotNil(t, d.LastAttemptAt)
	require.Nil(t, d.NextAttemptAt)

	got := rcv.Requests()
	require.Len(t, got, 1)
	r := got[0]
	require.Equal(t, ev.Payload, r.Body, "the exact stored bytes")
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))

	// X-Checkout-Signature: hex HMAC-SHA256 of the body, keyed with the secret.
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(r.Body)
	require.Equal(t, hex.EncodeToString(mac.Sum(nil)), r.Header.Get("X-Checkout-Signature"))
	require.NoError(t, webhook.Verify(secret, r.Body, r.Header.Get("X-Checkout-Signature")))
	require.ErrorIs(t, webhook.Verify(secret, append([]byte(" "), r.Body...), r.Header.Get("X-Checkout-Signature")), webhook.ErrSignature)

	// Standard Webhooks: id, timestamp, v1 signature over "id.ts.Body" keyed
	// with the bytes the secret's base64 after "whsec_" decodes to.
	require.Equal(t, ev.ID.String(), r.Header.Get("webhook-id"))
	ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().Unix(), ts, 60)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	require.Len(t, key, 32)
	smac := hmac.New(sha256.New, key)
	smac.Write([]byte(r.Header.Get("webhook-id") + "." + r.Header.Get("webhook-timestamp") + "."))
	smac.Write(r.Body)
	require.Equal(t, "v1,"+base64.StdEncoding.EncodeToString(smac.Sum(nil)), r.Header.Get("webhook-signature"))
	require.NoError(t, webhook.VerifyStandard(secret, r.Header, r.Body, time.Minute, time.Now()))

	var body struct {
		ID, Event, Timestamp string
		Livemode             bool
		Data                 map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(r.Body, &body))
	require.Equal(t, ev.ID.String(), body.ID)
	require.Equal(t, "payment.confirmed", body.Event)
	for _, f := range []string{"session_external_id", "payment_external_id", "amount_usd", "amount_token", "token", "chain", "tx_hash", "from_address", "metadata"} {
		require.Contains(t, body.Data, f)
	}
	require.Equal(t, "49.95", string(body.Data["amount_usd"]), "amounts are JSON numbers")

	attempts, err := svc.WebhookAttempts(ctx, d.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 1)
	require.Equal(t, http.StatusOK, attempts[0].StatusCode)
	require.Empty(t, attempts[0].Error)
	require.GreaterOrEqual(t, attempts[0].DurationMs, int64(0))

	// A duplicate job for a delivery that succeeded sends nothing.
	res, err = svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Nil(t, res.Attempt)
	require.Len(t, rcv.Requests(), 1)

	_, err = svc.DeliverWebhook(ctx, uuid.New())
	require.ErrorIs(t, err, ErrNotFound)
}

// TestDeliverWebhookAnswers: any 2xx succeeds; anything else (redirects
// included, they are not followed) is a failed try with its status kept.
func TestDeliverWebhookAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		ok     bool
	}{
		{200, true}, {201, true}, {202, true}, {204, true}, {299, true},
		{301, false}, {302, false}, {400, false}, {401, false}, {404, false}, {500, false}, {503, false},
	}
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			ctx := context.Background()
			rcv := testenv.NewReceiver(t, tt.status)
			m, _ := createWebhookMerchant(t, svc, rcv.URL)
			ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
			res, err := svc.DeliverWebhook(ctx, onlyDelivery(t, svc, ev.ID).ID)
			require.NoError(t, err)
			require.Len(t, rcv.Requests(), 1)
			require.Equal(t, tt.status, res.Attempt.StatusCode)
			if tt.ok {
				require.True(t, res.Done)
				require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
				return
			}
			require.False(t, res.Done)
			require.Error(t, res.Err)
			require.Contains(t, res.Attempt.Error, strconv.Itoa(tt.status))
			require.Equal(t, webhookdelivery.StatusPending, res.Status)
		})
	}
}

// TestDeliverWebhookRetrySchedule runs one delivery's tries by hand: each
// failure schedules the next at the configured delay, and the last failure
// marks the delivery failed.
func TestDeliverWebhookRetrySchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	delays := []time.Duration{30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 2 * time.Hour}
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{}) // the default schedule
	require.Equal(t, 6, svc.webhookTries())
	rcv := testenv.NewReceiver(t, http.StatusInternalServerError)
	m, _ := createWebhookMerchant(t, svc, rcv.URL)
	ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
	d := onlyDelivery(t, svc, ev.ID)

	for try := 1; try <= 6; try++ {
		before := time.Now()
		res, err := svc.DeliverWebhook(ctx, d.ID)
		after := time.Now()
		require.NoError(t, err)
		require.Equal(t, try, res.Tries)
		require.Equal(t, 500, res.Attempt.StatusCode)
		stored := onlyDelivery(t, svc, ev.ID)
		require.Equal(t, try, stored.Attempts)
		if try < 6 {
			require.False(t, res.Done, "try %d", try)
			require.Equal(t, webhookdelivery.StatusPending, stored.Status)
			// Scheduled from the try's end: between the call's start and
			// its return, plus the delay.
			require.False(t, res.RetryAt.Before(before.Add(delays[try-1])), "try %d", try)
			require.False(t, res.RetryAt.After(after.Add(delays[try-1])), "try %d", try)
			require.WithinDuration(t, res.RetryAt, *stored.NextAttemptAt, time.Millisecond)
			continue
		}
		require.True(t, res.Done)
		require.Equal(t, webhookdelivery.StatusFailed, res.Status)
		require.Equal(t, webhookdelivery.StatusFailed, stored.Status)
		require.NotNil(t, stored.CompletedAt)
		require.Nil(t, stored.NextAttemptAt)
	}
	attempts, err := svc.WebhookAttempts(ctx, d.ID)
	require.NoError(t, err)
	require.Len(t, attempts, 6)

	res, err := svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Nil(t, res.Attempt)
	require.Len(t, rcv.Requests(), 6, "a failed delivery is not tried again")
}

// TestDeliverWebhookAddressRule: a delivery reaches a loopback receiver
// only in test mode with private addresses allowed; otherwise it is refused
// when connecting (the URL's name resolves, the address dialled is checked)
// and logged as a failed try whose error names no address and whose
// duration is 0: the attempt log shows the merchant nothing of the
// service's network.
func TestDeliverWebhookAddressRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		allowPrivate bool
		livemode     bool
		host         string // replaces 127.0.0.1 in the receiver's URL
		sent         bool
	}{
		{"test mode, private allowed, loopback IP", true, false, "127.0.0.1", true},
		{"test mode, private allowed, localhost", true, false, "localhost", true},
		{"test mode, loopback IP", false, false, "127.0.0.1", false},
		{"test mode, name resolving to loopback", false, false, "localhost", false},
		{"live mode, loopback IP", false, true, "127.0.0.1", false},
		{"live mode, private allowed, loopback IP", true, true, "127.0.0.1", false},
		{"live mode, private allowed, name resolving to loopback", true, true, "localhost", false},
	}
	services := map[bool]*Service{
		false: newTestService(t, testenv.New(t, testenv.Options{Jobs: true, PublicWebhooksOnly: true}), Config{}),
		true:  newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{}),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			svc := services[tt.allowPrivate]
			rcv := testenv.NewReceiver(t, http.StatusOK)
			m, _ := createWebhookMerchant(t, svc, strings.Replace(rcv.URL, "127.0.0.1", tt.host, 1))
			ev := recordTestEvent(t, svc, confirmedEventInput(m, tt.livemode))
			res, err := svc.DeliverWebhook(ctx, onlyDelivery(t, svc, ev.ID).ID)
			require.NoError(t, err)
			if tt.sent {
				require.Len(t, rcv.Requests(), 1)
				require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
				return
			}
			require.Empty(t, rcv.Requests())
			require.False(t, res.Done)
			require.Equal(t, 1, res.Tries)
			attempts, err := svc.WebhookAttempts(ctx, res.DeliveryID)
			require.NoError(t, err)
			require.Len(t, attempts, 1)
			a := attempts[0]
			require.Nil(t, AttemptStatusCode(a))
			require.Zero(t, a.DurationMs)
			require.Equal(t, "refused: the webhook URL's host does not resolve to a public address", *AttemptError(a))
		})
	}
}

func TestRedeliverWebhook(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	rcv := testenv.NewReceiver(t, http.StatusOK)
	m, _ := createWebhookMerchant(t, svc, rcv.URL)
	other, _ := createWebhookMerchant(t, svc, rcv.URL)
	bare, _ := createWebhookMerchant(t, svc, "")
	ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
	_, err := svc.DeliverWebhook(ctx, onlyDelivery(t, svc, ev.ID).ID)
	require.NoError(t, err)
	require.Len(t, rcv.Requests(), 1)

	_, err = svc.RedeliverWebhook(ctx, other.ID, ev.ID)
	require.ErrorIs(t, err, ErrNotFound, "another merchant's event")
	_, err = svc.RedeliverWebhook(ctx, m.ID, uuid.New())
	require.ErrorIs(t, err, ErrNotFound)
	bareEv := recordTestEvent(t, svc, confirmedEventInput(bare, false))
	_, err = svc.RedeliverWebhook(ctx, bare.ID, bareEv.ID)
	require.True(t, IsValidation(err), "%v", err)

	jobs := countDeliverJobs(t, svc.cfg.DB)
	d, err := svc.RedeliverWebhook(ctx, m.ID, ev.ID)
	require.NoError(t, err)
	require.Equal(t, webhookdelivery.StatusPending, d.Status)
	require.Equal(t, ev.ID, d.EventID)
	require.Equal(t, jobs+1, countDeliverJobs(t, svc.cfg.DB))

	res, err := svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
	got := rcv.Requests()
	require.Len(t, got, 2)
	require.True(t, bytes.Equal(got[0].Body, got[1].Body), "a redelivery sends the same bytes")
	require.Equal(t, ev.ID.String(), got[1].Header.Get("webhook-id"))
	n, err := svc.cfg.DB.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(ev.ID)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// TestWebhookTriesShareStatements: tries delivered at once are recorded in
// shared statements, each with its own attempt and delivery state; a try of
// a delivery already finished is logged without changing it.
func TestWebhookTriesShareStatements(t *testing.T) {
	if !testdb.IsPostgres() {
		t.Skip("PostgreSQL only (SQLite shares a transaction, not a statement): set TEST_DATABASE_URL")
	}
	ctx := context.Background()
	const n = 40
	// Every try of a merchant is in flight at once: no cap may hold one back.
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{WebhookMerchantConcurrency: n})
	ok := testenv.NewReceiver(t, 200)
	failing := testenv.NewReceiver(t, 500)
	mOK, _ := createWebhookMerchant(t, svc, ok.URL)
	mFail, _ := createWebhookMerchant(t, svc, failing.URL)
	// One try each first: a receiver new to the process gets one try at a
	// time until it has answered (webhook_receivers.go).
	for _, m := range []*ent.Merchant{mOK, mFail} {
		_, err := svc.DeliverWebhook(ctx, onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID).ID)
		require.NoError(t, err)
	}

	ids := make([]uuid.UUID, n)
	for i := range ids {
		m := mOK
		if i%2 == 1 {
			m = mFail
		}
		ids[i] = onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID).ID
	}
	// One delivery is already finished: its try is logged, nothing else.
	require.NoError(t, svc.cfg.DB.Ent.WebhookDelivery.UpdateOneID(ids[0]).SetStatus(webhookdelivery.StatusSucceeded).Exec(ctx))

	// The first batch is held on a table lock until every other try has
	// arrived, so the count below does not depend on how the sends happen
	// to overlap: the held batch, then one batch for all the rest.
	triesBefore, statementsBefore := webhooksend.Counts(svc.cfg.DB)
	lock, err := svc.cfg.DB.SQL.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer lock.Rollback() //nolint:errcheck // committed below
	_, err = lock.ExecContext(ctx, "LOCK TABLE webhook_deliveries IN EXCLUSIVE MODE")
	require.NoError(t, err)
	start := make(chan struct{})
	results := make([]WebhookDeliveryResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = svc.DeliverWebhook(ctx, id)
		}()
	}
	close(start)
	require.Eventually(t, func() bool { tries, _ := webhooksend.Counts(svc.cfg.DB); return tries-triesBefore == n-1 }, 30*time.Second, 5*time.Millisecond,
		"every try but the finished delivery's reaches the batcher")
	require.NoError(t, lock.Commit())
	wg.Wait()
	_, statements := webhooksend.Counts(svc.cfg.DB)
	require.Equal(t, int64(2), statements-statementsBefore, "the tries that waited shared one statement")

	for i, id := range ids {
		require.NoError(t, errs[i])
		d, err := svc.cfg.DB.Ent.WebhookDelivery.Get(ctx, id)
		require.NoError(t, err)
		attempts, err := svc.cfg.DB.Ent.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(id)).All(ctx)
		require.NoError(t, err)
		switch {
		case i == 0:
			require.Equal(t, webhookdelivery.StatusSucceeded, d.Status)
			require.Zero(t, d.Attempts, "a finished delivery is not counted again")
			require.Empty(t, attempts, "nothing was sent for it")
		case i%2 == 0:
			require.Equal(t, webhookdelivery.StatusSucceeded, d.Status)
			require.True(t, results[i].Done)
			require.Equal(t, 1, d.Attempts)
			require.Len(t, attempts, 1)
			require.Equal(t, 200, attempts[0].StatusCode)
			require.NotNil(t, d.CompletedAt)
			require.Nil(t, d.NextAttemptAt)
		default:
			require.Equal(t, webhookdelivery.StatusPending, d.Status)
			require.False(t, results[i].Done)
			require.Equal(t, 1, d.Attempts)
			require.Len(t, attempts, 1)
			require.Equal(t, 500, attempts[0].StatusCode)
			require.Contains(t, attempts[0].Error, "500")
			require.NotNil(t, d.NextAttemptAt)
			require.WithinDuration(t, results[i].RetryAt, *d.NextAttemptAt, time.Microsecond) // stored to the microsecond
			require.Nil(t, d.CompletedAt)
		}
	}
	require.Len(t, ok.Requests(), 1+n/2-1)
	require.Len(t, failing.Requests(), 1+n/2)
}

// TestDeliverWebhookBoundsAnswer: a receiver cannot make a try read much
// of its answer: headers past webhook.MaxResponseHeaderBytes fail the try,
// and a 2xx whose body never ends succeeds once webhooksend.BodyMax is read,
// without waiting for the body (well within WebhookTimeout).
func TestDeliverWebhookBoundsAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("a", 1<<20))
	}))
	t.Cleanup(huge.Close)
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(endless.Close)

	m, _ := createWebhookMerchant(t, svc, huge.URL)
	res, err := svc.DeliverWebhook(ctx, onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID).ID)
	require.NoError(t, err)
	require.False(t, res.Done)
	require.Nil(t, AttemptStatusCode(res.Attempt), "no answer was read")
	require.Contains(t, res.Attempt.Error, "server response headers exceeded")

	m, _ = createWebhookMerchant(t, svc, endless.URL)
	res, err = svc.DeliverWebhook(ctx, onlyDelivery(t, svc, recordTestEvent(t, svc, confirmedEventInput(m, false)).ID).ID)
	require.NoError(t, err)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
	require.Less(t, res.Attempt.DurationMs, WebhookTimeout.Milliseconds()/2, "the body was not read to its end")
}

// TestDeliverWebhookDNSRebinding: a webhook URL naming a host is accepted
// from its text (nothing is resolved then: the name may well be public),
// and every try resolves it again and checks the address it dials. When
// the name resolves to loopback at delivery time (DNS rebinding), the
// delivery and a redelivery are refused without reaching the receiver that
// listens there, and logged with the generic error; with private addresses
// allowed the same name reaches it (the resolver is the one used).
func TestDeliverWebhookDNSRebinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rcv := testenv.NewReceiver(t, http.StatusOK)
	port := rcv.URL[strings.LastIndex(rcv.URL, ":")+1:]
	hook := "http://rebind.agentpay-test:" + port + "/hooks"
	require.NoError(t, ValidateWebhookURL(hook, false), "a name passes the text check")
	resolver := fakeResolver(t, map[string]netip.Addr{"rebind.agentpay-test.": netip.MustParseAddr("127.0.0.1")})

	for _, allowed := range []bool{false, true} {
		svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true, PublicWebhooksOnly: !allowed}), Config{})
		svc.testWebhooks = svc.newWebhookClientWith(ModeTest, resolver)
		m, _ := createWebhookMerchant(t, svc, hook)
		ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
		_, err := svc.RedeliverWebhook(ctx, m.ID, ev.ID)
		require.NoError(t, err)
		deliveries, err := svc.WebhookDeliveries(ctx, ev.ID)
		require.NoError(t, err)
		require.Len(t, deliveries, 2)
		for _, d := range deliveries {
			res, err := svc.DeliverWebhook(ctx, d.ID)
			require.NoError(t, err)
			if allowed {
				require.NoError(t, res.Err)
				continue
			}
			require.Equal(t, "refused: the webhook URL's host does not resolve to a public address", res.Attempt.Error)
			require.Zero(t, res.Attempt.DurationMs)
		}
		if allowed {
			require.Len(t, rcv.Requests(), 2)
		} else {
			require.Empty(t, rcv.Requests(), "the receiver on loopback was not reached")
		}
	}
}

// fakeResolver is a resolver answering A queries for the names in addrs
// (fully qualified) and nothing else, served in process over DNS's TCP
// framing: no network, no system resolver.
func fakeResolver(t *testing.T, addrs map[string]netip.Addr) *net.Resolver {
	t.Helper()
	serve := func(conn net.Conn) {
		defer conn.Close()
		var size [2]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		q := make([]byte, int(size[0])<<8|int(size[1]))
		if _, err := io.ReadFull(conn, q); err != nil || len(q) < 12 {
			return
		}
		// The question: labels, then type and class.
		i, name := 12, ""
		for i < len(q) && q[i] != 0 {
			n := int(q[i])
			if i+1+n > len(q) {
				return
			}
			name += string(q[i+1:i+1+n]) + "."
			i += 1 + n
		}
		end := i + 5
		if end > len(q) {
			return
		}
		qtype := int(q[i+1])<<8 | int(q[i+2])
		addr, known := addrs[strings.ToLower(name)]
		resp := append([]byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, q[12:end]...)
		if !known {
			resp[3] = 0x83 // NXDOMAIN
		} else if qtype == 1 && addr.Is4() {
			resp[7] = 1
			ip := addr.As4()
			resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4)
			resp = append(resp, ip[:]...)
		}
		_, _ = conn.Write(append([]byte{byte(len(resp) >> 8), byte(len(resp))}, resp...))
	}
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go serve(server)
		return client, nil
	}}
}

// TestWebhookRetryGoesToCurrentURL: a retry after the merchant changes its
// webhook URL is sent to the new URL, not the one the first try went to;
// after the URL is removed, a try fails unsent and says why.
func TestWebhookRetryGoesToCurrentURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	old := testenv.NewReceiver(t, http.StatusInternalServerError)
	moved := testenv.NewReceiver(t, http.StatusOK)
	m, _ := createWebhookMerchant(t, svc, old.URL)
	ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
	d := onlyDelivery(t, svc, ev.ID)

	res, err := svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.False(t, res.Done)
	require.Len(t, old.Requests(), 1)

	require.NoError(t, svc.cfg.DB.Ent.Merchant.UpdateOneID(m.ID).SetTestWebhookURL(moved.URL).Exec(ctx))
	res, err = svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
	require.Len(t, old.Requests(), 1, "the retry does not go to the replaced URL")
	got := moved.Requests()
	require.Len(t, got, 1, "the retry goes to the current URL")
	require.Equal(t, ev.ID.String(), got[0].Header.Get("webhook-id"))

	// Removed: the next delivery's try is a failed try, nothing sent.
	ev2 := recordTestEvent(t, svc, confirmedEventInput(m, false))
	d2 := onlyDelivery(t, svc, ev2.ID)
	require.NoError(t, svc.cfg.DB.Ent.Merchant.UpdateOneID(m.ID).SetTestWebhookURL("").Exec(ctx))
	res, err = svc.DeliverWebhook(ctx, d2.ID)
	require.NoError(t, err)
	require.False(t, res.Done)
	require.ErrorIs(t, res.Err, errNoWebhookURL)
	require.Equal(t, 0, res.Attempt.StatusCode)
	require.Len(t, moved.Requests(), 1)
}

// TestRedeliverAfterWebhookURLSet: an event recorded while the merchant had
// no webhook URL (recorded, not delivered) is delivered once the merchant
// sets one and asks for it again.
func TestRedeliverAfterWebhookURLSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newTestService(t, testenv.New(t, testenv.Options{Jobs: true}), Config{})
	m, _ := createWebhookMerchant(t, svc, "")
	ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
	n, err := svc.cfg.DB.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(ev.ID)).Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "no URL: the event is recorded, not delivered")
	_, err = svc.RedeliverWebhook(ctx, m.ID, ev.ID)
	require.True(t, IsValidation(err), "%v", err)

	rcv := testenv.NewReceiver(t, http.StatusOK)
	require.NoError(t, svc.cfg.DB.Ent.Merchant.UpdateOneID(m.ID).SetTestWebhookURL(rcv.URL).Exec(ctx))
	d, err := svc.RedeliverWebhook(ctx, m.ID, ev.ID)
	require.NoError(t, err)
	res, err := svc.DeliverWebhook(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
	got := rcv.Requests()
	require.Len(t, got, 1)
	require.Equal(t, ev.ID.String(), got[0].Header.Get("webhook-id"))
}
