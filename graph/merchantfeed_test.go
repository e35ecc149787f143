package graph

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"

	"agentpay"
	"agentpay/chains"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

const merchantEventsSubscription = `subscription($after: Int64) { merchantEvents(after: $after) {
	cursor kind eventId eventType livemode createdAt data
	attempt { deliveryId number statusCode error result durationMs nextRetryAt at } } }`

type merchantEventData struct {
	Cursor    int64
	Kind      string
	EventID   string
	EventType string
	Livemode  bool
	CreatedAt time.Time
	Data      map[string]any
	Attempt   *struct {
		DeliveryID  string
		Number      int
		StatusCode  *int
		Error       *string
		Result      string
		DurationMs  int64
		NextRetryAt *time.Time
	}
}

// subscribeMerchantEvents opens merchantEvents with the merchant secret key
// in connection_init (after: nil for only new lines).
func subscribeMerchantEvents(t *testing.T, url, key string, after *int64) *wsClient {
	t.Helper()
	c := dialWS(t, url, nil)
	c.init(map[string]any{"headers": map[string]any{"X-Checkout-Secret-Key": key}})
	vars := map[string]any{}
	if after != nil {
		vars["after"] = *after
	}
	c.send(map[string]any{"id": "m", "type": "subscribe", "payload": map[string]any{
		"query": merchantEventsSubscription, "variables": vars,
	}})
	return c
}

func (c *wsClient) nextMerchantEvent() merchantEventData {
	c.t.Helper()
	m, err := c.read()
	require.NoError(c.t, err)
	require.Equal(c.t, "m", m.ID)
	require.Equal(c.t, "next", m.Type, string(m.Payload))
	var out gqlResult
	require.NoError(c.t, json.Unmarshal(m.Payload, &out))
	var data struct{ MerchantEvents merchantEventData }
	out.decode(c.t, &data)
	return data.MerchantEvents
}

// requireQuiet: nothing but keep-alives arrives for a moment.
func (c *wsClient) requireQuiet() {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	for {
		var m wsMessage
		if err := c.conn.ReadJSON(&m); err != nil {
			return // the deadline: nothing more was sent
		}
		require.Contains(c.t, []string{"ping", "pong"}, m.Type, "unexpected message %+v", m)
	}
}

// feedNode is one process of the feed tests: a service on a database with
// a Base devnet (blocks only on Commit, 2 confirmations).
type feedNode struct {
	env *testenv.Env
	api *merchantAPI
}

func newFeedEnv(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.New(t, testenv.Options{
		Jobs: true, Chains: []chains.Name{chains.Base},
		Confirmations: map[chains.Name]uint64{chains.Base: 2},
	})
}

func newFeedNode(t *testing.T, env *testenv.Env, cfg agentpay.Config) *feedNode {
	t.Helper()
	srv := newTestServer(t, env, cfg, HandlerConfig{})
	db := cfg.DB
	if db == nil {
		db = env.DB
	}
	return &feedNode{env: env, api: &merchantAPI{URL: srv.URL, DB: db, Svc: srv.Svc}}
}

// payAndConfirm pays a test session of 12.50 on Base through n's service
// (scans included) until it is confirmed; it answers the session's
// external id.
func (n *feedNode) payAndConfirm(t *testing.T, key string) string {
	t.Helper()
	ctx := context.Background()
	svc := n.api.Svc
	scan := func() {
		_, err := svc.ScanDeposits(ctx, agentpay.ModeTest, chains.Base)
		require.NoError(t, err)
	}
	scan() // the watcher starts at the head
	amount := decimal.RequireFromString("12.50")
	created, err := svc.CreateSession(ctx, n.api.auth(t, key), agentpay.SessionInput{Amount: &amount, Currency: "USD"})
	require.NoError(t, err)
	id := created.Session.ExternalID
	d, err := svc.SelectPaymentMethod(ctx, id, "", "base", "USDC")
	require.NoError(t, err)
	evm := n.env.EVM(chains.Base)
	_, err = evm.Send(ctx, common.HexToAddress(d.Address), big.NewInt(12_500_000))
	require.NoError(t, err)
	scan()
	for i := 0; i < 8; i++ {
		st, err := svc.CheckoutStatus(ctx, id, "")
		require.NoError(t, err)
		if st.Status == "confirmed" {
			return id
		}
		evm.Commit()
		scan()
	}
	t.Fatal("the session did not confirm")
	return ""
}

