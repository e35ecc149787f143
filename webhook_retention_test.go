package agentpay

import (
	"context"
	"database/sql"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"agentpay/ent"
	"agentpay/ent/acporderevent"
	"agentpay/ent/checkoutsession"
	"agentpay/ent/merchantfeedentry"
	"agentpay/ent/webhookattempt"
	"agentpay/ent/webhookdelivery"
	"agentpay/ent/webhookevent"
	"agentpay/internal/testdb"
	"agentpay/internal/testenv"
)

// TestPruneWebhookHistory: past the retention (by the service's clock),
// delivered and finally failed webhook events go with their deliveries,
// tries and feed lines, and so does an event never delivered; an event
// with a delivery still pending (retrying) stays whatever its age, and so
// does one redelivered within the retention. A second run finds nothing.
func TestPruneWebhookHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now()
	env := testenv.New(t, testenv.Options{Jobs: true, Clock: t0})
	svc := newTestService(t, env, Config{WebhookRetryDelays: []time.Duration{time.Minute}}) // two tries
	ok := testenv.NewReceiver(t, http.StatusOK)
	failing := testenv.NewReceiver(t, http.StatusInternalServerError)
	m, _ := createWebhookMerchant(t, svc, ok.URL)
	down, _ := createWebhookMerchant(t, svc, failing.URL)
	bare, _ := createWebhookMerchant(t, svc, "")
	deliver := func(ev *ent.WebhookEvent) webhookdelivery.Status {
		t.Helper()
		d, err := svc.cfg.DB.Ent.WebhookDelivery.Query().Where(webhookdelivery.EventID(ev.ID), webhookdelivery.StatusEQ(webhookdelivery.StatusPending)).Only(ctx)
		require.NoError(t, err)
		res, err := svc.DeliverWebhook(ctx, d.ID)
		require.NoError(t, err)
		return res.Status
	}

	delivered := recordTestEvent(t, svc, confirmedEventInput(m, false))
	require.Equal(t, webhookdelivery.StatusSucceeded, deliver(delivered))
	failed := recordTestEvent(t, svc, confirmedEventInput(down, false))
	require.Equal(t, webhookdelivery.StatusPending, deliver(failed))
	require.Equal(t, webhookdelivery.StatusFailed, deliver(failed))
	retrying := recordTestEvent(t, svc, confirmedEventInput(down, false))
	require.Equal(t, webhookdelivery.StatusPending, deliver(retrying))
	undelivered := recordTestEvent(t, svc, confirmedEventInput(bare, false))
	redelivered := recordTestEvent(t, svc, confirmedEventInput(m, false))
	require.Equal(t, webhookdelivery.StatusSucceeded, deliver(redelivered))

	env.Clock.Advance(25 * 24 * time.Hour)
	_, err := svc.RedeliverWebhook(ctx, m.ID, redelivered.ID)
	require.NoError(t, err)
	require.Equal(t, webhookdelivery.StatusSucceeded, deliver(redelivered))

	n, err := svc.PruneWebhookHistory(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is older than the retention yet")

	env.Clock.Advance(6 * 24 * time.Hour) // 31 days after the first tries
	n, err = svc.PruneWebhookHistory(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for _, ev := range []*ent.WebhookEvent{delivered, failed, undelivered} {
		require.Zero(t, webhookRows(t, svc, ev.ID), "event %s and all of its rows are gone", ev.ID)
	}
	require.Equal(t, 5, webhookRows(t, svc, retrying.ID), "pending: the event, its delivery, one try, its event's feed line and its try's")
	require.Equal(t, 8, webhookRows(t, svc, redelivered.ID), "redelivered 6 days ago: the event, two deliveries, two tries and three feed lines")
	n, err = svc.PruneWebhookHistory(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	env.Clock.Advance(25 * 24 * time.Hour) // the redelivery's end is past the retention
	n, err = svc.PruneWebhookHistory(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, webhookRows(t, svc, redelivered.ID))
	require.Equal(t, 5, webhookRows(t, svc, retrying.ID), "still pending, however old")
}

// webhookRows counts an event's rows: itself, its deliveries, their tries
// and its merchant feed lines, each 1.
func webhookRows(t *testing.T, svc *Service, eventID uuid.UUID) int {
	t.Helper()
	ctx := context.Background()
	db := svc.cfg.DB.Ent
	events := db.WebhookEvent.Query().Where(webhookevent.ID(eventID)).CountX(ctx)
	deliveries := db.WebhookDelivery.Query().Where(webhookdelivery.EventID(eventID)).CountX(ctx)
	tries := db.WebhookAttempt.Query().Where(webhookattempt.HasDeliveryWith(webhookdelivery.EventID(eventID))).CountX(ctx)
	feed := db.MerchantFeedEntry.Query().Where(merchantfeedentry.EventID(eventID)).CountX(ctx)
	return events + deliveries + tries + feed
}

// TestPruneACPOrderEvents: past the retention, a done ACP order event goes
// unless it is its session's latest (whose seq the next event follows, and
// which says the order was created); a pending one stays, and so do events
// done within the retention. A session's next event still follows its
// latest, an order_update.
func TestPruneACPOrderEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now()
	env := testenv.New(t, testenv.Options{Jobs: true, Clock: t0})
	svc := newTestService(t, env, Config{})
	rcv := testenv.NewReceiver(t, http.StatusOK)
	name := "ACP Shop"
	reg, err := svc.RegisterMerchant(ctx, MerchantInput{Name: &name, Email: checkoutPtr("shop@example.com")})
	require.NoError(t, err)
	auth := &MerchantAuth{Merchant: reg.Merchant, Mode: ModeTest}
	_, err = svc.SetACPWebhook(ctx, auth, rcv.URL)
	require.NoError(t, err)
	session := func(key string) *ent.CheckoutSession {
		t.Helper()
		cs, _, err := svc.CreateACPCheckout(ctx, auth, key, ACPCreate{Currency: "usd", LineItems: []ACPItem{{ID: "a", UnitAmount: 500}}})
		require.NoError(t, err)
		require.NoError(t, svc.cfg.DB.Ent.CheckoutSession.UpdateOneID(cs.ID).SetStatus(checkoutsession.StatusConfirmed).Exec(ctx))
		return cs
	}
	// record records kind on cs and, when send, delivers its ACP event.
	record := func(cs *ent.CheckoutSession, kind string, send bool) {
		t.Helper()
		require.NoError(t, svc.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
			_, err := svc.RecordEvent(ctx, tx, sqlTx, EventInput{MerchantID: reg.Merchant.ID, SessionID: &cs.ID, Type: kind})
			return err
		}))
		if !send {
			return
		}
		e, err := svc.cfg.DB.Ent.ACPOrderEvent.Query().Where(acporderevent.SessionID(cs.ID)).
			Order(ent.Desc(acporderevent.FieldSeq)).First(ctx)
		require.NoError(t, err)
		res, err := svc.DeliverACPOrderEvent(ctx, e.ID)
		require.NoError(t, err)
		require.Equal(t, acporderevent.StatusSucceeded, res.Status)
	}
	seqs := func(cs *ent.CheckoutSession) []int {
		t.Helper()
		return svc.cfg.DB.Ent.ACPOrderEvent.Query().Where(acporderevent.SessionID(cs.ID)).
			Order(ent.Asc(acporderevent.FieldSeq)).Select(acporderevent.FieldSeq).IntsX(ctx)
	}

	refunded := session("a") // three events, all delivered
	record(refunded, EventPaymentConfirmed, true)
	record(refunded, EventRefundCreated, true)
	record(refunded, EventRefundCompleted, true)
	alone := session("b") // one, delivered: its latest
	record(alone, EventPaymentConfirmed, true)
	waiting := session("c") // one delivered, the next pending
	record(waiting, EventPaymentConfirmed, true)
	record(waiting, EventRefundCreated, false)
	env.Clock.Advance(25 * 24 * time.Hour)
	recent := session("d") // delivered 6 days before the prune
	record(recent, EventPaymentConfirmed, true)
	record(recent, EventRefundCreated, true)

	env.Clock.Advance(6 * 24 * time.Hour)
	_, err = svc.PruneWebhookHistory(ctx) // it counts the sessions' webhook events too
	require.NoError(t, err)
	require.Equal(t, []int{3}, seqs(refunded), "only the latest of a done session stays")
	require.Equal(t, []int{1}, seqs(alone))
	require.Equal(t, []int{2}, seqs(waiting), "the pending event stays")
	require.Equal(t, []int{1, 2}, seqs(recent))

	record(refunded, EventRefundCreated, false)
	latest, err := svc.cfg.DB.Ent.ACPOrderEvent.Query().Where(acporderevent.SessionID(refunded.ID), acporderevent.Seq(4)).Only(ctx)
	require.NoError(t, err)
	require.Equal(t, acporderevent.EventTypeOrderUpdate, latest.EventType, "the order is not created again")
}

