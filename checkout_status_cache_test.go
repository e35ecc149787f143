package agentpay

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"agentpay/ent/checkoutsession"
	"agentpay/internal/testdb"
)

// TestCheckoutStatusCacheFollowsEveryChange: while statuses are cached,
// every answer equals what the database holds, at once in the process that
// made the change and, on PostgreSQL, in a second process (its own service,
// connections and listener) as soon as the notification arrives: a chain
// selected, an amount below the price, each confirmation, the confirmation,
// a late payment. A row changed behind the service's back (no
// notification) stays as first read: the answers do come from memory.
func TestCheckoutStatusCacheFollowsEveryChange(t *testing.T) {
	ctx := context.Background()
	f := newPaymentFixture(t)
	require.NoError(t, f.svc.CacheCheckoutStatuses(t.Context()))
	pollers := map[string]*Service{"this process": f.svc}
	if testdb.IsPostgres() {
		other := newTestService(t, f.env, Config{DB: testdb.Reopen(t, f.db)})
		require.NoError(t, other.CacheCheckoutStatuses(t.Context()))
		pollers["another process"] = other
	}

	sess, addr := f.open(t, "5")
	id := sess.ExternalID
	stored := func() CheckoutStatus {
		acc, err := f.svc.readStatusAcc(ctx, id)
		require.NoError(t, err)
		acc.fold()
		return acc.st
	}
	answer := func(svc *Service) CheckoutStatus {
		st, err := svc.CheckoutStatus(ctx, id, "")
		require.NoError(t, err)
		st.Required = nil // the configuration's, not the database's
		return *st
	}
	same := func(a, b CheckoutStatus) bool {
		return sameStatus(SessionStatusUpdate{CheckoutStatus: a}, SessionStatusUpdate{CheckoutStatus: b})
	}
	requireFollows := func(step string) {
		t.Helper()
		want := stored()
		require.True(t, same(want, answer(f.svc)), "%s: this process answers what it committed at once", step)
		for name, svc := range pollers {
			require.Eventually(t, func() bool { return same(want, answer(svc)) }, 5*time.Second, 5*time.Millisecond,
				"%s: %s answers %+v, the database holds %+v", step, name, answer(svc), want)
		}
	}

	requireFollows("chain selected")
	f.pay(t, addr, 2_000_000)
	requireFollows("underpaid")
	require.Equal(t, "2", stored().AmountPaid.String())

	// Behind the service's back: no notification, the cached answer stays.
	// First every notification of the changes so far has arrived (they come
	// in commit order: a marker published now comes after them), and each
	// poller has read the session since.
	for name, svc := range pollers {
		sync, err := svc.bus.Subscribe(t.Context(), sessionChangedTopic, "sync")
		require.NoError(t, err)
		require.NoError(t, f.svc.bus.Publish(ctx, nil, sessionChangedTopic, "sync", name))
		select {
		case <-sync:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no notification within 5s", name)
		}
		answer(svc)
	}
	f.db.Ent.CheckoutSession.Update().Where(checkoutsession.ExternalID(id)).SetToken("RAW").ExecX(ctx)
	for name, svc := range pollers {
		require.Equal(t, "USDC", answer(svc).Token, "%s: the poll comes from memory", name)
	}

	f.evm.Commit()
	f.scan(t)
	requireFollows("one confirmation")
	require.Equal(t, "RAW", stored().Token)
	require.NotZero(t, stored().Confirmations)

	f.pay(t, addr, 3_000_000)
	requireFollows("covered")
	f.finalAll(t)
	requireFollows("confirmed")
	require.Equal(t, "confirmed", string(stored().Status))

	f.pay(t, addr, 1_000_000)
	requireFollows("late payment")
	f.finalAll(t)
	requireFollows("late payment final")
	require.Equal(t, "6", stored().AmountPaid.String())
}

// TestCheckoutStatusCacheOnlyWhileWatching: without CacheCheckoutStatuses,
// or once its context ends, every poll reads the database.
func TestCheckoutStatusCacheOnlyWhileWatching(t *testing.T) {
	ctx := context.Background()
	f := newCheckoutFixture(t, false)
	reg := f.merchant(t, "Shop", nil)
	sess := f.session(t, reg.Merchant, "5")
	setToken := func(token string) {
		f.db.Ent.CheckoutSession.Update().Where(checkoutsession.ExternalID(sess.ExternalID)).SetToken(token).ExecX(ctx)
	}
	token := func() string {
		st, err := f.svc.CheckoutStatus(ctx, sess.ExternalID, "")
		require.NoError(t, err)
		return st.Token
	}
	setToken("A")
	require.Equal(t, "A", token())
	setToken("B")
	require.Equal(t, "B", token(), "not cached before CacheCheckoutStatuses")

	watch, stop := context.WithCancel(ctx)
	require.NoError(t, f.svc.CacheCheckoutStatuses(watch))
	require.Equal(t, "B", token())
	setToken("C")
	require.Equal(t, "B", token(), "cached")
	stop()
	require.Eventually(t, func() bool { return token() == "C" }, 5*time.Second, 5*time.Millisecond, "read again once the watch ends")
	setToken("D")
	require.Equal(t, "D", token())
}