// requireMerchantFeedFlow: a subscriber on sub sees what change records
// for its merchant (test mode), in order: a payment's events, then the
// tries of a failing delivery; another merchant and the live key see
// nothing of it; a second subscriber resuming after the first line gets
// exactly the rest.
func requireMerchantFeedFlow(t *testing.T, sub, change *feedNode) {
	t.Helper()
	ctx := context.Background()
	m := change.api.register(t, "Feed Shop", agentpay.MerchantInput{})
	other := change.api.register(t, "Other Shop", agentpay.MerchantInput{})
	rcv := testenv.NewReceiver(t, http.StatusInternalServerError)
	require.NoError(t, change.api.DB.Ent.Merchant.UpdateOneID(m.ID).SetTestWebhookURL(rcv.URL).Exec(ctx))

	zero := int64(0)
	c := subscribeMerchantEvents(t, sub.api.URL, m.Keys.TestSecretKey, &zero)
	live := subscribeMerchantEvents(t, sub.api.URL, m.Keys.LiveSecretKey, &zero)
	stranger := subscribeMerchantEvents(t, sub.api.URL, other.Keys.TestSecretKey, &zero)

	id := change.payAndConfirm(t, m.Keys.TestSecretKey)
	evs, err := change.api.DB.Ent.WebhookEvent.Query().Where(webhookevent.MerchantID(m.ID)).
		Order(webhookevent.ByCreatedAt()).All(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(evs), 2)

	var seen []merchantEventData
	var types []string
	for range evs {
		e := c.nextMerchantEvent()
		require.Equal(t, "EVENT", e.Kind)
		require.False(t, e.Livemode)
		require.Nil(t, e.Attempt)
		require.Equal(t, id, e.Data["session_external_id"], "the webhook body's data object")
		require.NotZero(t, e.CreatedAt)
		if len(seen) > 0 {
			require.Greater(t, e.Cursor, seen[len(seen)-1].Cursor)
		}
		seen = append(seen, e)
		types = append(types, e.EventType)
	}
	require.Equal(t, agentpay.EventPaymentDetected, types[0])
	require.Equal(t, agentpay.EventPaymentConfirmed, types[len(types)-1])
	confirmed := seen[len(seen)-1]
	require.Equal(t, 12.5, confirmed.Data["amount_usd"])
	require.Equal(t, "base", confirmed.Data["chain"])

	// The confirmed event's delivery fails twice (500), then succeeds.
	dl, err := change.api.DB.Ent.WebhookDelivery.Query().
		Where(webhookdelivery.HasEventWith(webhookevent.IDEQ(evs[len(evs)-1].ID))).Only(ctx)
	require.NoError(t, err)
	for try := 1; try <= 3; try++ {
		if try == 3 {
			rcv.SetStatus(http.StatusOK)
		}
		_, err := change.api.Svc.DeliverWebhook(ctx, dl.ID)
		require.NoError(t, err)
		a := c.nextMerchantEvent()
		require.Equal(t, "DELIVERY_ATTEMPT", a.Kind)
		require.Equal(t, confirmed.EventID, a.EventID)
		require.Equal(t, agentpay.EventPaymentConfirmed, a.EventType)
		require.Equal(t, confirmed.Data, a.Data)
		require.NotNil(t, a.Attempt)
		require.Equal(t, dl.ID.String(), a.Attempt.DeliveryID)
		require.Equal(t, try, a.Attempt.Number)
		require.NotNil(t, a.Attempt.StatusCode)
		if try < 3 {
			require.Equal(t, http.StatusInternalServerError, *a.Attempt.StatusCode)
			require.Equal(t, "retrying", a.Attempt.Result)
			require.NotNil(t, a.Attempt.NextRetryAt)
			require.NotNil(t, a.Attempt.Error)
		} else {
			require.Equal(t, http.StatusOK, *a.Attempt.StatusCode)
			require.Equal(t, "succeeded", a.Attempt.Result)
			require.Nil(t, a.Attempt.NextRetryAt)
			require.Nil(t, a.Attempt.Error)
		}
		seen = append(seen, a)
	}

	// Resuming after the first line replays exactly the rest.
	resumed := subscribeMerchantEvents(t, sub.api.URL, m.Keys.TestSecretKey, &seen[0].Cursor)
	for _, want := range seen[1:] {
		got := resumed.nextMerchantEvent()
		require.Equal(t, want.Cursor, got.Cursor)
		require.Equal(t, want.Kind, got.Kind)
	}
	resumed.requireQuiet()
	c.requireQuiet()

	// Test events never reach the live key, nor anything another merchant.
	live.requireQuiet()
	stranger.requireQuiet()
	for _, key := range []string{m.Keys.LiveSecretKey, other.Keys.TestSecretKey} {
		feed, err := sub.api.Svc.MerchantFeed(ctx, sub.api.auth(t, key), 0)
		require.NoError(t, err)
		require.Empty(t, feed)
	}
}