// TestWebhookRowsTakeTheServiceClock: a webhook event, its deliveries
// (the first and a redelivery), their tries and an ACP order event are
// created at the service's clock, not the machine's, as the retention
// compares them with that clock: with the service's clock 400 days ahead
// of the machine's, an event just recorded is not past a 30-day
// retention.
func TestWebhookRowsTakeTheServiceClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := time.Now().Add(400 * 24 * time.Hour).UTC().Truncate(time.Second)
	env := testenv.New(t, testenv.Options{Jobs: true, Clock: at})
	svc := newTestService(t, env, Config{})
	db := svc.cfg.DB.Ent
	ok := testenv.NewReceiver(t, http.StatusOK)
	m, _ := createWebhookMerchant(t, svc, ok.URL)
	bare, _ := createWebhookMerchant(t, svc, "")

	ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
	undelivered := recordTestEvent(t, svc, confirmedEventInput(bare, false))
	first := onlyDelivery(t, svc, ev.ID)
	res, err := svc.DeliverWebhook(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
	env.Clock.Advance(time.Hour)
	again, err := svc.RedeliverWebhook(ctx, m.ID, ev.ID)
	require.NoError(t, err)

	name := "ACP Shop"
	reg, err := svc.RegisterMerchant(ctx, MerchantInput{Name: &name, Email: checkoutPtr("acp@example.com")})
	require.NoError(t, err)
	auth := &MerchantAuth{Merchant: reg.Merchant, Mode: ModeTest}
	_, err = svc.SetACPWebhook(ctx, auth, ok.URL)
	require.NoError(t, err)
	cs, _, err := svc.CreateACPCheckout(ctx, auth, "k", ACPCreate{Currency: "usd", LineItems: []ACPItem{{ID: "a", UnitAmount: 500}}})
	require.NoError(t, err)
	require.NoError(t, db.CheckoutSession.UpdateOneID(cs.ID).SetStatus(checkoutsession.StatusConfirmed).Exec(ctx))
	require.NoError(t, svc.cfg.DB.WithTx(ctx, func(ctx context.Context, tx *ent.Tx, sqlTx *sql.Tx) error {
		_, err := svc.RecordEvent(ctx, tx, sqlTx, EventInput{MerchantID: reg.Merchant.ID, SessionID: &cs.ID, Type: EventPaymentConfirmed})
		return err
	}))

	for _, c := range []struct {
		row     string
		want    time.Time
		created time.Time
	}{
		{"event", at, db.WebhookEvent.GetX(ctx, ev.ID).CreatedAt},
		{"event with no delivery", at, db.WebhookEvent.GetX(ctx, undelivered.ID).CreatedAt},
		{"first delivery", at, db.WebhookDelivery.GetX(ctx, first.ID).CreatedAt},
		{"its try", at, db.WebhookAttempt.Query().Where(webhookattempt.DeliveryID(first.ID)).OnlyX(ctx).CreatedAt},
		{"redelivery", at.Add(time.Hour), db.WebhookDelivery.GetX(ctx, again.ID).CreatedAt},
		{"ACP order event", at.Add(time.Hour), db.ACPOrderEvent.Query().Where(acporderevent.SessionID(cs.ID)).OnlyX(ctx).CreatedAt},
	} {
		require.WithinDuration(t, c.want, c.created, time.Millisecond, "%s: created at the service's clock", c.row)
	}

	n, err := svc.PruneWebhookHistory(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is older than the retention by the service's clock")
	require.Equal(t, 2, webhookRows(t, svc, undelivered.ID), "the event and its feed line")
}

// TestRedeliveryOfAPrunedEvent: the retention job deleting an event
// between a redelivery's read of it and the redelivery's transaction makes
// the redelivery not found (404), not a broken foreign key (500), and
// creates nothing.
func TestRedeliveryOfAPrunedEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t, testenv.Options{Jobs: true, Clock: time.Now()})
	svc := newTestService(t, env, Config{})
	ok := testenv.NewReceiver(t, http.StatusOK)
	m, _ := createWebhookMerchant(t, svc, ok.URL)
	ev := recordTestEvent(t, svc, confirmedEventInput(m, false))
	res, err := svc.DeliverWebhook(ctx, onlyDelivery(t, svc, ev.ID).ID)
	require.NoError(t, err)
	require.Equal(t, webhookdelivery.StatusSucceeded, res.Status)
	env.Clock.Advance(31 * 24 * time.Hour)

	pruned := 0
	svc.redeliveryRead = func(id uuid.UUID) {
		require.Equal(t, ev.ID, id)
		n, err := svc.PruneWebhookHistory(ctx)
		require.NoError(t, err)
		pruned += n
	}
	_, err = svc.RedeliverOwnWebhook(ctx, &MerchantAuth{Merchant: m, Mode: ModeTest}, ev.ID)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, 1, pruned, "the retention job deleted the event between the read and the redelivery")
	require.Zero(t, webhookRows(t, svc, ev.ID), "nothing created")
	require.Equal(t, 0, testdb.CountRows(t, svc.cfg.DB, "webhook_deliveries"))
}