// TestMerchantEventsSubscription: one process (SQLite's in-process bus, or
// PostgreSQL's LISTEN/NOTIFY when TEST_DATABASE_URL is set).
func TestMerchantEventsSubscription(t *testing.T) {
	env := newFeedEnv(t)
	n := newFeedNode(t, env, agentpay.Config{})
	requireMerchantFeedFlow(t, n, n)
}

// TestMerchantEventsAcrossProcesses: the lines recorded by another service
// on the same PostgreSQL database (a worker process) reach a subscriber.
func TestMerchantEventsAcrossProcesses(t *testing.T) {
	if !testdb.IsPostgres() {
		t.Skip("needs PostgreSQL: set TEST_DATABASE_URL")
	}
	env := newFeedEnv(t)
	a := newFeedNode(t, env, agentpay.Config{})
	b := newFeedNode(t, env, agentpay.Config{DB: testdb.Reopen(t, env.DB)})
	requireMerchantFeedFlow(t, a, b)
}

// TestMerchantEventsLiveKeySeesOnlyLive: a live key's subscription gets the
// live event and not the test one recorded before it; without a key the
// subscription is refused.
func TestMerchantEventsLiveKeySeesOnlyLive(t *testing.T) {
	a := newMerchantAPI(t)
	m := a.register(t, "Mode Shop", agentpay.MerchantInput{})
	sess := a.createSessions(t, m.Keys.TestSecretKey, 1, time.Now().Add(-time.Hour))[0]
	zero := int64(0)
	live := subscribeMerchantEvents(t, a.URL, m.Keys.LiveSecretKey, &zero)
	a.recordEvent(t, m.ID, false, agentpay.EventSessionExpired, sess)
	liveEv := a.recordEvent(t, m.ID, true, agentpay.EventSessionExpired, sess)
	e := live.nextMerchantEvent()
	require.Equal(t, liveEv.ID.String(), e.EventID)
	require.True(t, e.Livemode)

	anon := dialWS(t, a.URL, nil)
	anon.init(map[string]any{})
	anon.send(map[string]any{"id": "m", "type": "subscribe", "payload": map[string]any{"query": merchantEventsSubscription}})
	msg, err := anon.read()
	require.NoError(t, err)
	require.Contains(t, string(msg.Payload), "UNAUTHENTICATED")
}

// TestMerchantEventsReplayIsBounded: resuming from far back replays only
// the newest MaxMerchantFeedPage lines.
func TestMerchantEventsReplayIsBounded(t *testing.T) {
	a := newMerchantAPI(t)
	m := a.register(t, "Busy Shop", agentpay.MerchantInput{})
	sess := a.createSessions(t, m.Keys.TestSecretKey, 1, time.Now().Add(-time.Hour))[0]
	var last string
	for range agentpay.MaxMerchantFeedPage + 5 {
		last = a.recordEvent(t, m.ID, false, agentpay.EventSessionExpired, sess).ID.String()
	}
	zero := int64(0)
	c := subscribeMerchantEvents(t, a.URL, m.Keys.TestSecretKey, &zero)
	first := c.nextMerchantEvent()
	for range agentpay.MaxMerchantFeedPage - 2 {
		c.nextMerchantEvent()
	}
	end := c.nextMerchantEvent()
	require.Equal(t, last, end.EventID)
	require.Greater(t, first.Cursor, int64(5), "the oldest lines were skipped")
	c.requireQuiet()
}
